/*
 * The small gate operators around recurrent (GatedDeltaNet / Mamba-style) layers, all in the
 * com.microsoft domain. LinearAttentionGate turns the raw gate projections into LinearAttention's
 * decay (softplus(a + dt_bias) * decay_scale) and beta (sigmoid(b)), computed in float32 and
 * stored in a's type, because exp(decay) in the recurrence amplifies any rounding. GatedAdd is
 * X + Y * gate with a per-row gate (last dim 1); the product is rounded to the tensor type before
 * the add, as separate Mul and Add would, so it is composed in that type and compiles shapeless.
 * GatedRMSNorm normalises rows of C values (C = len(scale), dividing X's last dim) and multiplies
 * by scale and act(gate) (silu/swish or sigmoid), all in float32, stored in X's type; it reshapes
 * to rows of C, so it compiles keyed on shape.
 */
#include "ops/families.h"
#include "plan/translate.h"

#include <string.h>

/* --- shared helpers ---------------------------------------------------------------------- */
static int to_f32(tr_ctx *t, mx_array *out, mx_array a) {
  *out = a;
  if (mx_dtype_of(a) != MX_FLOAT32) TR_TRY(mx_astype(t->mx, out, a, MX_FLOAT32));
  return MX_OK;
}

static int out_as(tr_ctx *t, int i, mx_array y) {
  mx_dtype want = tr_out_dtype(t, i);
  if (mx_dtype_of(y) != want) TR_TRY(mx_astype(t->mx, &y, y, want));
  return tr_out(t, i, y);
}

static bool dim_known(const ir_value *v, int i) { return v && v->rank > i && v->dims[i] >= 0; }

/* Two values' dims agree wherever both are known (ranks must be known and equal). */
static bool same_known_shape(const ir_value *a, const ir_value *b) {
  if (a->rank < 0 || b->rank < 0) return true;
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] >= 0 && b->dims[i] >= 0 && a->dims[i] != b->dims[i]) return false;
  return true;
}

static int64_t last_dim(const ir_value *v) { return v->rank > 0 ? v->dims[v->rank - 1] : -1; }

/* --- LinearAttentionGate ------------------------------------------------------------------ */
static bool claim_gate(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  if (n->n_inputs < 3 || n->n_inputs > 4 || n->n_outputs < 1 || n->n_outputs > 2)
    return op_decline(why, "LinearAttentionGate takes 3-4 inputs and 1-2 outputs (has %d and %d)",
                      n->n_inputs, n->n_outputs);
  const ir_value *a = ir_input(g, n, 0), *dt = ir_input(g, n, 1), *ds = ir_input(g, n, 2);
  const ir_value *b = ir_input(g, n, 3), *decay = ir_output(g, n, 0), *beta = ir_output(g, n, 1);
  if (!a || !dt || !ds || !decay)
    return op_decline(why, "LinearAttentionGate needs inputs a, dt_bias, decay_scale and output "
                           "decay");
  if (a->rank == 0) return op_decline(why, "input a must have rank >= 1 (a [B, T, H])");
  int64_t h = a->rank > 0 ? last_dim(a) : -1;
  const ir_value *vecs[2] = {dt, ds};
  static const char *names[2] = {"dt_bias", "decay_scale"};
  for (int i = 0; i < 2; i++) {
    const ir_value *v = vecs[i];
    if (v->elem_type != IR_FLOAT)
      return op_decline(why, "%s must be float32 (is %s)", names[i], ir_elem_name(v->elem_type));
    if (v->rank >= 0 && v->rank != 1)
      return op_decline(why, "%s must be a vector [H] (has rank %d)", names[i], v->rank);
    if (h >= 0 && dim_known(v, 0) && v->dims[0] != h)
      return op_decline(why, "%s has %lld entries, a's last dim (heads) is %lld", names[i],
                        (long long)v->dims[0], (long long)h);
  }
  if (b && b->elem_type != a->elem_type)
    return op_decline(why, "b (%s) must have a's element type (%s)", ir_elem_name(b->elem_type),
                      ir_elem_name(a->elem_type));
  if (b && !same_known_shape(a, b)) return op_decline(why, "b must have a's shape");
  if (beta && !b) return op_decline(why, "output beta is requested but input b is absent");
  if (decay->elem_type != IR_UNDEFINED && decay->elem_type != a->elem_type)
    return op_decline(why, "output decay must have a's element type %s (declared %s)",
                      ir_elem_name(a->elem_type), ir_elem_name(decay->elem_type));
  if (beta && beta->elem_type != IR_UNDEFINED && beta->elem_type != a->elem_type)
    return op_decline(why, "output beta must have a's element type %s (declared %s)",
                      ir_elem_name(a->elem_type), ir_elem_name(beta->elem_type));
  return true;
}

