/*
 * Prints docs/OPERATORS.md from the registry itself, so the document cannot drift from what the
 * EP claims: one line per row with its domain, opset range, accepted element types of the
 * primary input, compile class and notes, then the fusion table (ops/fusions.h): one line per
 * pattern. Run by `make operators`; a test checks the committed file is current.
 * `registry_dump --json` prints the operator rows as one JSON array (domain, op,
 * opset range, input-0 element types spelled out, compile class, note) for tools that act on
 * what the EP claims (tools/fuzz/ generates its cases from it, so a new row is fuzzed at once).
 */
#include "ir/ir.h"
#include "ops/fusions.h"
#include "ops/registry.h"

#include <stdio.h>
#include <string.h>

static const int type_order[] = {IR_DOUBLE, IR_FLOAT, IR_FLOAT16, IR_BFLOAT16, IR_INT8,  IR_INT16,
                                 IR_INT32, IR_INT64,   IR_UINT8,    IR_UINT16, IR_UINT32,
                                 IR_UINT64, IR_BOOL};

/* Raw types (OP_RAW) carried as uint8/int8 arrays, by name. */
static const struct {
  int type;
  const char *name;
} raw_names[] = {{IR_FLOAT8E4M3FN, "float8e4m3fn"}, {IR_FLOAT8E4M3FNUZ, "float8e4m3fnuz"},
                 {IR_FLOAT8E5M2, "float8e5m2"},     {IR_FLOAT8E5M2FNUZ, "float8e5m2fnuz"},
                 {IR_FLOAT8E8M0, "float8e8m0"},     {IR_FLOAT4E2M1, "float4e2m1"},
                 {IR_INT4, "int4"}, {IR_UINT4, "uint4"}, {IR_INT2, "int2"}, {IR_UINT2, "uint2"}};

static void print_raw(uint32_t mask) {
  for (size_t i = 0; i < sizeof raw_names / sizeof *raw_names; i++)
    if (mask & OP_T(raw_names[i].type)) printf(", %s", raw_names[i].name);
}

static void print_types(uint32_t mask) {
  if (mask & OP_SEQ) printf("sequences/optionals of: ");
  if (!mask || (mask & OP_ALL) == OP_ALL) { /* every type MLX holds (float64 only when listed) */
    printf((mask & OP_F64) ? "any, float64" : "any");
    print_raw(mask);
    return;
  }
  const char *sep = "";
  for (size_t i = 0; i < sizeof type_order / sizeof *type_order; i++)
    if (mask & OP_T(type_order[i])) {
      printf("%s%s", sep, ir_elem_name(type_order[i]));
      sep = ", ";
    }
  print_raw(mask);
}

static const char *class_name(op_compile_class c) {
  switch (c) {
    case OP_SHAPELESS: return "shapeless";
    case OP_SHAPELESS_GPU: return "shapeless (GPU), shape-keyed (CPU)";
    case OP_SHAPE_KEYED: return "shape-keyed";
    case OP_VALUE_KEYED: return "value-keyed";
    case OP_EAGER: return "eager";
    case OP_HOST_SHAPE: return "eager, own group";
  }
  return "?";
}

typedef struct counts {
  int rows, ops;
  char last[128];
} counts;

static void count_row(void *user, const op_row *r) {
  counts *c = user;
  char key[128];
  snprintf(key, sizeof key, "%s/%s", r->domain, r->op_type);
  c->rows++;
  if (strcmp(key, c->last) != 0) c->ops++;
  snprintf(c->last, sizeof c->last, "%s", key);
}

static void print_row(void *user, const op_row *r) {
  (void)user;
  printf("| %s | %s | %d..%d | ", r->op_type, r->domain[0] ? r->domain : "ai.onnx", r->since_min,
         r->since_max);
  print_types(r->dtypes);
  printf(" | %s | %s |\n", class_name(r->compile_class), r->note ? r->note : "");
}

/* JSON string body: the notes are plain ASCII prose, but quotes and backslashes must not break
 * the document. */
static void print_json_string(const char *s) {
  putchar('"');
  for (; s && *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') printf("\\%c", ch);
    else if (ch < 0x20) printf("\\u%04x", ch);
    else putchar(ch);
  }
  putchar('"');
}

/* The element types a mask admits, spelled out: "any" (0 or every MLX type) becomes the list,
 * so a reader needs no knowledge of the masks. */
