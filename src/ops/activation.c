/*
 * Activation operators: the pointwise ones (Relu, Sigmoid, Tanh, Gelu, LeakyRelu, PRelu, Elu,
 * Selu, Celu, HardSigmoid, HardSwish, Mish, Shrink, Softplus, Softsign, ThresholdedRelu, Swish)
 * and the normalising ones (Softmax, LogSoftmax, Hardmax). Relu is max(x, 0) in the input's type
 * (integers from opset 14); Sigmoid is a host kernel for float32 on the CPU device
 * (cpu/math.c; x * Sigmoid(x) is one too), MLX's kernel otherwise, as Tanh is; the others are
 * composed from their ONNX formulas with the attributes as scalars, and for float16/bfloat16
 * computed in float32 and rounded once (ONNX Runtime does the same). PRelu broadcasts its slope
 * to X; Shrink takes integers too and, as ONNX Runtime, computes in float32 and truncates. Softmax,
 * LogSoftmax and Hardmax before opset 13 coerce the input to 2-D at `axis` (default 1): they
 * work on the flattened trailing block, which is exactly the axes [axis, rank), so no reshape
 * (and no shape read) is needed; from opset 13 they work on the single `axis` (default -1).
 * Softmax uses MLX's precise softmax; LogSoftmax is (x - max) - logsumexp(x - max), in float32
 * for half types; Hardmax is the one-hot of the first maximum in row-major order (NaNs skipped).
 */
#include "ops/families.h"
#include "cpu/fastmath.h"
#include "cpu/chain.h"
#include "cpu/math.h"
#include "ops/fusion_match.h"
#include "plan/translate.h"

#include <math.h>
#include <string.h>

/* --- shared helpers ---------------------------------------------------------------------- */
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
  return tr_out_cast(t, 0, y);
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

