/*
 * Matrix products: MatMul (numpy semantics: batch dimensions broadcast, a 1-D operand gets a 1
 * prepended (A) or appended (B) that is squeezed from the result, which MLX's matmul does itself)
 * and Gemm (Y = alpha * A' * B' + beta * C on 2-D operands, A' and B' optionally transposed, C
 * unidirectionally broadcast to (M, N); C is required before opset 11 and optional from it). MLX
 * multiplies floating-point matrices only, so integer MatMul and Gemm (allowed by ONNX from opset
 * 9) are declined with a reason rather than computed in float32, which would round large values.
 * As in ONNX Runtime, beta == 0 drops C entirely (so infinities in C do not become NaNs).
 */
#include "cpu/attention.h"
#include "ops/families.h"
#include "ops/fusion_match.h"
#include "cpu/matmul.h"
#include "plan/translate.h"

#include <string.h>

/* --- shared helpers ---------------------------------------------------------------------- */
/* Integer products are declined: MLX's matmul takes float16, bfloat16 and float32 only. */
static bool decline_ints(const ir_graph *g, const ir_node *n, op_why why) {
  const ir_value *a = ir_input(g, n, 0);
  if (a && !((OP_FLOATS | OP_F64) & OP_T(a->elem_type)))
    return op_decline(why,
                      "%s of %s: MLX multiplies floating-point matrices only (float32, float16, "
                      "bfloat16, float64 on the CPU); Cast the operands to float32 or let the CPU "
                      "provider run it",
                      n->op_type, ir_elem_name(a->elem_type));
  return true;
}

/* --- MatMul ------------------------------------------------------------------------------ */
static bool claim_matmul(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  if (!decline_ints(g, n, why) || !op_all_same_type(g, n, why)) return false;
  for (int i = 0; i < 2; i++) {
    const ir_value *v = ir_input(g, n, i);
    if (v && v->rank == 0)
      return op_decline(why, "MatMul input %d ('%s') is a scalar; ONNX requires rank >= 1", i,
                        v->name);
  }
  return true;
}

/* A constant float32 2-D weight: packed once for the CPU device's host kernel (cpu/matmul.c),
 * so the node is shape-keyed there; shapeless elsewhere. */
static op_compile_class matmul_class(const ir_graph *g, const ir_node *n) {
  const ir_value *w = ir_input(g, n, 1);
  return w && w->rank == 2 && w->elem_type == IR_FLOAT && op_input_is_const(g, n, 1)
             ? OP_SHAPELESS_GPU
             : OP_SHAPELESS;
}

static int prepare_matmul(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  mx_array packed;
  if (!tr_input_is_constant(t, 1)) return MX_OK;
  TR_TRY(cpu_matmul_prepare(t, tr_in(t, 1), &packed));
  return packed ? tr_keep_derived(t, 0, packed) : MX_OK;
}

/* Whether value v is read by one Transpose alone, one that swaps axes 1 and 2 of four (the heads
 * of attention's output merged back next to its rows), and is no graph output. */
static bool read_by_head_merge(const ir_graph *g, int v) {
  const ir_node *r = fz_only_reader(g, v);
  const ir_attr *perm = r ? ir_find_attr(r, "perm") : NULL;
  static const int64_t swap12[4] = {0, 2, 1, 3};
  return perm && strcmp(r->op_type, "Transpose") == 0 && r->domain[0] == 0 &&
         perm->type == IR_ATTR_INTS && perm->count == 4 &&
         memcmp(perm->ints, swap12, sizeof swap12) == 0;
}

/* The MatMul that ends attention spelled in nodes (the fusion table's attention) as one host
 * kernel, unless the product has a packed weight (its own kernel then) or the live operands do
 * not suit the kernel (cpu_attention_applies). */
int op_build_attention_nodes(tr_ctx *t, const ir_node *n, const op_fusion_match *m, bool *done) {
  const fz_attention *at = &m->u.attention;
  mx_array a = tr_in(t, 0), b = tr_in(t, 1), packed = tr_derived(t, 0), x, y;
  if (mx_ndim(a) == 0 || mx_ndim(b) == 0 || cpu_matmul_applies(t, a, b, packed)) return MX_OK;
  x = t->values[at->softmax.input];
  if (!x || (at->need_rank >= 0 && mx_ndim(x) != at->need_rank)) return MX_OK;
  fz_softmax_input in;
  fz_softmax_input_live(&at->softmax, t->values, t->const_values, t->mx, &in);
  const ir_node *mm = fz_attention_product(t->g, in.scores);
  mx_array q = mm ? t->values[mm->inputs[0]] : NULL, kt = mm ? t->values[mm->inputs[1]] : NULL;
  if (!q || !kt || !cpu_attention_applies(t, q, kt, b)) return MX_OK;
  bool merge = read_by_head_merge(t->g, n->outputs[0]);
  mx_array mask = in.mask != IR_NONE ? t->values[in.mask] : NULL;
  TR_TRY(cpu_attention_build(t, q, kt, b, mask, in.scale, merge, &y));
  if (merge)
    tr_note_path(t, TR_PATH_HOST_KERNEL, "attention", TR_FOLD_MERGE_HEADS,
                 "attention in one kernel, heads merged (CPU)");
  else
    tr_note_path(t, TR_PATH_HOST_KERNEL, "attention", 0, "attention in one kernel (CPU)");
  *done = true;
  return tr_out(t, 0, y);
}