static void print_json_types(uint32_t mask) {
  uint32_t m = mask & ~OP_SEQ;
  if (!m || (m & OP_ALL) == OP_ALL) m |= OP_ALL;
  const char *sep = "";
  putchar('[');
  for (size_t i = 0; i < sizeof type_order / sizeof *type_order; i++)
    if (m & OP_T(type_order[i])) {
      printf("%s\"%s\"", sep, ir_elem_name(type_order[i]));
      sep = ", ";
    }
  for (size_t i = 0; i < sizeof raw_names / sizeof *raw_names; i++)
    if (m & OP_T(raw_names[i].type)) {
      printf("%s\"%s\"", sep, raw_names[i].name);
      sep = ", ";
    }
  putchar(']');
}

static void print_json_row(void *user, const op_row *r) {
  int *first = user;
  printf("%s\n  {\"domain\": ", *first ? "" : ",");
  *first = 0;
  print_json_string(r->domain[0] ? r->domain : "ai.onnx");
  printf(", \"op\": ");
  print_json_string(r->op_type);
  printf(", \"since_min\": %d, \"since_max\": %d, \"dtypes\": ", r->since_min, r->since_max);
  print_json_types(r->dtypes);
  printf(", \"sequences\": %s, \"compile\": ", (r->dtypes & OP_SEQ) ? "true" : "false");
  print_json_string(class_name(r->compile_class));
  printf(", \"note\": ");
  print_json_string(r->note ? r->note : "");
  putchar('}');
}

static void print_fusion(void *user, const op_fusion *f) {
  (void)user;
  printf("| %s | ", f->name);
  for (const char *const *op = f->anchors; *op; op++)
    printf("%s%s", op == f->anchors ? "" : ", ", *op);
  printf(" | %s%s%s | %s | %s |\n", (f->devices & OP_FUSION_CPU) ? "CPU" : "",
         (f->devices & OP_FUSION_CPU) && (f->devices & OP_FUSION_GPU) ? ", " : "",
         (f->devices & OP_FUSION_GPU) ? "GPU" : "",
         f->anchor_class == OP_SHAPELESS ? "its row's" : class_name(f->anchor_class), f->note);
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--json") == 0) {
    int first = 1;
    putchar('[');
    op_registry_visit(print_json_row, &first);
    printf("\n]\n");
    return 0;
  }
  if (argc > 1) {
    fprintf(stderr, "usage: %s [--json]\n", argv[0]);
    return 2;
  }
  counts c = {0};
  op_registry_visit(count_row, &c);
  printf("# Operators\n\n");
  printf("Generated from the registry by `make operators` (tools/registry_dump.c); do not edit.\n");
  printf("%d registry rows covering %d operator types. A row is claimed when the node's opset\n"
         "version lies in its range, every input and output is a tensor of an element type MLX\n"
         "holds (strings never are; float64 only on the CPU device and only for rows that list\n"
         "it, whose translation MLX computes exactly in float64; float8, float4, int4/uint4 and\n"
         "int2/uint2 only for rows that list them, at any input or output, carried as uint8 codes\n"
         "or unpacked int8/uint8 values), input 0 has one of the listed MLX element types, and\n"
         "the row's own predicate agrees; otherwise the node stays on ONNX Runtime's CPU\n"
         "provider and the partition report says why.\n\n",
         c.rows, c.ops);
  printf("| Operator | Domain | Opsets | Element types (input 0) | Compile | Notes |\n");
  printf("|---|---|---|---|---|---|\n");
  op_registry_visit(print_row, NULL);
  printf("\n## Fused patterns\n\n");
  printf("Multi-node spellings one kernel replaces, from the fusion table (src/ops/fusions.c).\n"
         "The plan matches them once, when it is built, from the graph and its constants; the\n"
         "anchor (the spelling's last node) then computes the result from the spelling's inputs,\n"
         "unless the Run's element types or shapes rule the pattern out, in which case every node\n"
         "runs as its row says. Inner nodes are still translated, and run only where something\n"
         "else reads their values. Where a pattern matches, the anchor's compile class is raised\n"
         "to the one shown.\n\n");
  printf("| Pattern | Anchor | Devices | Compile (anchor) | Notes |\n");
  printf("|---|---|---|---|---|\n");
  op_fusions_visit(print_fusion, NULL);
  return 0;
}