int op_gelu(tr_ctx *t, mx_array x, bool tanh_form, mx_array *y) {
  mx_array inner, c, one, half;
  mx_dtype dt = mx_dtype_of(x);
  if (tanh_form) {
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
  TR_TRY(mx_binary(t->mx, y, MX_MULTIPLY, x, half));
  return mx_binary(t->mx, y, MX_MULTIPLY, *y, inner);
}

/* approximate "none" or "tanh" (op_gelu), computed in float32 for half types (widen). */
static int translate_gelu(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x, y;
  TR_TRY(widen(t, &x));
  TR_TRY(op_gelu(t, x, strcmp(ir_attr_string(n, "approximate", "none"), "tanh") == 0, &y));
  return tr_out_cast(t, 0, y);
}

/* --- parametrised pointwise activations --------------------------------------------------- */
/* Which composition translate_pointwise builds (the row's code). */
enum {
  PW_LEAKY_RELU, PW_ELU, PW_SELU, PW_CELU, PW_HARD_SIGMOID, PW_HARD_SWISH, PW_MISH, PW_SOFTPLUS,
  PW_SOFTSIGN, PW_THRESHOLDED_RELU, PW_SWISH
};

/* A float attribute as a scalar of dtype. */
static int attr_scalar(tr_ctx *t, const ir_node *n, const char *name, float fallback,
                       mx_dtype dt, mx_array *out) {
  return tr_scalar(t, out, ir_attr_float(n, name, fallback), dt);
}

/* log(1 + exp(x)) without overflow: MLX's logaddexp(x, 0). */
static int softplus(tr_ctx *t, mx_array x, mx_array *y) {
  mx_array zero;
  TR_TRY(tr_scalar(t, &zero, 0.0, mx_dtype_of(x)));
  return mx_binary(t->mx, y, MX_LOGADDEXP, x, zero);
}

/* clip(alpha * x + beta, 0, 1), HardSigmoid's core (HardSwish: alpha 1/6, beta 1/2). */
static int hard_sigmoid(tr_ctx *t, mx_array x, double alpha, double beta, mx_array *y) {
  mx_dtype dt = mx_dtype_of(x);
  mx_array a, b, zero, one;
  TR_TRY(tr_scalar(t, &a, alpha, dt));
  TR_TRY(tr_scalar(t, &b, beta, dt));
  TR_TRY(tr_scalar(t, &zero, 0.0, dt));
  TR_TRY(tr_scalar(t, &one, 1.0, dt));
  TR_TRY(mx_binary(t->mx, y, MX_MULTIPLY, x, a));
  TR_TRY(mx_binary(t->mx, y, MX_ADD, *y, b));
  return mx_clip(t->mx, y, *y, zero, one);
}

/* alpha * (exp(x) - 1) for x < 0, else x (Elu; Selu and Celu build on it). */
static int elu(tr_ctx *t, mx_array x, mx_array alpha, mx_array *y) {
  mx_array zero, neg, em1;
  TR_TRY(tr_scalar(t, &zero, 0.0, mx_dtype_of(x)));
  TR_TRY(mx_binary(t->mx, &neg, MX_LESS, x, zero));
  TR_TRY(mx_unary(t->mx, &em1, MX_EXPM1, x));
  TR_TRY(mx_binary(t->mx, &em1, MX_MULTIPLY, em1, alpha));
  return mx_where(t->mx, y, neg, em1, x);
}

/* HardSigmoid as host-chain steps (cpu/chain.h: the same roundings as the composition).
 * Composed, MLX fused it into the multiply that follows it in squeeze-and-excitation blocks,
 * recomputing the clip for every element of the large operand on its one thread (PP-OCRv4 rec:
 * 0.16 and 0.27 ms). */
static void hard_sigmoid_steps(const ir_node *n, cpu_chain_step steps[3]) {
  double alpha = ir_attr_float(n, "alpha", 0.2f), beta = ir_attr_float(n, "beta", 0.5f);
  steps[0] = (cpu_chain_step){CPU_CHAIN_MUL, (float)alpha, 0};
  steps[1] = (cpu_chain_step){CPU_CHAIN_ADD, (float)beta, 0};
  steps[2] = (cpu_chain_step){CPU_CHAIN_CLIP, 0.0f, 1.0f};
}

/* HardSigmoid of float32 on the CPU device, when only it reads x (the fusion table's
 * hard_sigmoid): the epilogue of the kernel computing x, where that is a host kernel. */
int op_build_hard_sigmoid_epilogue(tr_ctx *t, const ir_node *n, const op_fusion_match *m,
                                   bool *done) {
  (void)m;
  mx_array x = tr_in(t, 0), y = NULL;
  cpu_chain_step steps[3];
  if (!cpu_kernel_applies(t, x)) return MX_OK;
  hard_sigmoid_steps(n, steps);
  TR_TRY(cpu_chain_fold(t, x, steps, 3, &y));
  if (!y) return MX_OK;
  tr_note_path(t, TR_PATH_EPILOGUE, "chain", 0,
               "the epilogue of the kernel computing its input (CPU)");
  *done = true;
  return tr_out_cast(t, 0, y);
}

/* HardSigmoid of float32 on the CPU device from CPU_CHAIN_MIN_ELEMENTS up: one host kernel; *y
 * stays NULL elsewhere. */
static int hard_sigmoid_host(tr_ctx *t, const ir_node *n, mx_array x, mx_array *y) {
  *y = NULL;
  cpu_chain_step steps[3];
  if (!cpu_kernel_applies(t, x) || mx_size(x) < CPU_CHAIN_MIN_ELEMENTS) return MX_OK;
  hard_sigmoid_steps(n, steps);
  TR_TRY(cpu_chain_build(t, x, steps, 3, y));
  tr_note_path(t, TR_PATH_HOST_KERNEL, "chain", 0, "host kernel (CPU)");
  return MX_OK;
}

static int translate_pointwise(tr_ctx *t, const ir_node *n, const op_row *r) {
  mx_array x, y, a, b, zero;
  TR_TRY(widen(t, &x));
  mx_dtype dt = mx_dtype_of(x);
  TR_TRY(tr_scalar(t, &zero, 0.0, dt));
  switch (r->code) {
    case PW_LEAKY_RELU: { /* x < 0 ? alpha * x : x */
      mx_array neg, scaled;
      TR_TRY(attr_scalar(t, n, "alpha", 0.01f, dt, &a));
      TR_TRY(mx_binary(t->mx, &neg, MX_LESS, x, zero));
      TR_TRY(mx_binary(t->mx, &scaled, MX_MULTIPLY, x, a));
      TR_TRY(mx_where(t->mx, &y, neg, scaled, x));
      break;
    }
    case PW_ELU:
      TR_TRY(attr_scalar(t, n, "alpha", 1.0f, dt, &a));
      TR_TRY(elu(t, x, a, &y));
      break;
    case PW_SELU: /* gamma * (x <= 0 ? alpha * (exp(x) - 1) : x) */
      TR_TRY(attr_scalar(t, n, "alpha", 1.67326319217681884765625f, dt, &a));
      TR_TRY(attr_scalar(t, n, "gamma", 1.05070102214813232421875f, dt, &b));
      TR_TRY(elu(t, x, a, &y));
      TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, y, b));
      break;
    case PW_CELU: { /* max(0, x) + min(0, alpha * (exp(x / alpha) - 1)) */
      mx_array pos, e;
      TR_TRY(attr_scalar(t, n, "alpha", 1.0f, dt, &a));
      TR_TRY(mx_binary(t->mx, &pos, MX_MAXIMUM, x, zero));
      TR_TRY(mx_binary(t->mx, &e, MX_DIVIDE, x, a));
      TR_TRY(mx_unary(t->mx, &e, MX_EXPM1, e));
      TR_TRY(mx_binary(t->mx, &e, MX_MULTIPLY, e, a));
      TR_TRY(mx_binary(t->mx, &e, MX_MINIMUM, e, zero));
      TR_TRY(mx_binary(t->mx, &y, MX_ADD, pos, e));
      break;
    }
    case PW_HARD_SIGMOID: {
      double alpha = ir_attr_float(n, "alpha", 0.2f), beta = ir_attr_float(n, "beta", 0.5f);
      TR_TRY(hard_sigmoid_host(t, n, x, &y));
      if (!y) TR_TRY(hard_sigmoid(t, x, alpha, beta, &y));
      break;
    }
    case PW_HARD_SWISH: /* x * HardSigmoid(x) with alpha 1/6, beta 1/2 */
      TR_TRY(hard_sigmoid(t, x, 1.0 / 6.0, 0.5, &y));
      TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, x, y));
      break;
    case PW_MISH: /* x * tanh(softplus(x)) */
      TR_TRY(softplus(t, x, &y));
      TR_TRY(mx_unary(t->mx, &y, MX_TANH, y));
      TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, x, y));
      break;
    case PW_SOFTPLUS:
      TR_TRY(softplus(t, x, &y));
      break;
    case PW_SOFTSIGN: { /* x / (1 + |x|) */
      mx_array one, d;
      TR_TRY(tr_scalar(t, &one, 1.0, dt));
      TR_TRY(mx_unary(t->mx, &d, MX_ABS, x));
      TR_TRY(mx_binary(t->mx, &d, MX_ADD, d, one));
      TR_TRY(mx_binary(t->mx, &y, MX_DIVIDE, x, d));
      break;
    }
    case PW_THRESHOLDED_RELU: { /* x > alpha ? x : 0 */
      mx_array above;
      TR_TRY(attr_scalar(t, n, "alpha", 1.0f, dt, &a));
      TR_TRY(mx_binary(t->mx, &above, MX_GREATER, x, a));
      TR_TRY(mx_where(t->mx, &y, above, x, zero));
      break;
    }
    case PW_SWISH: /* x * sigmoid(alpha * x) */
      TR_TRY(attr_scalar(t, n, "alpha", 1.0f, dt, &a));
      TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, x, a));
      TR_TRY(mx_unary(t->mx, &y, MX_SIGMOID, y));
      TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, x, y));
      break;
    default:
      return tr_fail(t, "unknown pointwise activation %d", r->code);
  }
  return tr_out_cast(t, 0, y);
}

