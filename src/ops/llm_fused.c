/*
 * The fused pointwise and matrix-product forms ORT's transformer optimizer writes into exported
 * models (com.microsoft), each composed of MLX operations as ONNX Runtime defines it:
 *   - FastGelu(X, bias?): the tanh approximation of Gelu of X + bias,
 *     0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)));
 *   - BiasGelu(A, B): the exact (erf) Gelu of A + B;
 *   - QuickGelu(X): x * sigmoid(alpha x), alpha 1.702 by default;
 *   - FusedMatMul(A, B): alpha * op(A) @ op(B), op transposing the last two axes (transA,
 *     transB) after transBatchA / transBatchB moved the first axis behind the batch axes
 *     ([d0, d1, .., dn-2, dn-1] -> [d1, .., dn-2, d0, dn-1]; both operands then of one rank,
 *     3 or more, as ORT's kernel requires); batch axes broadcast as MatMul's.
 * The activations compute in float32 (half inputs widened, the result rounded once) and depend
 * on ranks only; FusedMatMul builds its permutations from ranks too.
 */
#include "ops/families.h"
#include "plan/translate.h"

static int to_f32(tr_ctx *t, mx_array *a) {
  if (*a && mx_dtype_of(*a) != MX_FLOAT32) TR_TRY(mx_astype(t->mx, a, *a, MX_FLOAT32));
  return MX_OK;
}

/* Input 0 plus input 1 (when given), in float32. */
static int biased(tr_ctx *t, mx_array *x) {
  mx_array a = tr_in(t, 0), b = tr_in(t, 1);
  TR_TRY(to_f32(t, &a));
  if (b) { /* ORT's kernels refuse any other bias shape rather than broadcast it */
    if (mx_ndim(b) != 1 || mx_ndim(a) < 1 || mx_dim(b, 0) != mx_dim(a, -1))
      return tr_fail(t, "the bias must be a 1-D vector of the input's last dimension");
    TR_TRY(to_f32(t, &b));
    TR_TRY(mx_binary(t->mx, &a, MX_ADD, a, b));
  }
  *x = a;
  return MX_OK;
}

/* A bias (input 1) must be a 1-D vector of the input's last dimension where shapes are known. */
static bool claim_bias_row(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  const ir_value *x = ir_input(g, n, 0), *b = ir_input(g, n, 1);
  if (!b) return true;
  if (b->elem_type != x->elem_type)
    return op_decline(why, "%s bias of type %s, unlike the input's %s", r->op_type,
                      ir_elem_name(b->elem_type), ir_elem_name(x->elem_type));
  if (b->rank > 0 && b->rank != 1)
    return op_decline(why, "%s bias of rank %d (a 1-D vector of the last dimension expected, "
                           "as ONNX Runtime's kernel reads it)", r->op_type, b->rank);
  return true;
}

static int translate_fast_gelu(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  mx_array x, y;
  TR_TRY(biased(t, &x));
  TR_TRY(op_gelu(t, x, true, &y));
  return tr_out_cast(t, 0, y);
}

static int translate_bias_gelu(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  mx_array x, y;
  TR_TRY(biased(t, &x));
  TR_TRY(op_gelu(t, x, false, &y));
  return tr_out_cast(t, 0, y);
}

static int translate_quick_gelu(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), a, s, y;
  TR_TRY(to_f32(t, &x));
  TR_TRY(tr_scalar(t, &a, ir_attr_float(n, "alpha", 1.702f), MX_FLOAT32));
  TR_TRY(mx_binary(t->mx, &s, MX_MULTIPLY, x, a));
  TR_TRY(mx_unary(t->mx, &s, MX_SIGMOID, s));
  TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, x, s));
  return tr_out_cast(t, 0, y);
}

