/*
 * Read-only questions about a snapshot that claims and translators ask: attribute lookup with
 * defaults, optional inputs and outputs, element sizes and names, and integer constants.
 */
#include "ir/ir.h"

#include <stdlib.h>
#include <string.h>

const ir_attr *ir_find_attr(const ir_node *n, const char *name) {
  for (int i = 0; i < n->n_attrs; i++)
    if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
  return NULL;
}

int64_t ir_attr_int(const ir_node *n, const char *name, int64_t fallback) {
  const ir_attr *a = ir_find_attr(n, name);
  return a && a->type == IR_ATTR_INT ? a->i : fallback;
}

float ir_attr_float(const ir_node *n, const char *name, float fallback) {
  const ir_attr *a = ir_find_attr(n, name);
  return a && a->type == IR_ATTR_FLOAT ? a->f : fallback;
}

const char *ir_attr_string(const ir_node *n, const char *name, const char *fallback) {
  const ir_attr *a = ir_find_attr(n, name);
  return a && a->type == IR_ATTR_STRING ? a->s : fallback;
}

bool ir_has_input(const ir_node *n, int i) {
  return i >= 0 && i < n->n_inputs && n->inputs[i] != IR_NONE;
}

const ir_value *ir_input(const ir_graph *g, const ir_node *n, int i) {
  return ir_has_input(n, i) ? &g->values[n->inputs[i]] : NULL;
}

const ir_value *ir_output(const ir_graph *g, const ir_node *n, int i) {
  return i >= 0 && i < n->n_outputs && n->outputs[i] != IR_NONE ? &g->values[n->outputs[i]]
                                                                 : NULL;
}

size_t ir_elem_size(int t) {
  switch (t) {
    case IR_BOOL: case IR_UINT8: case IR_INT8: return 1;
    case IR_UINT16: case IR_INT16: case IR_FLOAT16: case IR_BFLOAT16: return 2;
    case IR_FLOAT: case IR_INT32: case IR_UINT32: return 4;
    case IR_DOUBLE: case IR_INT64: case IR_UINT64: case IR_COMPLEX64: return 8;
    case IR_COMPLEX128: return 16;
    default: return 0;
  }
}

const char *ir_elem_name(int t) {
  switch (t) {
    case IR_FLOAT: return "float32";
    case IR_UINT8: return "uint8";
    case IR_INT8: return "int8";
    case IR_UINT16: return "uint16";
    case IR_INT16: return "int16";
    case IR_INT32: return "int32";
    case IR_INT64: return "int64";
    case IR_STRING: return "string";
    case IR_BOOL: return "bool";
    case IR_FLOAT16: return "float16";
    case IR_DOUBLE: return "float64";
    case IR_UINT32: return "uint32";
    case IR_UINT64: return "uint64";
    case IR_COMPLEX64: return "complex64";
    case IR_COMPLEX128: return "complex128";
    case IR_BFLOAT16: return "bfloat16";
    case IR_FLOAT8E4M3FN: case IR_FLOAT8E4M3FNUZ: case IR_FLOAT8E5M2: case IR_FLOAT8E5M2FNUZ:
    case IR_FLOAT8E8M0: return "float8";
    case IR_FLOAT4E2M1: return "float4";
    case IR_UINT4: case IR_INT4: return "int4/uint4";
    case IR_UINT2: case IR_INT2: return "int2/uint2";
    default: return "unknown";
  }
}

int ir_elem_from_onnx(int t) {
  switch (t) {
    case 24: return IR_FLOAT8E8M0;
    case 25: return IR_UINT2;
    case 26: return IR_INT2;
    default: return t;
  }
}

int64_t ir_num_elements(const ir_value *v) {
  if (v->rank < 0) return -1;
  int64_t n = 1;
  for (int i = 0; i < v->rank; i++) {
    if (v->dims[i] < 0) return -1;
    n *= v->dims[i];
  }
  return n;
}

bool ir_const_ints(const ir_value *v, int64_t **vals, size_t *count) {
  *vals = NULL;
  *count = 0;
  if (!v || !v->is_constant || !v->const_data) return false;
  size_t esize = v->elem_type == IR_INT64 ? 8 : v->elem_type == IR_INT32 ? 4 : 0;
  if (!esize) return false;
  size_t n = v->const_bytes / esize;
  int64_t *out = malloc(sizeof(int64_t) * (n ? n : 1));
  if (!out) return false;
  for (size_t i = 0; i < n; i++)
    out[i] = esize == 8 ? ((const int64_t *)v->const_data)[i]
                        : ((const int32_t *)v->const_data)[i];
  *vals = out;
  *count = n;
  return true;
}

const ir_graph *ir_subgraph_of(const ir_node *n, const char *attr) {
  for (int i = 0; i < n->n_subgraphs; i++)
    if (strcmp(n->subgraphs[i].attr, attr) == 0) return n->subgraphs[i].graph;
  return NULL;
}

int ir_find_value(const ir_graph *g, const char *name) {
  for (int v = 0; v < g->n_values; v++)
    if (strcmp(g->values[v].name, name) == 0) return v;
  return IR_NONE;
}
