/*
 * Activation operators: the pointwise ones (Relu, Sigmoid, Tanh, Gelu) and the normalising ones
 * (Softmax, LogSoftmax). Relu is max(x, 0) in the input's type (integers from opset 14); Sigmoid
 * and Tanh are MLX's kernels; Gelu (opset 20, exact or tanh-approximated) is composed and, for
 * float16/bfloat16, computed in float32 and rounded once. Softmax and LogSoftmax before opset 13
 * coerce the input to 2-D at `axis` (default 1): a softmax over the flattened trailing block,
 * which is exactly a softmax over the axes [axis, rank), so no reshape (and no shape read) is
 * needed; from opset 13 they work on the single `axis` (default -1). Softmax uses MLX's precise
 * softmax; LogSoftmax is (x - max) - logsumexp(x - max), in float32 for half types.
 */
#include "ops/families.h"
#include "plan/translate.h"

#include <math.h>
#include <string.h>

/* --- shared helpers ---------------------------------------------------------------------- */
static int cast_to_output(tr_ctx *t, mx_array y) {
  mx_dtype want = tr_out_dtype(t, 0);
  if (mx_dtype_of(y) != want) TR_TRY(mx_astype(t->mx, &y, y, want));
  return tr_out(t, 0, y);
}

static bool is_half(mx_dtype d) { return d == MX_FLOAT16 || d == MX_BFLOAT16; }

/* Input 0 as float32 when it is a half type, else unchanged: compositions with several rounding
 * steps lose too much in 8-bit or 11-bit mantissas. */
static int widen(tr_ctx *t, mx_array *x) {
  *x = tr_in(t, 0);
  if (is_half(mx_dtype_of(*x))) TR_TRY(mx_astype(t->mx, x, *x, MX_FLOAT32));
  return MX_OK;
}

/* --- Relu, Sigmoid, Tanh ----------------------------------------------------------------- */
static int translate_relu(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  mx_array x = tr_in(t, 0), zero, y;
  TR_TRY(tr_scalar(t, &zero, 0.0, mx_dtype_of(x)));
  TR_TRY(mx_binary(t->mx, &y, MX_MAXIMUM, x, zero));
  return cast_to_output(t, y);
}

static int translate_unary(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n;
  mx_array y;
  TR_TRY(mx_unary(t->mx, &y, (mx_unary_op)r->code, tr_in(t, 0)));
  return cast_to_output(t, y);
}

/* --- Gelu -------------------------------------------------------------------------------- */
static bool claim_gelu(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)g, (void)r;
  const char *approx = ir_attr_string(n, "approximate", "none");
  if (strcmp(approx, "none") != 0 && strcmp(approx, "tanh") != 0)
    return op_decline(why, "Gelu approximate='%s' is not defined by ONNX (use 'none' or 'tanh')",
                      approx);
  return true;
}

/* none: 0.5 x (1 + erf(x / sqrt 2)); tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
static int translate_gelu(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x, inner, c, one, half, y;
  TR_TRY(widen(t, &x));
  mx_dtype dt = mx_dtype_of(x);
  if (strcmp(ir_attr_string(n, "approximate", "none"), "tanh") == 0) {
    mx_array x3;
    TR_TRY(mx_binary(t->mx, &x3, MX_MULTIPLY, x, x));
    TR_TRY(mx_binary(t->mx, &x3, MX_MULTIPLY, x3, x));
    TR_TRY(tr_scalar(t, &c, 0.044715, dt));
    TR_TRY(mx_binary(t->mx, &x3, MX_MULTIPLY, x3, c));
    TR_TRY(mx_binary(t->mx, &inner, MX_ADD, x, x3));
    TR_TRY(tr_scalar(t, &c, sqrt(2.0 / M_PI), dt));
    TR_TRY(mx_binary(t->mx, &inner, MX_MULTIPLY, inner, c));
    TR_TRY(mx_unary(t->mx, &inner, MX_TANH, inner));
  } else {
    TR_TRY(tr_scalar(t, &c, M_SQRT1_2, dt));
    TR_TRY(mx_binary(t->mx, &inner, MX_MULTIPLY, x, c));
    TR_TRY(mx_unary(t->mx, &inner, MX_ERF, inner));
  }
  TR_TRY(tr_scalar(t, &one, 1.0, dt));
  TR_TRY(tr_scalar(t, &half, 0.5, dt));
  TR_TRY(mx_binary(t->mx, &inner, MX_ADD, inner, one));
  TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, x, half));
  TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, y, inner));
  return cast_to_output(t, y);
}

/* --- Softmax, LogSoftmax ----------------------------------------------------------------- */
enum { SM_SOFTMAX, SM_LOG_SOFTMAX };

