/*
 * The normalisations exported decoders use, as ONNX Runtime defines them:
 * SimplifiedLayerNormalization (an RMS norm ORT registers in the ai.onnx domain, opset 1: axis,
 * epsilon, stash_type; outputs Y and the optional inv_std_var), and the com.microsoft residual
 * forms SkipSimplifiedLayerNormalization and SkipLayerNormalization, which normalise
 * input + skip (+ bias) over the last axis and may also output that sum (input_skip_bias_sum,
 * the next layer's residual), the mean (zeros for the RMS form, as ORT writes them) and
 * inv_std_var.
 * Statistics are taken in float32 (half inputs widened, each output rounded once), as ORT's CPU
 * kernels do. When only the normalised output is wanted over the last axis with a 1-D scale,
 * MLX's fast rms_norm / layer_norm kernels compute it; otherwise the statistics are composed
 * (reductions with keepdims, so the translation depends on ranks only).
 */
#include "ops/families.h"
#include "plan/translate.h"

static int to_f32(tr_ctx *t, mx_array *a) {
  if (*a && mx_dtype_of(*a) != MX_FLOAT32) TR_TRY(mx_astype(t->mx, a, *a, MX_FLOAT32));
  return MX_OK;
}

/* A value's static rank, or -1 when unknown (rank 0 counts as unknown: see norm.c). */
static int rank_of(const ir_value *v) { return v && v->rank > 0 ? v->rank : -1; }

/* 1 / sqrt(mean(x^2) + eps) over axes (kept). */
static int inv_rms(tr_ctx *t, mx_array x, const int *axes, int k, float eps, mx_array *inv) {
  mx_array ms, e;
  TR_TRY(mx_unary(t->mx, &ms, MX_SQUARE, x));
  TR_TRY(mx_reduce(t->mx, &ms, MX_MEAN, ms, axes, k, true));
  TR_TRY(tr_scalar(t, &e, eps, MX_FLOAT32));
  TR_TRY(mx_binary(t->mx, &ms, MX_ADD, ms, e));
  return mx_unary(t->mx, inv, MX_RSQRT, ms);
}

/* --- SimplifiedLayerNormalization (ai.onnx domain, ORT's) -------------------------------- */
static bool claim_simplified(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *scale = ir_input(g, n, 1);
  if (!scale) return op_decline(why, "SimplifiedLayerNormalization needs scale");
  if (!(OP_FLOATS & OP_T(scale->elem_type)))
    return op_decline(why, "scale has element type %s (a float type is needed)",
                      ir_elem_name(scale->elem_type));
  int64_t stash = ir_attr_int(n, "stash_type", 1);
  if (stash != 1)
    return op_decline(why, "SimplifiedLayerNormalization stash_type %lld is not supported "
                           "(only 1, float32)", (long long)stash);
  int rank = rank_of(ir_input(g, n, 0));
  int64_t axis = ir_attr_int(n, "axis", -1);
  if (rank > 0 && (axis < -rank || axis >= rank))
    return op_decline(why, "SimplifiedLayerNormalization axis %lld is out of range for X of "
                           "rank %d", (long long)axis, rank);
  return true;
}

static int translate_simplified(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), scale = tr_in(t, 1), y, inv;
  int rank = mx_ndim(x), axis;
  if (rank == 0) return tr_fail(t, "SimplifiedLayerNormalization of a scalar is undefined");
  TR_TRY(tr_axis(t, ir_attr_int(n, "axis", -1), rank, &axis));
  float eps = ir_attr_float(n, "epsilon", 1e-5f);
  const ir_value *sv = ir_input(t->g, n, 1);
  bool fast = axis == rank - 1 && !tr_has_out(t, 1) && sv && sv->rank == 1 && sv->dims[0] > 1;
  if (fast) {
    TR_TRY(to_f32(t, &x));
    TR_TRY(to_f32(t, &scale));
    TR_TRY(mx_rms_norm(t->mx, &y, x, scale, eps));
    return tr_out_cast(t, 0, y);
  }
  int axes[MX_MAX_RANK], k = 0;
  for (int i = axis; i < rank; i++) axes[k++] = i;
  TR_TRY(to_f32(t, &x));
  TR_TRY(to_f32(t, &scale));
  TR_TRY(inv_rms(t, x, axes, k, eps, &inv));
  TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, x, inv));
  TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, y, scale));
  TR_TRY(tr_out_cast(t, 0, y));
  return tr_has_out(t, 1) ? tr_out_cast(t, 1, inv) : MX_OK;
}

/* --- SkipLayerNormalization, SkipSimplifiedLayerNormalization (com.microsoft) ------------ */
/* row->code: 1 for the RMS (simplified) form, whose inputs are (input, skip, gamma, bias);
 * SkipLayerNormalization's are (input, skip, gamma, beta, bias). */