/* --- PRelu --------------------------------------------------------------------------------- */
/* The slope broadcasts to X in one direction only: the output has X's shape. */
static bool claim_prelu(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  if (!op_all_same_type(g, n, why)) return false;
  const ir_value *x = ir_input(g, n, 0), *slope = ir_input(g, n, 1);
  if (!x || !slope || x->rank < 0 || slope->rank < 0) return true;
  if (slope->rank > x->rank)
    return op_decline(why, "PRelu slope ('%s') has rank %d, more than X's %d; it must broadcast "
                      "to X", slope->name, slope->rank, x->rank);
  for (int i = 0; i < slope->rank; i++) {
    int64_t s = slope->dims[i], d = x->dims[x->rank - slope->rank + i];
    if (s != 1 && s != IR_DIM_UNKNOWN && d != IR_DIM_UNKNOWN && s != d)
      return op_decline(why, "PRelu slope dimension %d is %lld, which does not broadcast to X's "
                        "%lld", i, (long long)s, (long long)d);
  }
  return true;
}

static int translate_prelu(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  mx_array x = tr_in(t, 0), slope = tr_in(t, 1), zero, neg, scaled, y;
  if (mx_ndim(slope) > mx_ndim(x)) return tr_fail(t, "PRelu slope has a higher rank than X");
  TR_TRY(tr_scalar(t, &zero, 0.0, mx_dtype_of(x)));
  TR_TRY(mx_binary(t->mx, &neg, MX_LESS, x, zero));
  TR_TRY(mx_binary(t->mx, &scaled, MX_MULTIPLY, x, slope));
  TR_TRY(mx_where(t->mx, &y, neg, scaled, x));
  return tr_out_cast(t, 0, y);
}

