/*
 * Linear-algebra operators: Einsum and Det. Einsum hands the equation to MLX's einsum, which
 * follows numpy's grammar as ONNX does (explicit "->" output or the implicit one: the labels
 * used once, in alphabetical order, after any "..." dims; "..." broadcasting; repeated labels as
 * diagonals). Spaces are removed first (ONNX equations may contain them). Only floating-point
 * operands are claimed (float64 too on the CPU device, where MLX computes it exactly): MLX
 * contracts through matmul, which has no integer kernels. Det is MLX's
 * LU-based determinant over the last two axes; MLX runs its LU factorisation on the CPU only, so
 * the bridge routes Det to the CPU stream whatever the session's device (the result moves to the
 * GPU as needed). Float16/bfloat16 determinants are computed in float32; float64 is declined
 * (MLX's LU works in float32 precision: results are off by ~1e-8).
 */
#include "ops/families.h"
#include "plan/translate.h"

#include <ctype.h>
#include <string.h>

enum { EINSUM_MAX_EQUATION = 256 };

/* --- Einsum ------------------------------------------------------------------------------ */
/* The equation without spaces; false when it is missing, too long or uses other characters. */
static bool einsum_equation(const ir_node *n, char *out, size_t cap) {
  const char *eq = ir_attr_string(n, "equation", NULL);
  if (!eq) return false;
  size_t k = 0;
  for (const char *c = eq; *c; c++) {
    if (*c == ' ') continue;
    if (!isalpha((unsigned char)*c) && !strchr(".,->", *c)) return false;
    if (k + 1 >= cap) return false;
    out[k++] = *c;
  }
  out[k] = 0;
  return true;
}

static bool claim_einsum(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  char eq[EINSUM_MAX_EQUATION];
  if (!einsum_equation(n, eq, sizeof eq))
    return op_decline(why, "the equation attribute is missing, longer than %d characters or "
                           "holds characters other than letters, ',', '->' and '...'",
                      EINSUM_MAX_EQUATION - 1);
  if (!op_all_same_type(g, n, why)) return false;
  int terms = 1;
  const char *arrow = strstr(eq, "->");
  for (const char *c = eq; *c && (!arrow || c < arrow); c++) terms += *c == ',';
  if (terms != n->n_inputs)
    return op_decline(why, "the equation names %d operands but the node has %d inputs", terms,
                      n->n_inputs);
  return true;
}

static int translate_einsum(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  char eq[EINSUM_MAX_EQUATION];
  if (!einsum_equation(n, eq, sizeof eq)) return tr_fail(t, "invalid equation");
  mx_array ops[MX_MAX_RANK * 4], y;
  if (n->n_inputs > (int)(sizeof ops / sizeof ops[0])) return tr_fail(t, "too many operands");
  for (int i = 0; i < n->n_inputs; i++) {
    ops[i] = tr_in(t, i);
    if (!ops[i]) return tr_fail(t, "input %d is missing", i);
  }
  TR_TRY(mx_einsum(t->mx, &y, eq, ops, (size_t)n->n_inputs));
  mx_dtype want = tr_out_dtype(t, 0);
  if (mx_dtype_of(y) != want) TR_TRY(mx_astype(t->mx, &y, y, want));
  return tr_out(t, 0, y);
}

/* --- Det --------------------------------------------------------------------------------- */
static bool claim_det(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *x = ir_input(g, n, 0);
  if (x->rank >= 0 && x->rank < 2)
    return op_decline(why, "input has rank %d; Det needs [*, M, M]", x->rank);
  if (x->rank >= 2 && x->dims[x->rank - 1] != IR_DIM_UNKNOWN &&
      x->dims[x->rank - 2] != IR_DIM_UNKNOWN && x->dims[x->rank - 1] != x->dims[x->rank - 2])
    return op_decline(why, "the last two dims (%lld x %lld) are not square",
                      (long long)x->dims[x->rank - 2], (long long)x->dims[x->rank - 1]);
  return true;
}

static int translate_det(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  mx_array x = tr_in(t, 0), y;
  if (mx_ndim(x) < 2 || mx_dim(x, -1) != mx_dim(x, -2))
    return tr_fail(t, "input must be [*, M, M]");
  if (mx_dtype_of(x) != MX_FLOAT32) TR_TRY(mx_astype(t->mx, &x, x, MX_FLOAT32));
  TR_TRY(mx_det(t->mx, &y, x));
  mx_dtype want = tr_out_dtype(t, 0);
  if (mx_dtype_of(y) != want) TR_TRY(mx_astype(t->mx, &y, y, want));
  return tr_out(t, 0, y);
}

const op_row ops_linalg_rows[] = {
    {"", "Einsum", 12, 25, claim_einsum, translate_einsum, OP_SHAPE_KEYED, OP_FLOATS | OP_F64,
     0,
     "MLX's einsum (numpy grammar: implicit output, '...', diagonals); float64 on the CPU "
     "device; integer operands declined (MLX's matmul has no integer kernels)"},
    {"", "Det", 11, 25, claim_det, translate_det, OP_SHAPE_KEYED, OP_FLOATS, 0,
     "MLX's LU determinant, always on the CPU stream (MLX's LU is CPU-only); half types in "
     "float32"},
    OP_ROWS_END,
};
