/*
 * The EP's diagnostics through ORT's logger, so that the session's log_severity_level decides
 * what appears (ORT's default, WARNING, shows only warnings): one call that formats a message,
 * tags it with the EP's name and hands it to Logger_LogMessage, releasing the status it returns.
 * The verbose option's stderr prints stay where they are (ep.c, capability.c): tools parse them.
 */
#include "ep/log.h"

#include <stdarg.h>
#include <stdio.h>

bool ep_log_enabled(const OrtApi *ort, const OrtLogger *logger, OrtLoggingLevel severity) {
  if (!ort || !logger) return false;
  OrtLoggingLevel level = ORT_LOGGING_LEVEL_WARNING;
  OrtStatus *st = ort->Logger_GetLoggingSeverityLevel(logger, &level);
  if (st) {
    ort->ReleaseStatus(st);
    return true; /* unknown: let ORT's own filter decide */
  }
  return severity >= level;
}

void ep_log_at(const OrtApi *ort, const OrtLogger *logger, OrtLoggingLevel severity,
               const char *file, int line, const char *func, const char *fmt, ...) {
  if (!ep_log_enabled(ort, logger, severity)) return;
  char msg[2048];
  int head = snprintf(msg, sizeof msg, "[%s] ", EP_NAME);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg + head, sizeof msg - (size_t)head, fmt, ap);
  va_end(ap);
  OrtStatus *st = ort->Logger_LogMessage(logger, severity, msg, file, line, func);
  if (st) ort->ReleaseStatus(st); /* a message that cannot be logged is not an error */
}