/* --- Shrink -------------------------------------------------------------------------------- */
/* x < -lambd ? x + bias : x > lambd ? x - bias : 0, in float32 for every input type but float64
 * (kept in float64) and cast back (truncating for integers), which is ONNX Runtime's arithmetic. */
static int translate_shrink(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), lambd, neg_lambd, bias, zero, lo, hi, below, above, y;
  mx_dtype ct = mx_dtype_of(x) == MX_FLOAT64 ? MX_FLOAT64 : MX_FLOAT32;
  if (mx_dtype_of(x) != ct) TR_TRY(mx_astype(t->mx, &x, x, ct));
  float l = ir_attr_float(n, "lambd", 0.5f), b = ir_attr_float(n, "bias", 0.0f);
  TR_TRY(tr_scalar(t, &lambd, l, ct));
  TR_TRY(tr_scalar(t, &neg_lambd, -l, ct));
  TR_TRY(tr_scalar(t, &bias, b, ct));
  TR_TRY(tr_scalar(t, &zero, 0.0, ct));
  TR_TRY(mx_binary(t->mx, &lo, MX_ADD, x, bias));
  TR_TRY(mx_binary(t->mx, &hi, MX_SUBTRACT, x, bias));
  TR_TRY(mx_binary(t->mx, &below, MX_LESS, x, neg_lambd));
  TR_TRY(mx_binary(t->mx, &above, MX_GREATER, x, lambd));
  TR_TRY(mx_where(t->mx, &y, above, hi, zero));
  TR_TRY(mx_where(t->mx, &y, below, lo, y));
  return tr_out_cast(t, 0, y);
}

/* --- Softmax, LogSoftmax, Hardmax ---------------------------------------------------------- */
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

/* An empty input has nothing to normalise: its output is empty too (MLX's max refuses to
 * reduce an empty axis, so the composition is not built). */
static int empty_like_input(tr_ctx *t, mx_array x, bool *done) {
  *done = mx_size(x) == 0;
  return *done ? tr_out_cast(t, 0, x) : MX_OK;
}

/* A Softmax over the last axis whose input was scaled by a constant and had a mask added (the
 * fusion table's softmax), on the CPU device for float32: one host kernel from the unscaled
 * scores, the scale and the mask. Declines when nothing folds for these arrays. */
int op_build_softmax_folds(tr_ctx *t, const ir_node *n, const op_fusion_match *m, bool *done) {
  mx_array x = tr_in(t, 0), y;
  int rank = mx_ndim(x);
  int64_t axis = sm_axis(n);
  if (axis < 0) axis += rank;
  if (!cpu_kernel_applies(t, x) || mx_size(x) == 0 || axis != rank - 1) return MX_OK;
  fz_softmax_input in;
  fz_softmax_input_live(&m->u.softmax, t->values, t->const_values, t->mx, &in);
  if (in.scores == m->u.softmax.input) return MX_OK;
  mx_array mask = in.mask != IR_NONE ? t->values[in.mask] : NULL;
  TR_TRY(cpu_softmax_last(t, t->values[in.scores], in.scale, mask, &y));
  tr_note_path(t, TR_PATH_HOST_KERNEL, "softmax",
               (mask ? TR_FOLD_MASK : 0) | (in.scale != 1.0f ? TR_FOLD_SCALE : 0),
               mask ? "host kernel, scale and mask folded in (CPU)"
               : in.scale != 1.0f ? "host kernel, scale folded in (CPU)"
                                  : "host kernel (CPU)");
  *done = true;
  return tr_out_cast(t, 0, y);
}

