/*
 * Prints the partition report for people (stderr, verbose) and writes it as JSON for machines
 * (the Python CLI reads it). The JSON writer escapes every string it writes.
 */
#include "ep/report.h"

#include "ep/ep_types.h"

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

void report_print(const report *r, FILE *out) {
  fprintf(out, "[%s] partition: %d of %d nodes claimed, %d fused group(s)", EP_NAME, r->claimed,
          r->nodes, r->groups);
  for (int i = 0; i < r->groups; i++) fprintf(out, "%s%d", i ? ", " : " of sizes ", r->group_sizes[i]);
  fprintf(out, "\n");
  for (int i = 0; i < r->n_declines; i++) {
    const report_decline *d = &r->declines[i];
    fprintf(out, "[%s]   declined %s '%s': %s\n", EP_NAME, d->op, d->name, d->reason);
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