static int translate_matmul(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  mx_array a = tr_in(t, 0), b = tr_in(t, 1), packed = tr_derived(t, 0), y;
  if (mx_ndim(a) == 0 || mx_ndim(b) == 0) return tr_fail(t, "MatMul operands must have rank >= 1");
  if (cpu_matmul_applies(t, a, b, packed)) {
    TR_TRY(cpu_matmul_build(t, a, b, packed, NULL, &y));
    tr_note_path(t, TR_PATH_HOST_KERNEL, "matmul_packed", 0, "packed weight (CPU)");
    return tr_out(t, 0, y);
  }
  if (cpu_matmul_batched_applies(t, a, b)) {
    TR_TRY(cpu_matmul_batched_build(t, a, b, &y));
    tr_note_path(t, TR_PATH_HOST_KERNEL, "matmul_batched", 0,
                 "batched, operands read in place (CPU)");
    return tr_out(t, 0, y);
  }
  TR_TRY(mx_matmul(t->mx, &y, a, b));
  return tr_out_cast(t, 0, y);
}

/* --- Gemm -------------------------------------------------------------------------------- */
/* The (M, N) of the product when the shapes of A and B are known, else -1 entries. */
static void gemm_mn(const ir_graph *g, const ir_node *n, int64_t *m, int64_t *nn) {
  const ir_value *a = ir_input(g, n, 0), *b = ir_input(g, n, 1);
  bool ta = ir_attr_int(n, "transA", 0) != 0, tb = ir_attr_int(n, "transB", 0) != 0;
  *m = a && a->rank == 2 ? a->dims[ta ? 1 : 0] : -1;
  *nn = b && b->rank == 2 ? b->dims[tb ? 0 : 1] : -1;
}

static bool claim_gemm(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  if (!decline_ints(g, n, why) || !op_all_same_type(g, n, why)) return false;
  for (int i = 0; i < 2; i++) {
    const ir_value *v = ir_input(g, n, i);
    if (v && v->rank >= 0 && v->rank != 2)
      return op_decline(why, "Gemm input %d ('%s') has rank %d; Gemm takes 2-D matrices (use "
                        "MatMul for batches)", i, v->name, v->rank);
  }
  const ir_value *c = ir_input(g, n, 2);
  if (!c) return true;
  if (c->rank > 2)
    return op_decline(why, "Gemm C ('%s') has rank %d; it must broadcast to (M, N)", c->name,
                      c->rank);
  int64_t mn[2];
  gemm_mn(g, n, &mn[0], &mn[1]);
  for (int i = 0; c->rank > 0 && i < c->rank; i++) {
    int64_t d = c->dims[i], want = mn[2 - c->rank + i];
    if (d > 1 && want >= 0 && d != want)
      return op_decline(why, "Gemm C dimension %d is %lld, which does not broadcast to %lld", i,
                        (long long)d, (long long)want);
  }
  return true;
}

/* Gemm's B as the product's right operand: B, or its transpose (a view) with transB. */
static int gemm_b(tr_ctx *t, const ir_node *n, mx_array *b) {
  static const int swap[2] = {1, 0};
  *b = tr_in(t, 1);
  if (!ir_attr_int(n, "transB", 0)) return MX_OK;
  return mx_transpose(t->mx, b, *b, swap, 2);
}

/* A constant float32 B with alpha = 1: packed once for the CPU device's product, as MatMul's. */
static op_compile_class gemm_class(const ir_graph *g, const ir_node *n) {
  const ir_value *b = ir_input(g, n, 1);
  return b && b->rank == 2 && b->elem_type == IR_FLOAT && op_input_is_const(g, n, 1) &&
                 ir_attr_float(n, "alpha", 1.0f) == 1.0f
             ? OP_SHAPELESS_GPU
             : OP_SHAPELESS;
}

static int prepare_gemm(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array b, packed;
  if (!tr_input_is_constant(t, 1) || ir_attr_float(n, "alpha", 1.0f) != 1.0f ||
      mx_ndim(tr_in(t, 1)) != 2)
    return MX_OK;
  TR_TRY(gemm_b(t, n, &b));
  TR_TRY(cpu_matmul_prepare(t, b, &packed));
  return packed ? tr_keep_derived(t, 0, packed) : MX_OK;
}

/* C as a row of N floats to start the product from: float32 [N] or [1, N] with beta = 1. */
static bool gemm_bias_row(mx_array c, float beta, int n) {
  return c && beta == 1.0f && mx_dtype_of(c) == MX_FLOAT32 &&
         ((mx_ndim(c) == 1 && mx_dim(c, 0) == n) ||
          (mx_ndim(c) == 2 && mx_dim(c, 0) == 1 && mx_dim(c, 1) == n));
}