static int translate_softmax(tr_ctx *t, const ir_node *n, const op_row *r) {
  mx_array x = tr_in(t, 0), y;
  int axes[MX_MAX_RANK], k = 0;
  bool done;
  TR_TRY(sm_axes(t, n, mx_ndim(x), axes, &k));
  TR_TRY(empty_like_input(t, x, &done));
  if (done) return MX_OK;
  if (r->code == SM_SOFTMAX) {
    if (cpu_kernel_applies(t, x) && k == 1 && axes[0] == mx_ndim(x) - 1) { /* one pass per row */
      TR_TRY(cpu_softmax_last(t, x, 1.0f, NULL, &y));
      tr_note_path(t, TR_PATH_HOST_KERNEL, "softmax", 0, "host kernel (CPU)");
    } else if (cpu_fast_applies(t, x)) { /* MLX's CPU softmax runs its scalar exp */
      TR_TRY(cpu_fast_softmax(t, x, axes, k, &y));
      tr_note_path(t, TR_PATH_COMPOSED, "fastmath", 0, "composed (CPU)");
    } else {
      TR_TRY(mx_softmax(t->mx, &y, x, axes, k));
    }
    return tr_out_cast(t, 0, y);
  }
  /* (x - max) - log(sum(exp(x - max))): subtracting the max first keeps the large magnitudes
   * out of the final difference, which would otherwise lose the small log-sum to rounding. */
  mx_array m, lse;
  TR_TRY(widen(t, &x));
  TR_TRY(mx_reduce(t->mx, &m, MX_MAX, x, axes, k, true));
  TR_TRY(mx_binary(t->mx, &x, MX_SUBTRACT, x, m));
  TR_TRY(mx_reduce(t->mx, &lse, MX_LOGSUMEXP, x, axes, k, true));
  TR_TRY(mx_binary(t->mx, &y, MX_SUBTRACT, x, lse));
  return tr_out_cast(t, 0, y);
}

/* Hardmax: 1 at the first maximum over the normalised axes (row-major order), 0 elsewhere.
 * "First" is found without a reshape: the running count of maxima in row-major order over the
 * block is an inclusive cumsum along the last block axis plus, for each earlier block axis j, an
 * exclusive cumsum along j of the counts summed over the axes after j; the first maximum is where
 * that count is 1. NaNs are skipped when finding the maximum (ONNX Runtime skips them too,
 * except a leading NaN, which makes its whole row zero). */
static int translate_hardmax(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), clean, m, eq, ones, count, part, one, y;
  int axes[MX_MAX_RANK], k = 0;
  bool done;
  TR_TRY(sm_axes(t, n, mx_ndim(x), axes, &k));
  TR_TRY(empty_like_input(t, x, &done));
  if (done) return MX_OK;
  mx_array nan, low;
  TR_TRY(mx_unary(t->mx, &nan, MX_ISNAN, x));
  TR_TRY(tr_scalar(t, &low, -INFINITY, mx_dtype_of(x)));
  TR_TRY(mx_where(t->mx, &clean, nan, low, x));
  TR_TRY(mx_reduce(t->mx, &m, MX_MAX, clean, axes, k, true));
  TR_TRY(mx_binary(t->mx, &eq, MX_EQUAL, x, m));
  TR_TRY(mx_astype(t->mx, &ones, eq, MX_INT32));
  TR_TRY(mx_cumsum(t->mx, &count, ones, axes[k - 1], false, true));
  for (int j = k - 2; j >= 0; j--) {
    TR_TRY(mx_reduce(t->mx, &part, MX_SUM, ones, axes + j + 1, k - j - 1, true));
    TR_TRY(mx_cumsum(t->mx, &part, part, axes[j], false, false));
    TR_TRY(mx_binary(t->mx, &count, MX_ADD, count, part));
  }
  TR_TRY(mx_scalar(t->mx, &one, 1, MX_INT32));
  TR_TRY(mx_binary(t->mx, &count, MX_EQUAL, count, one));
  TR_TRY(mx_binary(t->mx, &y, MX_LOGICAL_AND, eq, count));
  return tr_out_cast(t, 0, y);
}

#define UNARY(name, lo, hi, op, types) \
  {"", name, lo, hi, NULL, op_translate_unary, OP_SHAPELESS, types, op, NULL}

#define POINTWISE_T(name, lo, hi, code, types, note) \
  {"", name, lo, hi, NULL, translate_pointwise, OP_SHAPELESS, types, code, note}
#define POINTWISE(name, lo, hi, code, note) POINTWISE_T(name, lo, hi, code, OP_FLOATS, note)