/* decay = softplus(a + dt_bias) * decay_scale; softplus(x) = logaddexp(x, 0), which is exact
 * for large |x| where log1p(exp(x)) overflows. beta = sigmoid(b). Both in float32. */
static int translate_gate(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  mx_array a, dt, ds, zero, x;
  TR_TRY(to_f32(t, &a, tr_in(t, 0)));
  TR_TRY(to_f32(t, &dt, tr_in(t, 1)));
  TR_TRY(to_f32(t, &ds, tr_in(t, 2)));
  TR_TRY(tr_scalar(t, &zero, 0.0, MX_FLOAT32));
  TR_TRY(mx_binary(t->mx, &x, MX_ADD, a, dt));
  TR_TRY(mx_binary(t->mx, &x, MX_LOGADDEXP, x, zero));
  TR_TRY(mx_binary(t->mx, &x, MX_MULTIPLY, x, ds));
  TR_TRY(out_as(t, 0, x));
  if (tr_in(t, 3) && tr_has_out(t, 1)) {
    mx_array b;
    TR_TRY(to_f32(t, &b, tr_in(t, 3)));
    TR_TRY(mx_unary(t->mx, &b, MX_SIGMOID, b));
    TR_TRY(out_as(t, 1, b));
  }
  return MX_OK;
}

/* --- GatedAdd ----------------------------------------------------------------------------- */
static bool claim_gated_add(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  if (n->n_inputs != 3 || n->n_outputs != 1)
    return op_decline(why, "GatedAdd takes 3 inputs and 1 output (has %d and %d)", n->n_inputs,
                      n->n_outputs);
  const ir_value *x = ir_input(g, n, 0), *y = ir_input(g, n, 1), *gate = ir_input(g, n, 2);
  if (!x || !y || !gate) return op_decline(why, "GatedAdd needs X, Y and gate");
  if (!op_all_same_type(g, n, why)) return false;
  if (!same_known_shape(x, y)) return op_decline(why, "Y must have X's shape");
  if (x->rank == 0) return op_decline(why, "X must have rank >= 1 (X [..., C], gate [..., 1])");
  if (x->rank >= 0 && gate->rank >= 0) {
    if (gate->rank != x->rank)
      return op_decline(why, "gate must have X's rank %d with last dim 1 (has rank %d)", x->rank,
                        gate->rank);
    if (dim_known(gate, gate->rank - 1) && last_dim(gate) != 1)
      return op_decline(why, "gate's last dim must be 1 (is %lld): one gate per row",
                        (long long)last_dim(gate));
    for (int i = 0; i + 1 < x->rank; i++)
      if (dim_known(x, i) && dim_known(gate, i) && x->dims[i] != gate->dims[i])
        return op_decline(why, "gate dim %d (%lld) differs from X's (%lld)", i,
                          (long long)gate->dims[i], (long long)x->dims[i]);
  }
  const ir_value *o = ir_output(g, n, 0);
  if (o && o->elem_type != IR_UNDEFINED && o->elem_type != x->elem_type)
    return op_decline(why, "output must have X's element type %s", ir_elem_name(x->elem_type));
  return true;
}

/* out = X + round_T(Y * gate): composed in T, rank-agnostic, so shapeless-safe. */
static int translate_gated_add(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  mx_array p, y;
  TR_TRY(mx_binary(t->mx, &p, MX_MULTIPLY, tr_in(t, 1), tr_in(t, 2)));
  TR_TRY(mx_binary(t->mx, &y, MX_ADD, tr_in(t, 0), p));
  return out_as(t, 0, y);
}

/* --- GatedRMSNorm ------------------------------------------------------------------------- */
enum { ACT_SILU, ACT_SIGMOID, ACT_UNKNOWN };

static int rms_activation(const ir_node *n) {
  const char *a = ir_attr_string(n, "activation", "silu");
  if (strcmp(a, "silu") == 0 || strcmp(a, "swish") == 0) return ACT_SILU;
  if (strcmp(a, "sigmoid") == 0) return ACT_SIGMOID;
  return ACT_UNKNOWN;
}

