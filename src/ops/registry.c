/*
 * The registry's table and the generic part of every claim: it lists the operator families in
 * one place, finds the row matching a node's domain, op type and opset version, checks what every
 * operator needs (tensors of element types MLX can hold, the row's dtype mask), then asks the
 * row's own predicate. The ONNX -> MLX dtype mapping lives here, with "unsupported" as default.
 */
#include "ops/registry.h"
#include "ops/families.h"
#include "mlx/mx.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const op_row *const families[] = {
    ops_elementwise_rows,   ops_activation_rows,    ops_math_rows,       ops_shape_rows,
    ops_pad_rows,           ops_index_rows,         ops_value_shaped_rows, ops_reduce_rows,
    ops_norm_rows,          ops_constant_rows,      ops_norm_channel_rows, ops_resize_rows,
    ops_conv_rows,          ops_pool_rows,          ops_ssm_scatter_rows, ops_ssm_conv_rows,
    ops_ssm_attention_rows, ops_ssm_gates_rows,     ops_quant_rows,      ops_attention_rows,
    ops_signal_rows,        ops_vision_rows,        ops_linalg_rows,     ops_random_rows,
    ops_misc_nn_rows,       ops_rnn_rows,           ops_deform_conv_rows, ops_tfidf_rows,
    ops_sequence_rows,      ops_control_rows,       ops_llm_quant_rows,  ops_llm_norm_rows,
    ops_llm_rotary_rows,    ops_llm_attention_rows, ops_llm_gather_rows, ops_llm_fused_rows,
    ops_llm_mha_rows,       ops_ml_rows,            ops_ml_tree_rows,    ops_ml_svm_rows,
    NULL};

int ir_to_mx_dtype(int t) {
  switch (t) {
    case IR_BOOL: return MX_BOOL;
    case IR_UINT8: return MX_UINT8;
    case IR_UINT16: return MX_UINT16;
    case IR_UINT32: return MX_UINT32;
    case IR_UINT64: return MX_UINT64;
    case IR_INT8: return MX_INT8;
    case IR_INT16: return MX_INT16;
    case IR_INT32: return MX_INT32;
    case IR_INT64: return MX_INT64;
    case IR_FLOAT16: return MX_FLOAT16;
    case IR_FLOAT: return MX_FLOAT32;
    case IR_BFLOAT16: return MX_BFLOAT16;
    case IR_DOUBLE: return MX_FLOAT64; /* claimed only for OP_F64 rows on the CPU device */
    default: return -1; /* strings, complex, float8/4, int4: not claimed */
  }
}

int ir_carrier_mx_dtype(int t) {
  switch (t) {
    case IR_FLOAT8E4M3FN: case IR_FLOAT8E4M3FNUZ: case IR_FLOAT8E5M2: case IR_FLOAT8E5M2FNUZ:
    case IR_FLOAT8E8M0: case IR_FLOAT4E2M1: /* codes */
    case IR_UINT4: case IR_UINT2: return MX_UINT8; /* values */
    case IR_INT4: case IR_INT2: return MX_INT8;    /* values */
    default: return -1;
  }
}

int ir_value_mx_dtype(int t) {
  int d = ir_to_mx_dtype(t);
  return d >= 0 ? d : ir_carrier_mx_dtype(t);
}

bool op_decline(op_why why, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why.text, why.len, fmt, ap);
  va_end(ap);
  return false;
}

void op_registry_visit(op_visit_fn fn, void *user) {
  for (int f = 0; families[f]; f++)
    for (const op_row *r = families[f]; r->op_type; r++) fn(user, r);
}

static bool same_op(const op_row *r, const char *domain, const char *op_type) {
  const char *d = strcmp(domain, "ai.onnx") == 0 ? "" : domain;
  return strcmp(r->op_type, op_type) == 0 && strcmp(r->domain, d) == 0;
}

const op_row *op_lookup(const char *domain, const char *op_type, int since) {
  for (int f = 0; families[f]; f++)
    for (const op_row *r = families[f]; r->op_type; r++)
      if (same_op(r, domain, op_type) && since >= r->since_min && since <= r->since_max) return r;
  return NULL;
}

/* Explains why no row matched: unknown op, or known op at another opset. */
static void explain_missing(const ir_node *n, op_why why) {
  int lo = 0, hi = 0;
  for (int f = 0; families[f]; f++)
    for (const op_row *r = families[f]; r->op_type; r++)
      if (same_op(r, n->domain, n->op_type)) {
        if (!lo || r->since_min < lo) lo = r->since_min;
        if (r->since_max > hi) hi = r->since_max;
      }
  const char *dom = n->domain[0] ? n->domain : "ai.onnx";
  if (lo)
    op_decline(why, "%s (%s) opset version %d is not translated (supported: %d..%d)",
               n->op_type, dom, n->since_version, lo, hi);
  else
    op_decline(why, "no MLX translation for %s in domain %s", n->op_type, dom);
}

static const char *container_words(ir_kind kind) {
  switch (kind) {
    case IR_KIND_OPTIONAL_SEQUENCE: return "an optional sequence";
    case IR_KIND_UNKNOWN: return "of a type ONNX Runtime did not infer";
    default: return "a map or nested sequence";
  }
}