/* *y += beta * C, C broadcasting to (M, N). */
static int add_scaled_c(tr_ctx *t, mx_array c, float beta, mx_array *y) {
  mx_array s;
  if (mx_ndim(c) > 2)
    return tr_fail(t, "Gemm C has rank %d; it must broadcast to (M, N)", mx_ndim(c));
  if (beta != 1.0f) {
    TR_TRY(tr_scalar(t, &s, beta, mx_dtype_of(c)));
    TR_TRY(mx_binary(t->mx, &c, MX_MULTIPLY, c, s));
  }
  return mx_binary(t->mx, y, MX_ADD, *y, c);
}

/* alpha * (A' B') + beta * C. A constant B on the CPU device (alpha = 1) takes the packed
 * product (cpu/matmul.c), C as its bias row where C is one, else added after. MLX's addmm
 * broadcasts C to the product's shape with a fixed broadcast_to, which a shapeless compiled
 * function would replay for other sizes (writing past its buffer), so there the scale and the
 * add are separate ops (the add broadcasts per call).
 * On the CPU device, in a graph built for one shape (eager or keyed), a float32 product with
 * alpha = beta = 1 is one addmm: BLAS accumulates onto C instead of zeroing its output and MLX
 * adding a broadcast row in its strided (scalar) loop. */
static int translate_gemm(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  static const int swap[2] = {1, 0};
  mx_array a = tr_in(t, 0), b = tr_in(t, 1), c = tr_in(t, 2), packed = tr_derived(t, 0), y, s;
  if (mx_ndim(a) != 2 || mx_ndim(b) != 2) return tr_fail(t, "Gemm takes 2-D A and B");
  float alpha = ir_attr_float(n, "alpha", 1.0f), beta = ir_attr_float(n, "beta", 1.0f);
  if (ir_attr_int(n, "transA", 0)) TR_TRY(mx_transpose(t->mx, &a, a, swap, 2));
  TR_TRY(gemm_b(t, n, &b));
  if (alpha == 1.0f && cpu_matmul_applies(t, a, b, packed)) {
    bool row = gemm_bias_row(c, beta, mx_dim(b, 1));
    mx_array bias = NULL;
    if (row) {
      int shape[1] = {mx_dim(b, 1)};
      TR_TRY(mx_reshape(t->mx, &bias, c, shape, 1));
    }
    TR_TRY(cpu_matmul_build(t, a, b, packed, bias, &y));
    if (c && beta != 0.0f && !row) TR_TRY(add_scaled_c(t, c, beta, &y));
    tr_note_path(t, TR_PATH_HOST_KERNEL, "matmul_packed", row ? TR_FOLD_BIAS : 0,
                 row ? "packed weight, C its bias row (CPU)" : "packed weight (CPU)");
    return tr_out_cast(t, 0, y);
  }
  if (c && alpha == 1.0f && beta == 1.0f && mx_ndim(c) <= 2 &&
      t->mx->device == MX_DEVICE_CPU && t->trace != TR_TRACE_SHAPELESS &&
      mx_dtype_of(a) == MX_FLOAT32 && mx_dtype_of(b) == MX_FLOAT32 &&
      mx_dtype_of(c) == MX_FLOAT32) {
    TR_TRY(mx_addmm(t->mx, &y, c, a, b));
    tr_note_path(t, TR_PATH_MLX_FUSED, "addmm", TR_FOLD_BIAS, "addmm (CPU)");
    return tr_out_cast(t, 0, y);
  }
  TR_TRY(mx_matmul(t->mx, &y, a, b));
  if (alpha != 1.0f) {
    TR_TRY(tr_scalar(t, &s, alpha, mx_dtype_of(y)));
    TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, y, s));
  }
  if (c && beta != 0.0f) TR_TRY(add_scaled_c(t, c, beta, &y));
  return tr_out_cast(t, 0, y);
}

/* The element types ONNX allows for MatMul and Gemm: integer ones reach the claim, which
 * explains why they are declined. */
#define MM_TYPES \
  (OP_FLOATS | OP_F64 | OP_T(IR_INT32) | OP_T(IR_INT64) | OP_T(IR_UINT32) | OP_T(IR_UINT64))

const op_row ops_math_rows[] = {
    {"", "MatMul", 1, 13, claim_matmul, translate_matmul, OP_SHAPELESS_GPU, MM_TYPES, 0,
     "integer operands declined (MLX matmul is floating-point only); CPU: a constant float32 "
     "weight is packed once", matmul_class, prepare_matmul},
    {"", "Gemm", 7, 10, claim_gemm, translate_gemm, OP_SHAPELESS_GPU, MM_TYPES, 0,
     "C required; integer operands declined; CPU: a constant float32 B (alpha 1) is packed once",
     gemm_class, prepare_gemm},
    {"", "Gemm", 11, 13, claim_gemm, translate_gemm, OP_SHAPELESS_GPU, MM_TYPES, 0,
     "C optional; integer operands declined; CPU: a constant float32 B (alpha 1) is packed once",
     gemm_class, prepare_gemm},
    OP_ROWS_END,
};