static bool claim_rms(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  if (n->n_inputs != 3 || n->n_outputs != 1)
    return op_decline(why, "GatedRMSNorm takes 3 inputs and 1 output (has %d and %d)",
                      n->n_inputs, n->n_outputs);
  const ir_value *x = ir_input(g, n, 0), *scale = ir_input(g, n, 1), *gate = ir_input(g, n, 2);
  if (!x || !scale || !gate) return op_decline(why, "GatedRMSNorm needs X, scale and gate");
  if (rms_activation(n) == ACT_UNKNOWN)
    return op_decline(why, "activation '%s' is not one of silu, swish, sigmoid",
                      ir_attr_string(n, "activation", ""));
  if (!op_all_same_type(g, n, why)) return false;
  if (x->rank == 0) return op_decline(why, "X must have rank >= 1");
  if (scale->rank >= 0 && scale->rank != 1)
    return op_decline(why, "scale must be a vector [C] (has rank %d)", scale->rank);
  int64_t c = scale->rank == 1 ? scale->dims[0] : -1, d = x->rank > 0 ? last_dim(x) : -1;
  if (c == 0) return op_decline(why, "scale is empty (C = 0)");
  if (c > 0 && d >= 0 && d % c != 0)
    return op_decline(why, "C = %lld (scale's length) does not divide X's last dim %lld",
                      (long long)c, (long long)d);
  if (!same_known_shape(x, gate)) return op_decline(why, "gate must have X's shape");
  const ir_value *o = ir_output(g, n, 0);
  if (o && o->elem_type != IR_UNDEFINED && o->elem_type != x->elem_type)
    return op_decline(why, "output must have X's element type %s", ir_elem_name(x->elem_type));
  return true;
}

/* y = x * rsqrt(mean(x^2 over rows of C) + eps) * scale * act(gate), in float32. */
static int translate_rms(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), scale = tr_in(t, 1), gate = tr_in(t, 2);
  int rank = mx_ndim(x), c = (int)mx_size(scale);
  if (rank < 1 || mx_ndim(scale) != 1 || c == 0 || mx_dim(x, -1) % c != 0)
    return tr_fail(t, "scale's length %d must divide X's last dim %d", c,
                   rank ? mx_dim(x, -1) : 0);
  if (mx_ndim(gate) != rank || memcmp(mx_shape(gate), mx_shape(x), sizeof(int) * rank) != 0)
    return tr_fail(t, "gate must have X's shape");
  int rows[MX_MAX_RANK + 1];
  for (int i = 0; i + 1 < rank; i++) rows[i] = mx_dim(x, i);
  rows[rank - 1] = mx_dim(x, -1) / c;
  rows[rank] = c;
  mx_array xf, gf, sf, ms, eps, y, act;
  TR_TRY(to_f32(t, &xf, x));
  TR_TRY(to_f32(t, &gf, gate));
  TR_TRY(to_f32(t, &sf, scale));
  TR_TRY(mx_reshape(t->mx, &xf, xf, rows, rank + 1));
  TR_TRY(mx_reshape(t->mx, &gf, gf, rows, rank + 1));
  int last = rank;
  TR_TRY(mx_unary(t->mx, &ms, MX_SQUARE, xf));
  TR_TRY(mx_reduce(t->mx, &ms, MX_MEAN, ms, &last, 1, true));
  TR_TRY(tr_scalar(t, &eps, ir_attr_float(n, "epsilon", 1e-5f), MX_FLOAT32));
  TR_TRY(mx_binary(t->mx, &ms, MX_ADD, ms, eps));
  TR_TRY(mx_unary(t->mx, &ms, MX_RSQRT, ms));
  TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, xf, ms));
  TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, y, sf));
  TR_TRY(mx_unary(t->mx, &act, MX_SIGMOID, gf));
  if (rms_activation(n) == ACT_SILU) TR_TRY(mx_binary(t->mx, &act, MX_MULTIPLY, gf, act));
  TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, y, act));
  TR_TRY(mx_reshape(t->mx, &y, y, mx_shape(x), rank));
  return out_as(t, 0, y);
}

const op_row ops_ssm_gates_rows[] = {
    {"com.microsoft", "LinearAttentionGate", 1, 1, claim_gate, translate_gate, OP_SHAPELESS,
     OP_FLOATS, 0, "float32 math, stored in a's type; beta only when b is given"},
    {"com.microsoft", "GatedAdd", 1, 1, claim_gated_add, translate_gated_add, OP_SHAPELESS,
     OP_FLOATS, 0, "gate [..., 1]; product rounded to the tensor type before the add"},
    {"com.microsoft", "GatedRMSNorm", 1, 1, claim_rms, translate_rms, OP_SHAPE_KEYED, OP_FLOATS,
     0, "activation silu/swish/sigmoid; float32 math; keyed: reshapes X into rows of C"},
    OP_ROWS_END,
};