static bool boundary_ok(const ir_graph *g, const ir_node *n, const op_row *r,
                        const op_claim_env *env, op_why why) {
  for (int pass = 0; pass < 2; pass++) {
    int count = pass ? n->n_outputs : n->n_inputs;
    for (int i = 0; i < count; i++) {
      const ir_value *v = pass ? ir_output(g, n, i) : ir_input(g, n, i);
      if (!v) continue;
      if (!v->is_tensor && !(r->dtypes & OP_SEQ))
        return op_decline(why, "%s %d ('%s') is not a tensor (sequence/map/optional)",
                          pass ? "output" : "input", i, v->name);
      if (!v->is_tensor && v->kind != IR_KIND_SEQUENCE && v->kind != IR_KIND_OPTIONAL_TENSOR)
        return op_decline(why, "%s %d ('%s') is %s, which MLX groups do not hold (only "
                          "sequences of tensors and optional tensors)", pass ? "output" : "input",
                          i, v->name, container_words(v->kind));
      bool raw = ir_carrier_mx_dtype(v->elem_type) >= 0 &&
                 (r->dtypes & OP_RAW & OP_T(v->elem_type));
      if (ir_to_mx_dtype(v->elem_type) < 0 && !raw)
        return op_decline(why, "%s %d ('%s') has element type %s, which MLX cannot hold",
                          pass ? "output" : "input", i, v->name, ir_elem_name(v->elem_type));
      if (v->elem_type == IR_DOUBLE && !env->float64)
        return op_decline(why, "%s %d ('%s') is float64, which MLX computes only on the CPU "
                          "device (this session runs on the GPU)", pass ? "output" : "input", i,
                          v->name);
      if (v->elem_type == IR_DOUBLE && !(r->dtypes & OP_F64))
        return op_decline(why, "%s %d ('%s') is float64, and MLX does not compute %s exactly in "
                          "float64", pass ? "output" : "input", i, v->name, n->op_type);
    }
  }
  return true;
}

/* A control-flow node runs whole or not at all: every node of its subgraphs must be claimable.
 * The first node that is not gives the reason. Nodes some EP already took inside a subgraph
 * (ORT partitions subgraphs first; when the owner was not claimable as a whole, we claimed
 * pieces of If branches) are looked at last, so the reason names the node that decided it. */
static bool bodies_ok(const ir_node *n, const op_claim_env *env, op_why why) {
  /* a body is translated without a sequence table (sequences live in one group's top level) */
  for (int k = 0; k < n->n_subgraphs; k++)
    for (int v = 0; n->subgraphs[k].graph && v < n->subgraphs[k].graph->n_values; v++) {
      const ir_value *val = &n->subgraphs[k].graph->values[v];
      if (val->kind != IR_KIND_TENSOR && val->kind != IR_KIND_UNKNOWN)
        return op_decline(why, "%s value '%s' is a sequence or optional: those are supported "
                               "only outside control-flow subgraphs", n->subgraphs[k].attr,
                          val->name);
    }
  for (int pass = 0; pass < 2; pass++)
    for (int k = 0; k < n->n_subgraphs; k++) {
      const ir_graph *body = n->subgraphs[k].graph;
      for (int i = 0; body && i < body->n_nodes; i++) {
        const ir_node *b = &body->nodes[i];
        if ((b->assigned_ep[0] != 0) != (pass == 1)) continue;
        char inner[400];
        if (pass == 1)
          snprintf(inner, sizeof inner, "already placed on %s", b->assigned_ep);
        if (pass == 1 || !op_claim(body, b, env, inner, sizeof inner))
          return op_decline(why, "%s node '%s' (%s): %s", n->subgraphs[k].attr, b->name,
                            b->op_type, inner);
      }
    }
  return true;
}

const op_row *op_claim(const ir_graph *g, const ir_node *n, const op_claim_env *env, char *text,
                       size_t len) {
  op_why why = {text, len};
  text[0] = 0;
  const op_row *r = op_lookup(n->domain, n->op_type, n->since_version);
  if (!r) {
    explain_missing(n, why);
    return NULL;
  }
  if (!boundary_ok(g, n, r, env, why)) return NULL;
  const ir_value *x = ir_input(g, n, 0);
  if (r->dtypes && x && !(r->dtypes & OP_T(x->elem_type))) {
    op_decline(why, "%s does not take element type %s here", n->op_type,
               ir_elem_name(x->elem_type));
    return NULL;
  }
  if (r->claim && !r->claim(g, n, r, why)) return NULL;
  if (!bodies_ok(n, env, why)) return NULL;
  return r;
}

bool op_all_same_type(const ir_graph *g, const ir_node *n, op_why why) {
  int t = IR_UNDEFINED;
  for (int i = 0; i < n->n_inputs; i++) {
    const ir_value *v = ir_input(g, n, i);
    if (!v) continue;
    if (t == IR_UNDEFINED) t = v->elem_type;
    else if (v->elem_type != t)
      return op_decline(why, "inputs mix element types %s and %s", ir_elem_name(t),
                        ir_elem_name(v->elem_type));
  }
  return true;
}

bool op_input_is_const(const ir_graph *g, const ir_node *n, int i) {
  const ir_value *v = ir_input(g, n, i);
  return v && v->is_constant;
}

op_compile_class op_node_compile_class(const op_row *row, const ir_graph *g, const ir_node *n) {
  if (!row->node_class) return row->compile_class;
  op_compile_class c = row->node_class(g, n);
  return c < row->compile_class ? c : row->compile_class;
}
