/*
 * Normalisation operators: LayerNormalization (opset 17). X is normalised over the axes
 * [axis, rank) (axis default -1), then scaled by Scale and shifted by the optional B, both
 * broadcast against X. When only Y is wanted, the normalisation is over the last axis alone and
 * Scale (and B) are 1-D over that axis, MLX's fast layer_norm kernel does the work; otherwise the
 * ONNX function body is composed (mean, centred variance, reciprocal square root), reducing over
 * several axes directly rather than flattening them, in float32 as stash_type 1 asks (half
 * inputs are widened and Y rounded once at the end). The optional Mean and InvStdDev outputs keep
 * the normalised dimensions as 1 and take their declared type. stash_type other than 1 is
 * declined.
 */
#include "ops/families.h"
#include "plan/translate.h"

static int cast_to(tr_ctx *t, int i, mx_array y) {
  mx_dtype want = tr_out_dtype(t, i);
  if (mx_dtype_of(y) != want) TR_TRY(mx_astype(t->mx, &y, y, want));
  return tr_out(t, i, y);
}

static int to_f32(tr_ctx *t, mx_array *a) {
  if (*a && mx_dtype_of(*a) != MX_FLOAT32) TR_TRY(mx_astype(t->mx, a, *a, MX_FLOAT32));
  return MX_OK;
}

/* --- LayerNormalization ------------------------------------------------------------------ */
/* Whether MLX's fast kernel computes exactly what the node asks: last axis only, no statistics
 * outputs, Scale (and B) 1-D over the last axis. The kernel wants Scale's length to equal the
 * last dimension; a 1-D Scale whose static length is above 1 must (a valid broadcast to X's
 * shape needs it), so the decision rests on the graph's static shapes, not this run's. */
static bool vector_over_last(const ir_value *v) {
  return v && v->rank == 1 && v->dims[0] > 1;
}

static bool fast_path_ok(tr_ctx *t, const ir_node *n, int rank, int axis) {
  if (axis != rank - 1 || tr_has_out(t, 1) || tr_has_out(t, 2)) return false;
  if (!vector_over_last(ir_input(t->g, n, 1))) return false;
  return !ir_has_input(n, 2) || vector_over_last(ir_input(t->g, n, 2));
}

static bool claim_layer_norm(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  int64_t stash = ir_attr_int(n, "stash_type", 1);
  if (stash != 1)
    return op_decline(why, "LayerNormalization stash_type %lld is not supported (only 1, float32)",
                      (long long)stash);
  const ir_value *x = ir_input(g, n, 0);
  int64_t axis = ir_attr_int(n, "axis", -1);
  if (x && x->rank == 0)
    return op_decline(why, "LayerNormalization of a scalar is undefined (X needs rank >= 1)");
  if (x && x->rank > 0 && (axis < -x->rank || axis >= x->rank))
    return op_decline(why, "LayerNormalization axis %lld is out of range for X of rank %d",
                      (long long)axis, x->rank);
  return op_all_same_type(g, n, why);
}

static int translate_layer_norm(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), scale = tr_in(t, 1), bias = tr_in(t, 2), y;
  int rank = mx_ndim(x), axis;
  if (rank == 0) return tr_fail(t, "LayerNormalization of a scalar is undefined");
  TR_TRY(tr_axis(t, ir_attr_int(n, "axis", -1), rank, &axis));
  float eps = ir_attr_float(n, "epsilon", 1e-5f);
  if (fast_path_ok(t, n, rank, axis)) {
    TR_TRY(mx_layer_norm(t->mx, &y, x, scale, bias, eps));
    return cast_to(t, 0, y);
  }
  int axes[MX_MAX_RANK], k = 0;
  for (int i = axis; i < rank; i++) axes[k++] = i;
  mx_array mean, d, var, inv, e;
  TR_TRY(to_f32(t, &x));
  TR_TRY(mx_reduce(t->mx, &mean, MX_MEAN, x, axes, k, true));
  TR_TRY(mx_binary(t->mx, &d, MX_SUBTRACT, x, mean));
  TR_TRY(mx_binary(t->mx, &var, MX_MULTIPLY, d, d));
  TR_TRY(mx_reduce(t->mx, &var, MX_MEAN, var, axes, k, true));
  TR_TRY(tr_scalar(t, &e, eps, MX_FLOAT32));
  TR_TRY(mx_binary(t->mx, &var, MX_ADD, var, e));
  TR_TRY(mx_unary(t->mx, &inv, MX_RSQRT, var));
  TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, d, inv));
  TR_TRY(to_f32(t, &scale));
  TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, y, scale));
  if (bias) {
    TR_TRY(to_f32(t, &bias));
    TR_TRY(mx_binary(t->mx, &y, MX_ADD, y, bias));
  }
  TR_TRY(cast_to(t, 0, y));
  TR_TRY(cast_to(t, 1, mean)); /* omitted outputs are skipped by tr_out */
  return cast_to(t, 2, inv);
}

const op_row ops_norm_rows[] = {
    {"", "LayerNormalization", 17, 17, claim_layer_norm, translate_layer_norm, OP_SHAPELESS,
     OP_FLOATS, 0,
     "MLX fast kernel for last-axis, 1-D Scale/B, Y only; else composed in float32; "
     "stash_type other than 1 declined"},
    OP_ROWS_END,
};
