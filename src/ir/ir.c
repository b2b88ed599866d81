/*
 * Builds the IR snapshot from ORT's graph API and answers small questions about it (attributes,
 * constant integer inputs, element sizes). This is the only file that walks an OrtGraph; every
 * string, shape and attribute is copied into the snapshot's arena so later stages never call back
 * into ORT. Failures return NULL with the ORT message in the caller's buffer.
 */
#include "ir/ir.h"
#include "ir/ir_arena.h"

#include <onnxruntime_c_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct builder {
  const OrtApi *ort;
  int ort_version;
  ir_graph *g;
  ir_arena *arena;
  int cap_values;
  /* name -> value index, open addressing */
  int *slots;
  int n_slots;
  char *err;
  size_t err_len;
} builder;

static bool ort_ok(builder *b, OrtStatus *st) {
  if (!st) return true;
  snprintf(b->err, b->err_len, "ORT graph API: %s", b->ort->GetErrorMessage(st));
  b->ort->ReleaseStatus(st);
  return false;
}
#define TRY(expr) do { if (!ort_ok(b, (expr))) return false; } while (0)

static uint64_t hash_name(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static bool grow_slots(builder *b) {
  int n = b->n_slots ? b->n_slots * 2 : 1024;
  int *slots = malloc(sizeof(int) * (size_t)n);
  if (!slots) return false;
  for (int i = 0; i < n; i++) slots[i] = IR_NONE;
  for (int v = 0; v < b->g->n_values; v++) {
    size_t h = hash_name(b->g->values[v].name) & (size_t)(n - 1);
    while (slots[h] != IR_NONE) h = (h + 1) & (size_t)(n - 1);
    slots[h] = v;
  }
  free(b->slots);
  b->slots = slots;
  b->n_slots = n;
  return true;
}

/* Reads an OrtValue tensor's type, shape and data pointer (borrowed). */
static bool read_tensor_value(builder *b, const OrtValue *value, int *elem, int *rank,
                              const int64_t **dims, const void **data, size_t *bytes) {
  OrtTensorTypeAndShapeInfo *info = NULL;
  TRY(b->ort->GetTensorTypeAndShape(value, &info));
  ONNXTensorElementDataType t;
  size_t nd = 0;
  bool ok = ort_ok(b, b->ort->GetTensorElementType(info, &t)) &&
            ort_ok(b, b->ort->GetDimensionsCount(info, &nd));
  int64_t *d = ok ? ir_arena_alloc(b->arena, sizeof(int64_t) * (nd ? nd : 1)) : NULL;
  ok = ok && d && ort_ok(b, b->ort->GetDimensions(info, d, nd));
  b->ort->ReleaseTensorTypeAndShapeInfo(info);
  if (!ok) return false;
  *elem = (int)t;
  *rank = (int)nd;
  *dims = d;
  void *p = NULL;
  TRY(b->ort->GetTensorMutableData((OrtValue *)value, &p));
  *data = p;
  TRY(b->ort->GetTensorSizeInBytes(value, bytes));
  return true;
}

/* The kind and element type of a sequence's or optional's contents (one level of nesting:
 * seq(tensor), optional(tensor), optional(seq(tensor)); anything deeper is IR_KIND_OTHER). */
static bool describe_container(builder *b, const OrtTypeInfo *ti, int depth, ir_kind *kind,
                               int *elem) {
  enum ONNXType t;
  TRY(b->ort->GetOnnxTypeFromTypeInfo(ti, &t));
  if (t == ONNX_TYPE_TENSOR) {
    const OrtTensorTypeAndShapeInfo *tsi = NULL;
    ONNXTensorElementDataType et = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    TRY(b->ort->CastTypeInfoToTensorInfo(ti, &tsi));
    if (tsi) TRY(b->ort->GetTensorElementType(tsi, &et));
    *elem = (int)et;
    *kind = IR_KIND_TENSOR;
    return true;
  }
  *kind = IR_KIND_OTHER;
  if (depth > 1 || (t != ONNX_TYPE_SEQUENCE && t != ONNX_TYPE_OPTIONAL)) return true;
  OrtTypeInfo *inner = NULL;
  if (t == ONNX_TYPE_SEQUENCE) {
    const OrtSequenceTypeInfo *si = NULL;
    TRY(b->ort->CastTypeInfoToSequenceTypeInfo(ti, &si));
    if (si) TRY(b->ort->GetSequenceElementType(si, &inner));
  } else {
    const OrtOptionalTypeInfo *oi = NULL;
    TRY(b->ort->CastTypeInfoToOptionalTypeInfo(ti, &oi));
    if (oi) TRY(b->ort->GetOptionalContainedTypeInfo(oi, &inner));
  }
  if (!inner) return true;
  ir_kind in_kind = IR_KIND_OTHER;
  bool ok = describe_container(b, inner, depth + 1, &in_kind, elem);
  b->ort->ReleaseTypeInfo(inner);
  if (t == ONNX_TYPE_SEQUENCE && in_kind == IR_KIND_TENSOR) *kind = IR_KIND_SEQUENCE;
  if (t == ONNX_TYPE_OPTIONAL && in_kind == IR_KIND_TENSOR) *kind = IR_KIND_OPTIONAL_TENSOR;
  if (t == ONNX_TYPE_OPTIONAL && in_kind == IR_KIND_SEQUENCE) *kind = IR_KIND_OPTIONAL_SEQUENCE;
  return ok;
}

static bool describe_value(builder *b, const OrtValueInfo *vi, ir_value *v) {
  const OrtTypeInfo *ti = NULL;
  TRY(b->ort->GetValueInfoTypeInfo(vi, &ti));
  v->elem_type = IR_UNDEFINED;
  v->rank = -1;
  if (!ti) return true;
  enum ONNXType kind;
  TRY(b->ort->GetOnnxTypeFromTypeInfo(ti, &kind));
  v->is_tensor = kind == ONNX_TYPE_TENSOR;
  if (!v->is_tensor) return describe_container(b, ti, 0, &v->kind, &v->elem_type);
  v->kind = IR_KIND_TENSOR;
  const OrtTensorTypeAndShapeInfo *tsi = NULL;
  TRY(b->ort->CastTypeInfoToTensorInfo(ti, &tsi));
  if (!tsi) return true;
  ONNXTensorElementDataType t;
  TRY(b->ort->GetTensorElementType(tsi, &t));
  v->elem_type = (int)t;
  if (b->ort_version >= 24 && !b->ort->TensorTypeAndShape_HasShape(tsi))
    return true; /* no shape information: rank stays -1 (unknown), not 0 (scalar) */
  size_t nd = 0;
  TRY(b->ort->GetDimensionsCount(tsi, &nd));
  int64_t *dims = ir_arena_alloc(b->arena, sizeof(int64_t) * (nd ? nd : 1));
  if (!dims) return false;
  TRY(b->ort->GetDimensions(tsi, dims, nd));
  /* ORT reports a missing shape as rank 0 with no dims only for scalars; symbolic dims are -1. */
  for (size_t i = 0; i < nd; i++)
    if (dims[i] < 0) dims[i] = IR_DIM_UNKNOWN;
  v->rank = (int)nd;
  v->dims = dims;
  return true;
}

/* Finds or adds the value named by vi. Writes its index (IR_NONE for NULL vi). */
static bool intern_value(builder *b, const OrtValueInfo *vi, int *index) {
  *index = IR_NONE;
  if (!vi) return true;
  const char *name = NULL;
  TRY(b->ort->GetValueInfoName(vi, &name));
  if (!name || !*name) return true; /* an omitted optional input */
  if (b->g->n_values * 2 >= b->n_slots && !grow_slots(b)) goto oom;
  size_t h = hash_name(name) & (size_t)(b->n_slots - 1);
  while (b->slots[h] != IR_NONE) {
    if (strcmp(b->g->values[b->slots[h]].name, name) == 0) {
      *index = b->slots[h];
      return true;
    }
    h = (h + 1) & (size_t)(b->n_slots - 1);
  }
  if (b->g->n_values == b->cap_values) {
    int cap = b->cap_values ? b->cap_values * 2 : 256;
    ir_value *vals = realloc(b->g->values, sizeof(ir_value) * (size_t)cap);
    if (!vals) goto oom;
    b->g->values = vals;
    b->cap_values = cap;
  }
  ir_value *v = &b->g->values[b->g->n_values];
  memset(v, 0, sizeof *v);
  v->producer = IR_NONE;
  v->first_readers[0] = v->first_readers[1] = IR_NONE;
  v->name = ir_arena_strdup(b->arena, name);
  if (!v->name) goto oom;
  if (!describe_value(b, vi, v)) return false;
  bool outer = false;
  TRY(b->ort->ValueInfo_IsFromOuterScope(vi, &outer));
  v->is_outer_scope = outer;
  bool is_const = false;
  TRY(b->ort->ValueInfo_IsConstantInitializer(vi, &is_const));
  if (is_const) {
    const OrtValue *init = NULL;
    TRY(b->ort->ValueInfo_GetInitializerValue(vi, &init));
    if (init) {
      int elem, rank;
      const int64_t *dims;
      if (!read_tensor_value(b, init, &elem, &rank, &dims, &v->const_data, &v->const_bytes))
        return false;
      v->is_constant = true;
      v->elem_type = elem;
      v->rank = rank;
      v->dims = dims;
    }
  }
  b->slots[h] = b->g->n_values;
  *index = b->g->n_values++;
  return true;
oom:
  snprintf(b->err, b->err_len, "out of memory while snapshotting the graph");
  return false;
}

static bool read_attr(builder *b, const OrtOpAttr *oa, ir_attr *a) {
  const char *name = NULL;
  OrtOpAttrType t;
  TRY(b->ort->OpAttr_GetName(oa, &name));
  memset(a, 0, sizeof *a);
  a->name = ir_arena_strdup(b->arena, name);
  OrtStatus *type_st = b->ort->OpAttr_GetType(oa, &t);
  if (type_st) { /* a type the API has no code for (Optional's TypeProto 'type'): kept unread */
    b->ort->ReleaseStatus(type_st);
    a->type = IR_ATTR_OTHER;
    return true;
  }
  size_t got = 0;
  switch (t) {
    case ORT_OP_ATTR_INT:
      a->type = IR_ATTR_INT;
      TRY(b->ort->ReadOpAttr(oa, t, &a->i, sizeof a->i, &got));
      return true;
    case ORT_OP_ATTR_FLOAT:
      a->type = IR_ATTR_FLOAT;
      TRY(b->ort->ReadOpAttr(oa, t, &a->f, sizeof a->f, &got));
      return true;
    case ORT_OP_ATTR_STRING:
    case ORT_OP_ATTR_INTS:
    case ORT_OP_ATTR_FLOATS: {
      /* Ask for the size first: the call fails and reports the bytes it needs. */
      OrtStatus *st = b->ort->ReadOpAttr(oa, t, NULL, 0, &got);
      if (st) b->ort->ReleaseStatus(st);
      char *buf = ir_arena_alloc(b->arena, got + 1);
      if (!buf) return false;
      if (got) TRY(b->ort->ReadOpAttr(oa, t, buf, got, &got));
      buf[got] = 0;
      if (t == ORT_OP_ATTR_STRING) {
        a->type = IR_ATTR_STRING;
        a->s = buf;
      } else if (t == ORT_OP_ATTR_INTS) {
        a->type = IR_ATTR_INTS;
        a->ints = (const int64_t *)buf;
        a->count = got / sizeof(int64_t);
      } else {
        a->type = IR_ATTR_FLOATS;
        a->floats = (const float *)buf;
        a->count = got / sizeof(float);
      }
      return true;
    }
    case ORT_OP_ATTR_TENSOR: {
      a->type = IR_ATTR_TENSOR;
      OrtValue *value = NULL;
      TRY(b->ort->OpAttr_GetTensorAttributeAsOrtValue(oa, &value));
      const void *data = NULL;
      bool ok = read_tensor_value(b, value, &a->tensor_elem_type, &a->tensor_rank,
                                  &a->tensor_dims, &data, &a->tensor_bytes);
      void *copy = ok ? ir_arena_alloc(b->arena, a->tensor_bytes ? a->tensor_bytes : 1) : NULL;
      if (copy && a->tensor_bytes) memcpy(copy, data, a->tensor_bytes);
      a->tensor_data = copy;
      b->ort->ReleaseValue(value);
      return ok && copy;
    }
    case ORT_OP_ATTR_STRINGS: {
      /* ORT writes the strings back to back, each NUL-terminated: kept as is in s, with their
       * number in count (0 and s NULL when ORT cannot read them). */
      a->type = IR_ATTR_STRINGS;
      OrtStatus *st = b->ort->ReadOpAttr(oa, t, NULL, 0, &got);
      if (st) b->ort->ReleaseStatus(st);
      if (!got) return true;
      char *buf = ir_arena_alloc(b->arena, got + 1);
      if (!buf) return false;
      st = b->ort->ReadOpAttr(oa, t, buf, got, &got);
      if (st) {
        b->ort->ReleaseStatus(st);
        return true;
      }
      buf[got] = 0;
      for (size_t i = 0; i < got; i++) a->count += buf[i] == 0;
      a->s = buf;
      return true;
    }
    default:
      a->type = IR_ATTR_OTHER;
      return true;
  }
}

static bool snapshot_all(builder *b, const OrtGraph *graph);
static void free_tree(ir_graph *g);

/* Snapshots one subgraph of a node into a graph of its own that shares b's arena. */
static bool snapshot_subgraph(builder *b, const OrtGraph *graph, ir_graph **out) {
  builder sub = {.ort = b->ort, .ort_version = b->ort_version, .arena = b->arena,
                 .err = b->err, .err_len = b->err_len};
  *out = sub.g = calloc(1, sizeof(ir_graph));
  if (!sub.g) return false;
  sub.g->arena = b->arena;
  sub.g->enclosing = b->g;
  bool ok = grow_slots(&sub) && snapshot_all(&sub, graph);
  free(sub.slots);
  return ok;
}

/* Implicit inputs and subgraphs (control-flow nodes only; cheap to ask of every node). */
/* One more node input reads v; node is the reading node's index. */
static void count_reader(ir_value *v, int node) {
  if (v->readers < 2) v->first_readers[v->readers] = node;
  v->readers++;
}

static bool snapshot_control(builder *b, const OrtNode *on, ir_node *n) {
  size_t count = 0;
  TRY(b->ort->Node_GetNumSubgraphs(on, &count));
  if (!count) return true;
  const OrtGraph **graphs = ir_arena_alloc(b->arena, sizeof(*graphs) * count);
  const char **names = ir_arena_alloc(b->arena, sizeof(*names) * count);
  ir_subgraph *subs = ir_arena_alloc(b->arena, sizeof(ir_subgraph) * count);
  if (!graphs || !names || !subs) return false;
  TRY(b->ort->Node_GetSubgraphs(on, graphs, count, names));
  n->subgraphs = subs;
  for (size_t i = 0; i < count; i++) {
    subs[i].attr = ir_arena_strdup(b->arena, names[i] ? names[i] : "");
    n->n_subgraphs = (int)i + 1; /* freed with the node from here on */
    if (!subs[i].attr || !snapshot_subgraph(b, graphs[i], &subs[i].graph)) return false;
  }
  size_t n_impl = 0;
  TRY(b->ort->Node_GetNumImplicitInputs(on, &n_impl));
  const OrtValueInfo **vis = ir_arena_alloc(b->arena, sizeof(*vis) * (n_impl + 1));
  int *impl = ir_arena_alloc(b->arena, sizeof(int) * (n_impl + 1));
  if (!vis || !impl) return false;
  if (n_impl) TRY(b->ort->Node_GetImplicitInputs(on, vis, n_impl));
  int index = (int)(n - b->g->nodes);
  for (size_t i = 0; i < n_impl; i++) {
    if (!intern_value(b, vis[i], &impl[i])) return false;
    if (impl[i] != IR_NONE) count_reader(&b->g->values[impl[i]], index);
  }
  n->implicit = impl;
  n->n_implicit = (int)n_impl;
  return true;
}

static bool snapshot_node(builder *b, const OrtNode *on, int index) {
  ir_node *n = &b->g->nodes[index];
  const char *s;
  n->ort_node = on;
  TRY(b->ort->Node_GetName(on, &s));
  n->name = ir_arena_strdup(b->arena, s ? s : "");
  TRY(b->ort->Node_GetOperatorType(on, &s));
  n->op_type = ir_arena_strdup(b->arena, s);
  TRY(b->ort->Node_GetDomain(on, &s));
  n->domain = ir_arena_strdup(b->arena, s ? s : "");
  TRY(b->ort->Node_GetSinceVersion(on, &n->since_version));
  TRY(b->ort->Node_GetEpName(on, &s));
  n->assigned_ep = ir_arena_strdup(b->arena, s ? s : "");

  size_t count = 0;
  TRY(b->ort->Node_GetNumInputs(on, &count));
  const OrtValueInfo **vis = ir_arena_alloc(b->arena, sizeof(*vis) * (count + 1));
  int *ins = ir_arena_alloc(b->arena, sizeof(int) * (count + 1));
  if (!vis || !ins) return false;
  if (count) TRY(b->ort->Node_GetInputs(on, vis, count));
  for (size_t i = 0; i < count; i++) {
    if (!intern_value(b, vis[i], &ins[i])) return false;
    if (ins[i] != IR_NONE) count_reader(&b->g->values[ins[i]], index);
  }
  n->inputs = ins;
  n->n_inputs = (int)count;

  TRY(b->ort->Node_GetNumOutputs(on, &count));
  vis = ir_arena_alloc(b->arena, sizeof(*vis) * (count + 1));
  int *outs = ir_arena_alloc(b->arena, sizeof(int) * (count + 1));
  if (!vis || !outs) return false;
  if (count) TRY(b->ort->Node_GetOutputs(on, vis, count));
  for (size_t i = 0; i < count; i++) {
    if (!intern_value(b, vis[i], &outs[i])) return false;
    if (outs[i] != IR_NONE) b->g->values[outs[i]].producer = index;
  }
  n->outputs = outs;
  n->n_outputs = (int)count;

  TRY(b->ort->Node_GetNumAttributes(on, &count));
  const OrtOpAttr **oas = ir_arena_alloc(b->arena, sizeof(*oas) * (count + 1));
  ir_attr *attrs = ir_arena_alloc(b->arena, sizeof(ir_attr) * (count + 1));
  if (!oas || !attrs) return false;
  if (count) TRY(b->ort->Node_GetAttributes(on, oas, count));
  for (size_t i = 0; i < count; i++)
    if (!read_attr(b, oas[i], &attrs[i])) return false;
  n->attrs = attrs;
  n->n_attrs = (int)count;
  return snapshot_control(b, on, n);
}

static bool snapshot_boundary(builder *b, const OrtGraph *graph, bool inputs) {
  size_t count = 0;
  TRY(inputs ? b->ort->Graph_GetNumInputs(graph, &count)
             : b->ort->Graph_GetNumOutputs(graph, &count));
  const OrtValueInfo **vis = ir_arena_alloc(b->arena, sizeof(*vis) * (count + 1));
  int *idx = ir_arena_alloc(b->arena, sizeof(int) * (count + 1));
  if (!vis || !idx) return false;
  if (count)
    TRY(inputs ? b->ort->Graph_GetInputs(graph, vis, count)
               : b->ort->Graph_GetOutputs(graph, vis, count));
  for (size_t i = 0; i < count; i++) {
    if (!intern_value(b, vis[i], &idx[i])) return false;
    if (idx[i] == IR_NONE) continue;
    if (inputs) b->g->values[idx[i]].is_graph_input = true;
    else b->g->values[idx[i]].is_graph_output = true;
  }
  if (inputs) {
    b->g->graph_inputs = idx;
    b->g->n_graph_inputs = (int)count;
  } else {
    b->g->graph_outputs = idx;
    b->g->n_graph_outputs = (int)count;
  }
  return true;
}

static bool snapshot_all(builder *b, const OrtGraph *graph) {
  size_t n = 0;
  TRY(b->ort->Graph_GetNumNodes(graph, &n));
  const OrtNode **nodes = malloc(sizeof(*nodes) * (n + 1));
  b->g->nodes = ir_arena_alloc(b->arena, sizeof(ir_node) * (n + 1));
  if (!nodes || !b->g->nodes) {
    free(nodes);
    snprintf(b->err, b->err_len, "out of memory while snapshotting the graph");
    return false;
  }
  const OrtNode *parent = NULL;
  const char *parent_op = "";
  bool ok = ort_ok(b, b->ort->Graph_GetParentNode(graph, &parent));
  if (ok && parent) ok = ort_ok(b, b->ort->Node_GetOperatorType(parent, &parent_op));
  b->g->parent_op = ir_arena_strdup(b->arena, parent_op ? parent_op : "");
  ok = ok && (n == 0 || ort_ok(b, b->ort->Graph_GetNodes(graph, nodes, n)));
  for (size_t i = 0; ok && i < n; i++) ok = snapshot_node(b, nodes[i], (int)i);
  free(nodes);
  b->g->n_nodes = (int)n;
  return ok && snapshot_boundary(b, graph, true) && snapshot_boundary(b, graph, false);
}

/* A builder with an empty graph that owns a new arena; false (and a message) when out of memory. */
static bool builder_start(builder *b) {
  b->err[0] = 0;
  b->g = calloc(1, sizeof(ir_graph));
  b->arena = b->g ? ir_arena_new() : NULL;
  if (!b->arena) {
    free(b->g);
    snprintf(b->err, b->err_len, "out of memory while snapshotting the graph");
    return false;
  }
  b->g->arena = b->arena;
  b->g->owns_arena = true;
  return true;
}

/* Frees the builder's scratch; the graph when !ok (NULL then, with a message). */
static ir_graph *builder_finish(builder *b, bool ok, const char *what) {
  free(b->slots);
  if (!ok) {
    if (!b->err[0]) snprintf(b->err, b->err_len, "out of memory while snapshotting the %s", what);
    ir_graph_free(b->g);
    return NULL;
  }
  return b->g;
}

ir_graph *ir_snapshot(const OrtApi *ort, int ort_version, const OrtGraph *graph, char *err,
                      size_t err_len) {
  builder b = {.ort = ort, .ort_version = ort_version, .err = err, .err_len = err_len};
  if (!builder_start(&b)) return NULL;
  return builder_finish(&b, grow_slots(&b) && snapshot_all(&b, graph), "graph");
}

static void free_tree(ir_graph *g) {
  if (!g) return;
  for (int i = 0; g->nodes && i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i].n_subgraphs; k++) free_tree(g->nodes[i].subgraphs[k].graph);
  free(g->values);
  free(g);
}

void ir_graph_free(ir_graph *g) {
  if (!g) return;
  ir_arena *arena = g->owns_arena ? g->arena : NULL;
  free_tree(g); /* the nodes live in the arena: free the subgraphs before it */
  ir_arena_free(arena);
}

ir_graph *ir_snapshot_node(const OrtApi *ort, int ort_version, const OrtNode *node, char *err,
                           size_t err_len) {
  builder b = {.ort = ort, .ort_version = ort_version, .err = err, .err_len = err_len};
  if (!builder_start(&b)) return NULL;
  b.g->parent_op = "";
  b.g->nodes = ir_arena_alloc(b.arena, sizeof(ir_node));
  bool ok = b.g->nodes && grow_slots(&b);
  if (ok) b.g->n_nodes = 1;
  return builder_finish(&b, ok && snapshot_node(&b, node, 0), "node");
}