/* Opset < 13 coerces to 2-D at `axis` (default 1); opset 13 uses `axis` alone (default -1). */
static bool sm_coerces_2d(const ir_node *n) { return n->since_version < 13; }
static int64_t sm_axis(const ir_node *n) {
  return ir_attr_int(n, "axis", sm_coerces_2d(n) ? 1 : -1);
}

/* The axes the (log-)softmax normalises over: [axis, rank) when coercing to 2-D (the flattened
 * second dimension), else just axis. */
static int sm_axes(tr_ctx *t, const ir_node *n, int rank, int *axes, int *count) {
  int a, k = 0;
  if (rank == 0) return tr_fail(t, "%s of a scalar is undefined", n->op_type);
  TR_TRY(tr_axis(t, sm_axis(n), rank, &a));
  if (sm_coerces_2d(n))
    for (int i = a; i < rank; i++) axes[k++] = i;
  else
    axes[k++] = a;
  *count = k;
  return MX_OK;
}

static bool claim_softmax(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *x = ir_input(g, n, 0);
  int64_t axis = sm_axis(n);
  if (x && x->rank == 0)
    return op_decline(why, "%s of a scalar is undefined (its input needs rank >= 1)",
                      n->op_type);
  if (x && x->rank > 0 && (axis < -x->rank || axis >= x->rank))
    return op_decline(why, "%s axis %lld is out of range for an input of rank %d", n->op_type,
                      (long long)axis, x->rank);
  return true;
}

static int translate_softmax(tr_ctx *t, const ir_node *n, const op_row *r) {
  mx_array x = tr_in(t, 0), y;
  int axes[MX_MAX_RANK], k = 0;
  TR_TRY(sm_axes(t, n, mx_ndim(x), axes, &k));
  if (r->code == SM_SOFTMAX) {
    TR_TRY(mx_softmax(t->mx, &y, x, axes, k));
    return cast_to_output(t, y);
  }
  /* (x - max) - log(sum(exp(x - max))): subtracting the max first keeps the large magnitudes
   * out of the final difference, which would otherwise lose the small log-sum to rounding. */
  mx_array m, lse;
  TR_TRY(widen(t, &x));
  TR_TRY(mx_reduce(t->mx, &m, MX_MAX, x, axes, k, true));
  TR_TRY(mx_binary(t->mx, &x, MX_SUBTRACT, x, m));
  TR_TRY(mx_reduce(t->mx, &lse, MX_LOGSUMEXP, x, axes, k, true));
  TR_TRY(mx_binary(t->mx, &y, MX_SUBTRACT, x, lse));
  return cast_to_output(t, y);
}

#define UNARY(name, lo, hi, op, types) \
  {"", name, lo, hi, NULL, translate_unary, OP_SHAPELESS, types, op, NULL}

const op_row ops_activation_rows[] = {
    {"", "Relu", 6, 13, NULL, translate_relu, OP_SHAPELESS, OP_FLOATS, 0, NULL},
    {"", "Relu", 14, 14, NULL, translate_relu, OP_SHAPELESS, OP_FLOATS | OP_SIGNED, 0,
     "integer inputs from opset 14"},
    UNARY("Sigmoid", 6, 13, MX_SIGMOID, OP_FLOATS),
    UNARY("Tanh", 6, 13, MX_TANH, OP_FLOATS),
    {"", "Gelu", 20, 20, claim_gelu, translate_gelu, OP_SHAPELESS, OP_FLOATS, 0,
     "approximate 'none' or 'tanh'; half types computed in float32"},
    {"", "Softmax", 1, 12, claim_softmax, translate_softmax, OP_SHAPELESS, OP_FLOATS, SM_SOFTMAX,
     "coerced to 2-D at axis (default 1): softmax over axes [axis, rank)"},
    {"", "Softmax", 13, 13, claim_softmax, translate_softmax, OP_SHAPELESS, OP_FLOATS,
     SM_SOFTMAX, "one axis (default -1)"},
    {"", "LogSoftmax", 1, 12, claim_softmax, translate_softmax, OP_SHAPELESS, OP_FLOATS,
     SM_LOG_SOFTMAX, "coerced to 2-D at axis (default 1): over axes [axis, rank)"},
    {"", "LogSoftmax", 13, 13, claim_softmax, translate_softmax, OP_SHAPELESS, OP_FLOATS,
     SM_LOG_SOFTMAX, "one axis (default -1)"},
    OP_ROWS_END,
};
