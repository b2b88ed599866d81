/*
 * Channel-wise normalisation: BatchNormalization in inference mode (rows 6, 7, 9, 14, 15) and
 * LRN (1, 13), both over X's axis 1. BatchNormalization folds the given running statistics into
 * one scale and shift per channel, (Scale / sqrt(var + epsilon)) and B - mean * that, computed
 * in float32 (all five inputs widened, so the opset 14/15 forms whose mean and var have another
 * type than X need nothing special) and applied as X * scale + shift, with the result rounded
 * once to Y's type. spatial=0 (opsets 6 and 7) takes statistics of shape (C, D1, ...) instead of
 * (C). Training is declined: training_mode=1, is_test=0 in opset 6, and any output besides Y
 * (the running or saved statistics, which only training produces). LRN sums the squares of a
 * window of `size` channels (floor((size-1)/2) before, the rest after, zeros beyond the edges)
 * as shifted slices of the zero-padded squares, then divides X by (bias + alpha/size * sum)^beta,
 * in float32; the slices make its rows shape-keyed.
 */
#include "ops/families.h"
#include "plan/translate.h"

static int to_f32(tr_ctx *t, mx_array *a) {
  if (mx_dtype_of(*a) != MX_FLOAT32) TR_TRY(mx_astype(t->mx, a, *a, MX_FLOAT32));
  return MX_OK;
}

/* --- BatchNormalization ------------------------------------------------------------------ */
static const char *const bn_inputs[] = {"X", "scale", "B", "input_mean", "input_var"};

/* spatial (opsets 6 and 7, default 1): statistics per channel, else per (C, D1, ...) element. */
static bool bn_spatial(const ir_node *n) {
  return n->since_version >= 9 || ir_attr_int(n, "spatial", 1) != 0;
}

/* A value's static rank, or -1 when unknown (ORT reports an unknown shape as rank 0, see
 * ir.c; neither operator takes a scalar, whose translation fails instead). */
static int rank_of(const ir_value *v) { return v && v->rank > 0 ? v->rank : -1; }

static bool claim_batch_norm(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  int v = n->since_version;
  if (v >= 14 && ir_attr_int(n, "training_mode", 0) != 0)
    return op_decline(why, "training_mode=1 (batch statistics, updated running statistics) is "
                           "not translated; only inference");
  if (v < 7 && ir_attr_int(n, "is_test", 0) == 0)
    return op_decline(why, "is_test=0 asks for training mode (batch statistics) in opset 6; "
                           "only is_test=1 (inference) is translated");
  for (int i = 1; i < n->n_outputs; i++) {
    const ir_value *o = ir_output(g, n, i);
    if (o)
      return op_decline(why, "output %d ('%s') only exists in training mode; only Y is "
                             "translated", i, o->name);
  }
  int rank = rank_of(ir_input(g, n, 0));
  if (rank >= 0 && rank < 2) return op_decline(why, "X has rank %d (N, C, ... expected)", rank);
  bool spatial = bn_spatial(n);
  for (int i = 1; i < 5; i++) {
    const ir_value *p = ir_input(g, n, i);
    if (!p) return op_decline(why, "BatchNormalization needs %s", bn_inputs[i]);
    if (!(OP_FLOATS & OP_T(p->elem_type)))
      return op_decline(why, "%s has element type %s (a float type is needed)", bn_inputs[i],
                        ir_elem_name(p->elem_type));
    if (spatial && rank_of(p) > 1)
      return op_decline(why, "%s has rank %d (1-D over C expected)", bn_inputs[i], p->rank);
    if (!spatial && rank_of(p) > 0 && rank >= 2 && p->rank != rank - 1)
      return op_decline(why, "spatial=0: %s has rank %d, (C, D1, ...) of rank %d expected",
                        bn_inputs[i], p->rank, rank - 1);
  }
  return true;
}

/* A statistic shaped to broadcast against X: (C) gets trailing unit axes, (C, D1, ...) a
 * leading one. */
static int bn_param(tr_ctx *t, int i, int rank, bool spatial, mx_array *out) {
  int axes[MX_MAX_RANK], k = 0;
  mx_array p = tr_in(t, i);
  TR_TRY(to_f32(t, &p));
  if (spatial)
    for (int a = 1; a < rank - 1; a++) axes[k++] = a;
  else
    axes[k++] = 0;
  if (k == 0) return *out = p, MX_OK;
  return mx_expand_dims(t->mx, out, p, axes, k);
}

