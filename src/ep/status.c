/*
 * The one place OrtStatus objects are created: internal code returns MX_* codes and messages,
 * and the ABI edge turns them into statuses here, prefixed with the EP's name.
 */
#include "ep/ep_types.h"

#include <stdarg.h>
#include <stdio.h>

OrtStatus *ep_status(const OrtApi *ort, int code, const char *fmt, ...) {
  char msg[1536];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ort->CreateStatus((OrtErrorCode)code, msg);
}