/* --- FusedMatMul -------------------------------------------------------------------------- */
static bool claim_fused_matmul(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *a = ir_input(g, n, 0), *b = ir_input(g, n, 1);
  if (!op_all_same_type(g, n, why)) return false;
  static const char *const trans[2] = {"transA", "transB"};
  const ir_value *of[2] = {a, b};
  for (int i = 0; i < 2; i++)
    if (ir_attr_int(n, trans[i], 0) && (!of[i] || of[i]->rank < 2))
      return op_decline(why, "FusedMatMul %s on an operand of rank %d (unknown, or a vector) is "
                             "not supported", trans[i], of[i] ? of[i]->rank : -1);
  bool batch = ir_attr_int(n, "transBatchA", 0) || ir_attr_int(n, "transBatchB", 0);
  /* ORT's kernel requires it too */
  if (batch && (!a || !b || a->rank < 3 || a->rank != b->rank))
    return op_decline(why, "FusedMatMul transBatchA/transBatchB need operands of one rank, 3 or "
                           "more (ranks %d and %d)", a ? a->rank : -1, b ? b->rank : -1);
  return true;
}

/* op(x) for FusedMatMul: transBatch moves axis 0 behind the batch axes, trans swaps the last
 * two. */
static int operand(tr_ctx *t, mx_array x, bool trans, bool trans_batch, mx_array *out) {
  int nd = mx_ndim(x), perm[MX_MAX_RANK];
  if (!trans && !trans_batch) return (*out = x, MX_OK);
  if (nd < 2 || (trans_batch && nd < 3))
    return tr_fail(t, "FusedMatMul cannot transpose an operand of rank %d", nd);
  for (int i = 0; i < nd; i++) perm[i] = i;
  if (trans_batch) {
    for (int i = 0; i < nd - 2; i++) perm[i] = i + 1;
    perm[nd - 2] = 0;
  }
  if (trans) {
    int tmp = perm[nd - 2];
    perm[nd - 2] = perm[nd - 1], perm[nd - 1] = tmp;
  }
  return mx_transpose(t->mx, out, x, perm, nd);
}

static int translate_fused_matmul(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array a = tr_in(t, 0), b = tr_in(t, 1), y, alpha;
  TR_TRY(operand(t, a, ir_attr_int(n, "transA", 0), ir_attr_int(n, "transBatchA", 0), &a));
  TR_TRY(operand(t, b, ir_attr_int(n, "transB", 0), ir_attr_int(n, "transBatchB", 0), &b));
  TR_TRY(mx_matmul(t->mx, &y, a, b));
  float scale = ir_attr_float(n, "alpha", 1.0f);
  if (scale != 1.0f) {
    TR_TRY(tr_scalar(t, &alpha, scale, mx_dtype_of(y)));
    TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, y, alpha));
  }
  return tr_out_cast(t, 0, y);
}

const op_row ops_llm_fused_rows[] = {
    {"com.microsoft", "FastGelu", 1, 1, claim_bias_row, translate_fast_gelu, OP_SHAPELESS,
     OP_FLOATS, 0, "tanh Gelu of X + bias (bias optional), float32 compute", NULL, NULL, 0},
    {"com.microsoft", "BiasGelu", 1, 1, claim_bias_row, translate_bias_gelu, OP_SHAPELESS,
     OP_FLOATS, 0, "erf Gelu of A + B, float32 compute", NULL, NULL, 0},
    {"com.microsoft", "QuickGelu", 1, 1, NULL, translate_quick_gelu, OP_SHAPELESS, OP_FLOATS, 0,
     "x * sigmoid(alpha x), float32 compute", NULL, NULL, 0},
    {"com.microsoft", "FusedMatMul", 1, 1, claim_fused_matmul, translate_fused_matmul,
     OP_SHAPELESS, OP_FLOATS, 0,
     "alpha * op(A) @ op(B): transA/transB, transBatchA/transBatchB (rank >= 3), batch "
     "broadcasting as MatMul",
     NULL, NULL, 0},
    OP_ROWS_END,
};
