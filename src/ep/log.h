/*
 * Diagnostics through ORT's logger (log.c): EP_LOG(ep, ORT_LOGGING_LEVEL_INFO, fmt, ...) for an
 * EP, ep_log_at for any logger. Messages start with "[MLXExecutionProvider] ".
 */
#ifndef EP_LOG_H
#define EP_LOG_H

#include "ep/ep_types.h"

/* Whether a message at this severity would be shown (skips building long messages). */
bool ep_log_enabled(const OrtApi *ort, const OrtLogger *logger, OrtLoggingLevel severity);
void ep_log_at(const OrtApi *ort, const OrtLogger *logger, OrtLoggingLevel severity,
               const char *file, int line, const char *func, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

#define EP_LOG(ep, severity, ...)                                                           \
  ep_log_at((ep)->ort, (ep)->logger, (severity), __FILE__, __LINE__, __func__, __VA_ARGS__)
#define EP_LOG_ON(ep, severity) ep_log_enabled((ep)->ort, (ep)->logger, (severity))

#endif