const op_row ops_activation_rows[] = {
    {"", "Relu", 6, 13, NULL, translate_relu, OP_SHAPELESS, OP_FLOATS | OP_F64, 0, NULL},
    {"", "Relu", 14, 14, NULL, translate_relu, OP_SHAPELESS, OP_FLOATS | OP_SIGNED | OP_F64, 0,
     "integer inputs from opset 14"},
    {"", "Sigmoid", 6, 13, NULL, op_translate_unary, OP_SHAPELESS_GPU, OP_FLOATS, MX_SIGMOID,
     "CPU, float32: a host kernel; x * Sigmoid(x) or x * Sigmoid(x * beta) (Swish, QuickGelu) "
     "is one, or the epilogue of the kernel computing x"},
    UNARY("Tanh", 6, 13, MX_TANH, OP_FLOATS | OP_F64),
    {"", "Gelu", 20, 20, claim_gelu, translate_gelu, OP_SHAPELESS, OP_FLOATS, 0,
     "approximate 'none' or 'tanh'; half types computed in float32"},
    {"", "Softmax", 1, 12, claim_softmax, translate_softmax, OP_SHAPELESS_GPU, OP_FLOATS,
     SM_SOFTMAX, "coerced to 2-D at axis (default 1): softmax over axes [axis, rank); CPU: "
     "float32 over the last axis a host kernel"},
    {"", "Softmax", 13, 13, claim_softmax, translate_softmax, OP_SHAPELESS_GPU, OP_FLOATS,
     SM_SOFTMAX, "one axis (default -1); CPU: float32 over the last axis a host kernel"},
    {"", "LogSoftmax", 1, 12, claim_softmax, translate_softmax, OP_SHAPELESS, OP_FLOATS,
     SM_LOG_SOFTMAX, "coerced to 2-D at axis (default 1): over axes [axis, rank)"},
    {"", "LogSoftmax", 13, 13, claim_softmax, translate_softmax, OP_SHAPELESS, OP_FLOATS,
     SM_LOG_SOFTMAX, "one axis (default -1)"},
    {"", "Hardmax", 1, 12, claim_softmax, translate_hardmax, OP_SHAPELESS, OP_FLOATS, 0,
     "coerced to 2-D at axis (default 1): one-hot of the first maximum over axes [axis, rank)"},
    {"", "Hardmax", 13, 13, claim_softmax, translate_hardmax, OP_SHAPELESS, OP_FLOATS, 0,
     "one axis (default -1); one-hot of the first maximum"},
    POINTWISE_T("LeakyRelu", 6, 16, PW_LEAKY_RELU, OP_FLOATS | OP_F64, NULL),
    {"", "PRelu", 7, 16, claim_prelu, translate_prelu, OP_SHAPELESS,
     OP_FLOATS | OP_T(IR_INT32) | OP_T(IR_INT64) | OP_T(IR_UINT32) | OP_T(IR_UINT64), 0 | OP_F64,
     "slope broadcasts to X (unidirectional); integers from opset 9"},
    POINTWISE("Elu", 6, 22, PW_ELU, NULL),
    POINTWISE("Selu", 6, 22, PW_SELU, NULL),
    POINTWISE("Celu", 12, 12, PW_CELU, NULL),
    POINTWISE_T("HardSigmoid", 6, 22, PW_HARD_SIGMOID, OP_FLOATS | OP_F64,
                "CPU, float32, in a shape-keyed group: elementwise host-chain steps, folded into "
                "the kernel computing its input where nothing else reads it"),
    POINTWISE_T("HardSwish", 14, 22, PW_HARD_SWISH, OP_FLOATS | OP_F64, NULL),
    POINTWISE("Mish", 18, 22, PW_MISH, NULL),
    POINTWISE("Softplus", 1, 22, PW_SOFTPLUS, NULL),
    POINTWISE_T("Softsign", 1, 22, PW_SOFTSIGN, OP_FLOATS | OP_F64, NULL),
    POINTWISE_T("ThresholdedRelu", 10, 22, PW_THRESHOLDED_RELU, OP_FLOATS | OP_F64, NULL),
    POINTWISE("Swish", 24, 24, PW_SWISH, NULL),
    {"", "Shrink", 9, 9, NULL, translate_shrink, OP_SHAPELESS, OP_NUMERIC | OP_F64, 0,
     "computed in float32 and cast back (integers truncate), as ONNX Runtime does"},
    OP_ROWS_END,
};
