/*
 * Attention (ai.onnx, opsets 23 and 24): softmax(Q' K'^T + bias) V with Q' = Q * sqrt(scale) and
 * K' = K * sqrt(scale) (scale defaults to 1/sqrt(head size)), over 4-D [B, H, S, D] operands or
 * 3-D [B, S, H * D] ones split into q_num_heads / kv_num_heads heads. Grouped-query attention lets
 * q head h read kv head h / (Hq / Hkv) (operands reshaped, never repeated). past_key/past_value
 * are concatenated before K and V (present_key/present_value); the bias sums the attn_mask (bool:
 * 0 or -inf; float: added; a last dimension shorter than the total length is padded with -inf),
 * the causal mask (query i sees keys j <= i + past length, upper-left aligned without a past) and,
 * in opset 24, the padding mask of nonpad_kv_seqlen. softcap (when > 0) is softcap * tanh(s /
 * softcap) before the bias. The optional qk_matmul_output is, by qk_matmul_output_mode, the raw
 * product (0, as the spec and ONNX Runtime say; onnx's reference returns it softcapped), after
 * softcap (1), after the bias (2), or the softmax (3). A row masked everywhere gets zero weights,
 * as ONNX Runtime gives (onnx's reference gives NaN). Half-precision inputs are computed in
 * float32 and rounded once. Where no optional output, softcap, attn_mask or nonpad_kv_seqlen is
 * involved, MLX's fast scaled_dot_product_attention does the work (float32 on the CPU, any float
 * type on a GPU); it applies the whole scale to Q, which differs from the spec's split only by
 * rounding. The translation reads shapes (head splits, the causal mask), so nodes compile
 * shape-keyed.
 */
#include "ops/families.h"
#include "plan/translate.h"

#include <math.h>

enum { IN_Q, IN_K, IN_V, IN_MASK, IN_PAST_K, IN_PAST_V, IN_NONPAD };
enum { OUT_Y, OUT_PRESENT_K, OUT_PRESENT_V, OUT_QK };