static int translate_batch_norm(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), scale, bias, mean, var, e, s, b, y;
  int rank = mx_ndim(x);
  bool spatial = bn_spatial(n);
  if (rank < 2) return tr_fail(t, "X has rank %d (N, C, ... expected)", rank);
  TR_TRY(bn_param(t, 1, rank, spatial, &scale));
  TR_TRY(bn_param(t, 2, rank, spatial, &bias));
  TR_TRY(bn_param(t, 3, rank, spatial, &mean));
  TR_TRY(bn_param(t, 4, rank, spatial, &var));
  TR_TRY(tr_scalar(t, &e, ir_attr_float(n, "epsilon", 1e-5f), MX_FLOAT32));
  TR_TRY(mx_binary(t->mx, &var, MX_ADD, var, e));
  TR_TRY(mx_unary(t->mx, &var, MX_RSQRT, var));
  TR_TRY(mx_binary(t->mx, &s, MX_MULTIPLY, scale, var));
  TR_TRY(mx_binary(t->mx, &b, MX_MULTIPLY, mean, s));
  TR_TRY(mx_binary(t->mx, &b, MX_SUBTRACT, bias, b));
  TR_TRY(to_f32(t, &x));
  TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, x, s));
  TR_TRY(mx_binary(t->mx, &y, MX_ADD, y, b));
  return tr_out_cast(t, 0, y);
}

/* --- LRN --------------------------------------------------------------------------------- */
static bool claim_lrn(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_attr *size = ir_find_attr(n, "size");
  if (!size || size->type != IR_ATTR_INT) return op_decline(why, "size is required");
  if (size->i < 1 || size->i > 4096)
    return op_decline(why, "size %lld is outside [1, 4096]", (long long)size->i);
  int rank = rank_of(ir_input(g, n, 0));
  if (rank >= 0 && rank < 2) return op_decline(why, "X has rank %d (N, C, ... expected)", rank);
  return true;
}

static int translate_lrn(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), sq, padded, zero, sum = NULL, tap, k, y;
  int rank = mx_ndim(x), size = (int)ir_attr_int(n, "size", 1);
  if (rank < 2) return tr_fail(t, "X has rank %d (N, C, ... expected)", rank);
  int lo[MX_MAX_RANK] = {0}, hi[MX_MAX_RANK] = {0}, start[MX_MAX_RANK] = {0},
      stop[MX_MAX_RANK], step[MX_MAX_RANK];
  TR_TRY(to_f32(t, &x));
  TR_TRY(mx_unary(t->mx, &sq, MX_SQUARE, x));
  lo[1] = (size - 1) / 2;
  hi[1] = size - 1 - lo[1];
  TR_TRY(tr_scalar(t, &zero, 0.0, MX_FLOAT32));
  TR_TRY(mx_pad(t->mx, &padded, sq, lo, hi, rank, zero));
  for (int i = 0; i < rank; i++) stop[i] = mx_dim(x, i), step[i] = 1;
  for (int j = 0; j < size; j++) {
    start[1] = j;
    stop[1] = j + mx_dim(x, 1);
    TR_TRY(mx_slice(t->mx, &tap, padded, start, stop, step, rank));
    if (sum) TR_TRY(mx_binary(t->mx, &sum, MX_ADD, sum, tap));
    else sum = tap;
  }
  float alpha = ir_attr_float(n, "alpha", 1e-4f), beta = ir_attr_float(n, "beta", 0.75f);
  float bias = ir_attr_float(n, "bias", 1.0f);
  TR_TRY(tr_scalar(t, &k, alpha / (float)size, MX_FLOAT32));
  TR_TRY(mx_binary(t->mx, &sum, MX_MULTIPLY, sum, k));
  TR_TRY(tr_scalar(t, &k, bias, MX_FLOAT32));
  TR_TRY(mx_binary(t->mx, &sum, MX_ADD, sum, k));
  TR_TRY(tr_scalar(t, &k, -beta, MX_FLOAT32));
  TR_TRY(mx_binary(t->mx, &sum, MX_POWER, sum, k));
  TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, x, sum));
  return tr_out_cast(t, 0, y);
}

#define BN(lo, hi, types, note) \
  {"", "BatchNormalization", lo, hi, claim_batch_norm, translate_batch_norm, OP_SHAPELESS, \
   types, 0, note}
#define NO_BF16 (OP_T(IR_FLOAT) | OP_T(IR_FLOAT16))
#define INFER "inference only: outputs other than Y declined"

const op_row ops_norm_channel_rows[] = {
    BN(6, 6, NO_BF16, INFER "; is_test=0 (training) declined; spatial"),
    BN(7, 8, NO_BF16, INFER "; spatial"),
    BN(9, 13, NO_BF16, INFER),
    BN(14, 14, OP_FLOATS, INFER "; training_mode=1 declined; mean/var may differ in type from X"),
    BN(15, 15, OP_FLOATS,
       INFER "; training_mode=1 declined; scale/B and mean/var types may differ"),
    {"", "LRN", 1, 12, claim_lrn, translate_lrn, OP_SHAPE_KEYED, NO_BF16, 0,
     "float32 window sums across channels; shape-keyed (slices)"},
    {"", "LRN", 13, 13, claim_lrn, translate_lrn, OP_SHAPE_KEYED, OP_FLOATS, 0,
     "float32 window sums across channels; shape-keyed (slices)"},
    OP_ROWS_END,
};
