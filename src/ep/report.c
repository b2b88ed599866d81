/*
 * Gives the partition report to people (ORT's logger: the summary at INFO, each decline at
 * VERBOSE; stderr with verbose on) and writes it as JSON for machines
 * (the Python CLI reads it). The JSON writer escapes every string it writes.
 */
#include "ep/report.h"

#include "ep/ep_types.h"
#include "ep/log.h"

void report_json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

/* The summary line, without the EP's tag (shared by the print and the log). */
static void summary_line(const report *r, char *buf, size_t len) {
  size_t at = (size_t)snprintf(buf, len, "partition: %d of %d nodes claimed, %d fused group(s)",
                               r->claimed, r->nodes, r->groups);
  for (int i = 0; i < r->groups && at < len; i++)
    at += (size_t)snprintf(buf + at, len - at, "%s%d", i ? ", " : " of sizes ", r->group_sizes[i]);
}

void report_print(const report *r, FILE *out) {
  char line[2048];
  summary_line(r, line, sizeof line);
  fprintf(out, "[%s] %s\n", EP_NAME, line);
  for (int i = 0; i < r->n_declines; i++) {
    const report_decline *d = &r->declines[i];
    fprintf(out, "[%s]   declined %s '%s': %s\n", EP_NAME, d->op, d->name, d->reason);
  }
}

void report_log(const report *r, const mlx_ep *ep) {
  if (EP_LOG_ON(ep, ORT_LOGGING_LEVEL_INFO)) {
    char line[2048];
    summary_line(r, line, sizeof line);
    EP_LOG(ep, ORT_LOGGING_LEVEL_INFO, "%s", line);
  }
  if (!EP_LOG_ON(ep, ORT_LOGGING_LEVEL_VERBOSE)) return;
  for (int i = 0; i < r->n_declines; i++) {
    const report_decline *d = &r->declines[i];
    EP_LOG(ep, ORT_LOGGING_LEVEL_VERBOSE, "declined %s '%s': %s", d->op, d->name, d->reason);
  }
}

int report_write_json(const report *r, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "{\"ep\": \"%s\", \"nodes\": %d, \"claimed\": %d, \"groups\": %d, \"group_sizes\": [",
          EP_NAME, r->nodes, r->claimed, r->groups);
  for (int i = 0; i < r->groups; i++) fprintf(f, "%s%d", i ? ", " : "", r->group_sizes[i]);
  fprintf(f, "], \"declined\": [");
  for (int i = 0; i < r->n_declines; i++) {
    const report_decline *d = &r->declines[i];
    fprintf(f, "%s\n  {\"op\": ", i ? "," : "");
    report_json_string(f, d->op);
    fprintf(f, ", \"domain\": ");
    report_json_string(f, d->domain[0] ? d->domain : "ai.onnx");
    fprintf(f, ", \"opset\": %d, \"name\": ", d->since_version);
    report_json_string(f, d->name);
    fprintf(f, ", \"reason\": ");
    report_json_string(f, d->reason);
    fputc('}', f);
  }
  fprintf(f, "]}\n");
  return fclose(f) == 0 ? 0 : -1;
}