static bool claim_skip(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  int rank = rank_of(ir_input(g, n, 0));
  if (rank > 0 && rank != 2 && rank != 3)
    return op_decline(why, "%s input of rank %d is not supported (2 or 3, as ONNX Runtime "
                           "requires)", n->op_type, rank);
  for (int i = 2; i < n->n_inputs; i++) {
    const ir_value *v = ir_input(g, n, i);
    if (v && rank_of(v) > 1)
      return op_decline(why, "%s input %d has rank %d (1-D over the hidden axis expected)",
                        n->op_type, i, v->rank);
  }
  if (r->code && n->n_inputs > 4)
    return op_decline(why, "%s takes at most 4 inputs", n->op_type);
  return op_all_same_type(g, n, why);
}

static int translate_skip(tr_ctx *t, const ir_node *n, const op_row *r) {
  bool rms = r->code != 0;
  mx_array x = tr_in(t, 0), skip = tr_in(t, 1), gamma = tr_in(t, 2);
  mx_array beta = rms ? NULL : tr_in(t, 3), bias = tr_in(t, rms ? 3 : 4), s, y, inv, mean = NULL;
  if (mx_ndim(x) < 1) return tr_fail(t, "%s needs an input with a hidden axis", n->op_type);
  float eps = ir_attr_float(n, "epsilon", 1e-12f);
  TR_TRY(to_f32(t, &x));
  TR_TRY(to_f32(t, &skip));
  TR_TRY(to_f32(t, &gamma));
  TR_TRY(to_f32(t, &beta));
  TR_TRY(to_f32(t, &bias));
  TR_TRY(mx_binary(t->mx, &s, MX_ADD, x, skip));
  if (bias) TR_TRY(mx_binary(t->mx, &s, MX_ADD, s, bias));
  if (tr_has_out(t, 3)) TR_TRY(tr_out_cast(t, 3, s));
  int last = mx_ndim(s) - 1;
  if (!tr_has_out(t, 1) && !tr_has_out(t, 2) && mx_ndim(gamma) == 1 &&
      mx_dim(gamma, 0) == mx_dim(s, last) && (!beta || mx_ndim(beta) == 1)) {
    if (rms) TR_TRY(mx_rms_norm(t->mx, &y, s, gamma, eps));
    else TR_TRY(mx_layer_norm(t->mx, &y, s, gamma, beta, eps));
    return tr_out_cast(t, 0, y);
  }
  if (rms) {
    TR_TRY(inv_rms(t, s, &last, 1, eps, &inv));
    TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, s, inv));
  } else {
    mx_array d;
    TR_TRY(mx_reduce(t->mx, &mean, MX_MEAN, s, &last, 1, true));
    TR_TRY(mx_binary(t->mx, &d, MX_SUBTRACT, s, mean));
    TR_TRY(inv_rms(t, d, &last, 1, eps, &inv)); /* the centred values' mean square: var */
    TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, d, inv));
  }
  TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, y, gamma));
  if (beta) TR_TRY(mx_binary(t->mx, &y, MX_ADD, y, beta));
  TR_TRY(tr_out_cast(t, 0, y));
  if (tr_has_out(t, 1)) {
    if (!mean) { /* ORT's RMS kernel writes zeros there */
      mx_array zero;
      TR_TRY(tr_scalar(t, &zero, 0.0, MX_FLOAT32));
      TR_TRY(mx_binary(t->mx, &mean, MX_MULTIPLY, inv, zero));
    }
    TR_TRY(tr_out_cast(t, 1, mean));
  }
  return tr_has_out(t, 2) ? tr_out_cast(t, 2, inv) : MX_OK;
}

#define F32 "statistics in float32"
const op_row ops_llm_norm_rows[] = {
    {"", "SimplifiedLayerNormalization", 1, 1, claim_simplified, translate_simplified,
     OP_SHAPELESS, OP_FLOATS, 0,
     "ONNX Runtime's RMS norm (ai.onnx domain): MLX fast rms_norm for last-axis, 1-D scale, Y "
     "only; else " F32 "; stash_type other than 1 declined", NULL, NULL, 0},
    {"com.microsoft", "SkipSimplifiedLayerNormalization", 1, 1, claim_skip, translate_skip,
     OP_SHAPELESS, OP_FLOATS, 1,
     "RMS norm of input + skip (+ bias), " F32 "; MLX fast rms_norm when only output (and the "
     "sum) are wanted; input of rank 2 or 3", NULL, NULL, 0},
    {"com.microsoft", "SkipLayerNormalization", 1, 1, claim_skip, translate_skip, OP_SHAPELESS,
     OP_FLOATS, 0,
     "layer norm of input + skip (+ bias), " F32 "; MLX fast layer_norm when only output (and "
     "the sum) are wanted; input of rank 2 or 3", NULL, NULL, 0},
    OP_ROWS_END,
};