/* --- claim ------------------------------------------------------------------------------- */
static bool claim_attention(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *q = ir_input(g, n, IN_Q), *k = ir_input(g, n, IN_K), *v = ir_input(g, n, IN_V);
  const ir_value *mask = ir_input(g, n, IN_MASK), *pk = ir_input(g, n, IN_PAST_K);
  const ir_value *pv = ir_input(g, n, IN_PAST_V), *nonpad = ir_input(g, n, IN_NONPAD);
  for (int i = IN_K; i <= IN_V; i++) {
    const ir_value *x = ir_input(g, n, i);
    if (x && !(OP_FLOATS & OP_T(x->elem_type)))
      return op_decline(why, "input %d ('%s') is %s; Attention takes float types", i, x->name,
                        ir_elem_name(x->elem_type));
  }
  int rank = q && q->rank >= 0 ? q->rank : k && k->rank >= 0 ? k->rank : v ? v->rank : -1;
  const ir_value *qkv[3] = {q, k, v};
  for (int i = 0; i < 3; i++)
    if (qkv[i] && qkv[i]->rank >= 0 && qkv[i]->rank != rank)
      return op_decline(why, "Q, K and V have ranks %d, %d and %d; they must agree",
                        q ? q->rank : -1, k ? k->rank : -1, v ? v->rank : -1);
  if (rank >= 0 && rank != 3 && rank != 4)
    return op_decline(why, "Q has rank %d; Attention takes 3-D or 4-D inputs", rank);
  int64_t qh = ir_attr_int(n, "q_num_heads", 0), kvh = ir_attr_int(n, "kv_num_heads", 0);
  if (rank == 3) {
    if (qh <= 0 || kvh <= 0)
      return op_decline(why, "3-D inputs need positive q_num_heads and kv_num_heads attributes");
    if (qh % kvh)
      return op_decline(why, "q_num_heads %lld is not a multiple of kv_num_heads %lld",
                        (long long)qh, (long long)kvh);
    if (q && q->rank == 3 && q->dims[2] >= 0 && q->dims[2] % qh)
      return op_decline(why, "Q's hidden size %lld is not divisible by q_num_heads %lld",
                        (long long)q->dims[2], (long long)qh);
  } else if (rank == 4 && q && k && q->rank == 4 && k->rank == 4 && q->dims[1] > 0 &&
             k->dims[1] > 0 && q->dims[1] % k->dims[1]) {
    return op_decline(why, "Q has %lld heads, K %lld: grouped-query attention needs a multiple",
                      (long long)q->dims[1], (long long)k->dims[1]);
  }
  if (mask && mask->elem_type != IR_BOOL && !(OP_FLOATS & OP_T(mask->elem_type)))
    return op_decline(why, "attn_mask is %s; boolean and float masks are defined",
                      ir_elem_name(mask->elem_type));
  if (mask && mask->rank > 4)
    return op_decline(why, "attn_mask has rank %d; it must broadcast to 4-D", mask->rank);
  if (!pk != !pv)
    return op_decline(why, "past_key and past_value must be given together");
  for (int i = 0; pk && i < 2; i++) {
    const ir_value *p = i ? pv : pk;
    if (p->rank >= 0 && p->rank != 4)
      return op_decline(why, "past %s has rank %d, not 4", i ? "value" : "key", p->rank);
  }
  if (nonpad && pk)
    return op_decline(why, "nonpad_kv_seqlen with past_key/past_value: the spec defines them "
                      "for different cache schemes, not together");
  int64_t sp = ir_attr_int(n, "softmax_precision", 0);
  if (sp && sp != IR_FLOAT && !(q && sp == q->elem_type))
    return op_decline(why, "softmax_precision %s: the softmax is computed in float32 (or the "
                      "inputs' type)", ir_elem_name((int)sp));
  int64_t mode = ir_attr_int(n, "qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3)
    return op_decline(why, "qk_matmul_output_mode %lld is not 0-3", (long long)mode);
  return true;
}

/* --- helpers ----------------------------------------------------------------------------- */
/* [B, S, H * D] -> [B, H, S, D]. */
static int split_heads(tr_ctx *t, mx_array x, int64_t heads, const char *what, mx_array *out) {
  static const int perm[4] = {0, 2, 1, 3};
  int hidden = mx_dim(x, 2);
  if (heads <= 0 || hidden % heads)
    return tr_fail(t, "%s's hidden size %d is not divisible into %lld heads", what, hidden,
                   (long long)heads);
  int shape[4] = {mx_dim(x, 0), mx_dim(x, 1), (int)heads, hidden / (int)heads};
  TR_TRY(mx_reshape(t->mx, out, x, shape, 4));
  return mx_transpose(t->mx, out, *out, perm, 4);
}

static int reshape(tr_ctx *t, mx_array *a, const int *shape, int nd) {
  return mx_reshape(t->mx, a, *a, shape, nd);
}

static int cast(tr_ctx *t, mx_array *a, mx_dtype d) {
  if (mx_dtype_of(*a) != d) TR_TRY(mx_astype(t->mx, a, *a, d));
  return MX_OK;
}

static int add_bias(tr_ctx *t, mx_array *bias, mx_array term) {
  if (!*bias) {
    *bias = term;
    return MX_OK;
  }
  return mx_binary(t->mx, bias, MX_ADD, *bias, term);
}

/* The additive bias in dtype cd ([.., Sq, T] broadcasting to [B, Hq, Sq, T], or NULL): the mask
 * (padded with -inf to T keys), the causal mask offset by the past length, the padding mask. */
static int build_bias(tr_ctx *t, const ir_node *n, int b, int sq, int total, int past,
                      mx_dtype cd, mx_array *bias) {
  mx_array mask = tr_in(t, IN_MASK), nonpad = tr_in(t, IN_NONPAD), zero, ninf, cols, ok, term;
  *bias = NULL;
  TR_TRY(tr_scalar(t, &zero, 0.0, cd));
  TR_TRY(tr_scalar(t, &ninf, -INFINITY, cd));
  if (mask) {
    int mr = mx_ndim(mask);
    if (mr > 4) return tr_fail(t, "attn_mask has rank %d", mr);
    if (mx_dtype_of(mask) == MX_BOOL) TR_TRY(mx_where(t->mx, &term, mask, zero, ninf));
    else TR_TRY(mx_astype(t->mx, &term, mask, cd));
    int last = mr ? mx_dim(term, -1) : 1;
    if (last > total)
      return tr_fail(t, "attn_mask covers %d keys, the total sequence length is %d", last, total);
    if (mr && last < total) {
      int lo[4] = {0}, hi[4] = {0};
      hi[mr - 1] = total - last;
      TR_TRY(mx_pad(t->mx, &term, term, lo, hi, mr, ninf));
    }
    TR_TRY(add_bias(t, bias, term));
  }
  if (sq > 0 && total > 0) TR_TRY(mx_arange(t->mx, &cols, 0, total, 1, MX_INT32));
  else return MX_OK; /* empty attention: nothing to mask */
  if (ir_attr_int(n, "is_causal", 0)) {
    mx_array rows, off;
    int rshape[2] = {sq, 1};
    TR_TRY(mx_arange(t->mx, &rows, 0, sq, 1, MX_INT32));
    TR_TRY(reshape(t, &rows, rshape, 2));
    TR_TRY(mx_scalar_int(t->mx, &off, past, MX_INT32));
    TR_TRY(mx_binary(t->mx, &rows, MX_ADD, rows, off));
    TR_TRY(mx_binary(t->mx, &ok, MX_LESS_EQUAL, cols, rows));
    TR_TRY(mx_where(t->mx, &term, ok, zero, ninf));
    TR_TRY(add_bias(t, bias, term));
  }
  if (nonpad) {
    int lshape[4] = {b, 1, 1, 1};
    if ((int)mx_size(nonpad) != b)
      return tr_fail(t, "nonpad_kv_seqlen has %zu values for a batch of %d", mx_size(nonpad), b);
    TR_TRY(mx_astype(t->mx, &nonpad, nonpad, MX_INT32));
    TR_TRY(reshape(t, &nonpad, lshape, 4));
    TR_TRY(mx_binary(t->mx, &ok, MX_LESS, cols, nonpad));
    TR_TRY(mx_where(t->mx, &term, ok, zero, ninf));
    TR_TRY(add_bias(t, bias, term));
  }
  return MX_OK;
}

/* a @ b over [B, Hq, ...] a against [B, Hkv, ...] b: with groups > 1, a is viewed as
 * [B, Hkv, groups, ...] and b broadcast over the groups. */
static int grouped_matmul(tr_ctx *t, mx_array a, mx_array b, int groups, mx_array *out) {
  static const int axis2 = 2;
  if (groups == 1) return mx_matmul(t->mx, out, a, b);
  int s5[5] = {mx_dim(a, 0), mx_dim(b, 1), groups, mx_dim(a, 2), mx_dim(a, 3)};
  TR_TRY(reshape(t, &a, s5, 5));
  TR_TRY(mx_expand_dims(t->mx, &b, b, &axis2, 1));
  TR_TRY(mx_matmul(t->mx, out, a, b));
  int s4[4] = {s5[0], s5[1] * groups, mx_dim(*out, 3), mx_dim(*out, 4)};
  return reshape(t, out, s4, 4);
}

/* --- translation ------------------------------------------------------------------------- */
static int translate_attention(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array q = tr_in(t, IN_Q), k = tr_in(t, IN_K), v = tr_in(t, IN_V);
  mx_array pk = tr_in(t, IN_PAST_K), pv = tr_in(t, IN_PAST_V);
  int rank = mx_ndim(q);
  if (rank != 3 && rank != 4) return tr_fail(t, "Q has rank %d; 3-D or 4-D is expected", rank);
  if (mx_ndim(k) != rank || mx_ndim(v) != rank)
    return tr_fail(t, "Q, K and V have ranks %d, %d and %d", rank, mx_ndim(k), mx_ndim(v));
  if (rank == 3) {
    int64_t qh = ir_attr_int(n, "q_num_heads", 0), kvh = ir_attr_int(n, "kv_num_heads", 0);
    TR_TRY(split_heads(t, q, qh, "Q", &q));
    TR_TRY(split_heads(t, k, kvh, "K", &k));
    TR_TRY(split_heads(t, v, kvh, "V", &v));
  }
  if (!pk != !pv) return tr_fail(t, "past_key and past_value must be given together");
  int past = 0;
  if (pk) {
    mx_array kk[2] = {pk, k}, vv[2] = {pv, v};
    if (mx_ndim(pk) != 4 || mx_ndim(pv) != 4) return tr_fail(t, "past key/value must be 4-D");
    past = mx_dim(pk, 2);
    TR_TRY(mx_concatenate(t->mx, &k, kk, 2, 2));
    TR_TRY(mx_concatenate(t->mx, &v, vv, 2, 2));
  }
  int b = mx_dim(q, 0), hq = mx_dim(q, 1), sq = mx_dim(q, 2), d = mx_dim(q, 3);
  int hkv = mx_dim(k, 1), total = mx_dim(k, 2), dv = mx_dim(v, 3);
  if (mx_dim(k, 0) != b || mx_dim(v, 0) != b || mx_dim(v, 1) != hkv || mx_dim(v, 2) != total ||
      mx_dim(k, 3) != d)
    return tr_fail(t, "Q [%d, %d, %d, %d], K [%d, %d, %d, %d] and V [%d, %d, %d, %d] do not fit "
                   "together", b, hq, sq, d, mx_dim(k, 0), hkv, total, mx_dim(k, 3),
                   mx_dim(v, 0), mx_dim(v, 1), mx_dim(v, 2), dv);
  if (hkv <= 0 || hq % hkv)
    return tr_fail(t, "Q has %d heads, K %d: not a multiple", hq, hkv);
  for (int i = OUT_PRESENT_K; i <= OUT_PRESENT_V; i++) {
    mx_array present = i == OUT_PRESENT_K ? k : v;
    if (!tr_has_out(t, i)) continue;
    TR_TRY(cast(t, &present, tr_out_dtype(t, i)));
    TR_TRY(tr_out(t, i, present));
  }
  const ir_attr *sa = ir_find_attr(n, "scale");
  double scale = sa && sa->type == IR_ATTR_FLOAT ? sa->f : 1.0 / sqrt((double)d);
  double softcap = ir_attr_float(n, "softcap", 0.0f);
  int64_t mode = ir_attr_int(n, "qk_matmul_output_mode", 0);
  bool want_qk = tr_has_out(t, OUT_QK), causal = ir_attr_int(n, "is_causal", 0) != 0;
  int groups = hq / hkv;
  mx_dtype in_t = mx_dtype_of(q), y_t = tr_out_dtype(t, OUT_Y);
  mx_array bias, y;

  bool same_types = mx_dtype_of(k) == in_t && mx_dtype_of(v) == in_t;
  if (!want_qk && softcap <= 0 && !tr_in(t, IN_MASK) && !tr_in(t, IN_NONPAD) && same_types &&
      (in_t == MX_FLOAT32 || t->mx->device == MX_DEVICE_GPU)) {
    /* Causal alone never masks a whole row (key 0 is always visible); MLX's own causal mask
     * is bottom-right aligned, which is ONNX's when the new keys are as many as the queries. */
    bool aligned = causal && total - sq == past;
    bias = NULL;
    if (causal && !aligned) TR_TRY(build_bias(t, n, b, sq, total, past, in_t, &bias));
    TR_TRY(mx_sdpa(t->mx, &y, q, k, v, (float)scale, aligned, bias));
    tr_note_path(t, TR_PATH_MLX_FUSED, "sdpa", 0, "fast sdpa");
  } else {
    static const int last = -1;
    mx_array qk, s, probs, f, zero, ninf;
    mx_dtype cd = MX_FLOAT32;
    TR_TRY(cast(t, &q, cd));
    TR_TRY(cast(t, &k, cd));
    TR_TRY(cast(t, &v, cd));
    TR_TRY(tr_scalar(t, &f, sqrt(scale), cd));
    TR_TRY(mx_binary(t->mx, &q, MX_MULTIPLY, q, f));
    TR_TRY(mx_binary(t->mx, &k, MX_MULTIPLY, k, f));
    static const int swap[4] = {0, 1, 3, 2};
    TR_TRY(mx_transpose(t->mx, &k, k, swap, 4));
    TR_TRY(grouped_matmul(t, q, k, groups, &qk));
    s = qk;
    if (softcap > 0) {
      TR_TRY(tr_scalar(t, &f, softcap, cd));
      TR_TRY(mx_binary(t->mx, &s, MX_DIVIDE, s, f));
      TR_TRY(mx_unary(t->mx, &s, MX_TANH, s));
      TR_TRY(mx_binary(t->mx, &s, MX_MULTIPLY, s, f));
    }
    mx_array capped = s;
    TR_TRY(build_bias(t, n, b, sq, total, past, cd, &bias));
    if (bias) TR_TRY(mx_binary(t->mx, &s, MX_ADD, s, bias));
    TR_TRY(mx_softmax(t->mx, &probs, s, &last, 1));
    if (bias) {
      /* a row masked everywhere: zero weights (its softmax is NaN) */
      mx_array top, dead;
      TR_TRY(mx_reduce(t->mx, &top, MX_MAX, s, (const int[]){3}, 1, true));
      TR_TRY(tr_scalar(t, &ninf, -INFINITY, cd));
      TR_TRY(tr_scalar(t, &zero, 0.0, cd));
      TR_TRY(mx_binary(t->mx, &dead, MX_EQUAL, top, ninf));
      TR_TRY(mx_where(t->mx, &probs, dead, zero, probs));
    }
    TR_TRY(grouped_matmul(t, probs, v, groups, &y));
    if (want_qk) {
      mx_array out = mode == 0 ? qk : mode == 1 ? capped : mode == 2 ? s : probs;
      TR_TRY(cast(t, &out, tr_out_dtype(t, OUT_QK)));
      TR_TRY(tr_out(t, OUT_QK, out));
    }
    tr_note_path(t, TR_PATH_COMPOSED, NULL, 0, "composed");
  }
  if (rank == 3) {
    static const int perm[4] = {0, 2, 1, 3};
    int shape[3] = {b, sq, hq * dv};
    TR_TRY(mx_transpose(t->mx, &y, y, perm, 4));
    TR_TRY(reshape(t, &y, shape, 3));
  }
  TR_TRY(cast(t, &y, y_t));
  return tr_out(t, OUT_Y, y);
}

#define ATTN_NOTE "3-D/4-D, GQA, causal, bool/float masks (padded to the total length), past/" \
                  "present, softcap, qk_matmul_output modes 0-3; shape-keyed"

const op_row ops_attention_rows[] = {
    {"", "Attention", 23, 23, claim_attention, translate_attention, OP_SHAPE_KEYED, OP_FLOATS, 0,
     ATTN_NOTE "; attn_mask and is_causal combine as in opset 24"},
    {"", "Attention", 24, 24, claim_attention, translate_attention, OP_SHAPE_KEYED, OP_FLOATS, 0,
     ATTN_NOTE "; nonpad_kv_seqlen (not with past_key/past_value)"},
    OP_ROWS_END,
};
