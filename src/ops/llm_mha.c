/*
 * MultiHeadAttention (com.microsoft) in the forms ONNX Runtime's CPU kernel computes: separate
 * 3-D query [B, S, D], key [B, L, D] and value [B, L, Dv], num_heads N (head sizes D / N and
 * Dv / N), an optional packed bias [D + D + Dv] added to q, k and v, optional past_key /
 * past_value in BNSH ([B, N, P, H]) that the new keys and values are appended to (present_key /
 * present_value [B, N, P + L, H]), and scores softmax(scale q k^T + mask) with
 *   - key_padding_mask (int32): [B] valid key lengths (keys from there on masked), [B, P + L] or
 *     [B, S, P + L] with 0 marking a masked key; a masked score gets mask_filter_value (-10000
 *     by default) added, as ORT's kernel does (a fully masked row then averages, not NaN);
 *   - attention_bias [B or 1, N or 1, S, P + L] added;
 *   - unidirectional 1: query s sees keys j <= P + s (the others get mask_filter_value, added
 *     to the padding mask's: a fully padded row then weighs the causal keys, as ORT's does).
 * scale 0 means 1 / sqrt(H). Computed with MLX's sdpa in float32 (half inputs widened, results
 * rounded once). The sizes are read as concrete shapes, so the translation is shape-keyed: with
 * a growing past, each decode step (a new P) traces once.
 * Declined with reasons: packed QKV (query 5-D, key absent), packed KV (key 5-D), key/value in
 * BNSH (the cross-attention cache form), the [2B] / [3B + 2] padding masks, and the inputs
 * past_sequence_length and cache_indirection (beam search) and the qk output.
 */
#include "ops/families.h"
#include "plan/translate.h"

#include <math.h>

/* A value's static rank, or -1 when unknown (rank 0 counts as unknown: see norm.c). */
static int rank_of(const ir_value *v) { return v && v->rank > 0 ? v->rank : -1; }

static int to_f32(tr_ctx *t, mx_array *a) {
  if (*a && mx_dtype_of(*a) != MX_FLOAT32) TR_TRY(mx_astype(t->mx, a, *a, MX_FLOAT32));
  return MX_OK;
}

/* --- claim ------------------------------------------------------------------------------- */
static bool claim_mha(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  if (ir_attr_int(n, "num_heads", 0) <= 0)
    return op_decline(why, "MultiHeadAttention needs a positive num_heads");
  const ir_value *q = ir_input(g, n, 0), *k = ir_input(g, n, 1), *v = ir_input(g, n, 2);
  if (!k || !v)
    return op_decline(why, "MultiHeadAttention with packed QKV in query (no key/value inputs) "
                           "is not supported; give query, key and value separately");
  if (rank_of(q) != 3 || rank_of(k) != 3 || rank_of(v) != 3)
    return op_decline(why, "MultiHeadAttention needs 3-D query, key and value [B, S, hidden] "
                           "(ranks %d, %d, %d): packed KV (5-D) and key/value already in BNSH "
                           "(the cross-attention cache form) are not supported",
                      rank_of(q), rank_of(k), rank_of(v));
  for (int i = 1; i <= 7; i++) {
    const ir_value *x = ir_input(g, n, i);
    if (x && i != 4 && x->elem_type != q->elem_type)
      return op_decline(why, "MultiHeadAttention input %d has element type %s, unlike query's "
                             "%s", i, ir_elem_name(x->elem_type), ir_elem_name(q->elem_type));
  }
  if (ir_has_input(n, 6) != ir_has_input(n, 7))
    return op_decline(why, "MultiHeadAttention needs past_key and past_value both, or neither");
  if (ir_has_input(n, 8))
    return op_decline(why, "MultiHeadAttention past_sequence_length (a shared past/present "
                           "buffer) is not supported; pass a growing past");
  if (ir_has_input(n, 9))
    return op_decline(why, "MultiHeadAttention cache_indirection (beam search) is not "
                           "supported");
  if (n->n_outputs > 3 && ir_output(g, n, 3))
    return op_decline(why, "MultiHeadAttention output qk is not supported");
  const ir_value *m = ir_input(g, n, 4);
  if (m) {
    if (m->elem_type != IR_INT32)
      return op_decline(why, "MultiHeadAttention key_padding_mask of type %s (int32 expected)",
                        ir_elem_name(m->elem_type));
    int mr = rank_of(m);
    if (mr < 1 || mr > 3)
      return op_decline(why, "MultiHeadAttention key_padding_mask of rank %d is not supported "
                             "([B], [B, total] or [B, S, total])", mr);
    int64_t count = ir_num_elements(m), b = q->rank == 3 ? q->dims[0] : -1;
    if (mr == 1 && (count < 0 || b <= 0 || count != b))
      return op_decline(why, "MultiHeadAttention 1-D key_padding_mask must be [B] with B "
                             "known (the [2B] and [3B + 2] forms are not supported)");
  }
  const ir_value *ab = ir_input(g, n, 5);
  if (ab && rank_of(ab) != 4)
    return op_decline(why, "MultiHeadAttention attention_bias of rank %d (4 expected)",
                      rank_of(ab));
  return true;
}

/* --- translation ------------------------------------------------------------------------- */
/* x [B, L, N * h] (+ bias[off : off + N h]) as [B, N, L, h]. */
static int heads(tr_ctx *t, mx_array x, mx_array bias, int off, int nh, mx_array *out) {
  int b = mx_dim(x, 0), l = mx_dim(x, 1), w = mx_dim(x, 2), h = w / nh;
  if (h * nh != w) return tr_fail(t, "hidden size %d does not split into %d heads", w, nh);
  TR_TRY(to_f32(t, &x));
  if (bias) {
    mx_array part;
    TR_TRY(tr_slice_axis(t, bias, 0, off, off + w, &part));
    TR_TRY(mx_binary(t->mx, &x, MX_ADD, x, part));
  }
  int shape[4] = {b, l, nh, h};
  static const int perm[4] = {0, 2, 1, 3};
  TR_TRY(mx_reshape(t->mx, &x, x, shape, 4));
  return mx_transpose(t->mx, out, x, perm, 4);
}

/* The [B or 1, 1, S, T] float32 additive mask of key_padding_mask and unidirectional; *out
 * NULL when neither applies. */
static int mask_of(tr_ctx *t, const ir_node *n, int b, int s, int past, int total,
                   mx_array *out) {
  mx_array m = tr_in(t, 4), j, fill, zero;
  bool causal = ir_attr_int(n, "unidirectional", 0) == 1;
  *out = NULL;
  if (!m && !causal) return MX_OK;
  int col[4] = {1, 1, 1, total};
  TR_TRY(mx_arange(t->mx, &j, 0, total, 1, MX_INT32));
  TR_TRY(mx_reshape(t->mx, &j, j, col, 4));
  TR_TRY(mx_scalar(t->mx, &zero, 0.0, MX_FLOAT32));
  TR_TRY(mx_scalar(t->mx, &fill, ir_attr_float(n, "mask_filter_value", -10000.0f), MX_FLOAT32));
  if (m) {
    int mr = mx_ndim(m);
    mx_array keep, izero;
    bool fits = mx_dim(m, 0) == b && (mr == 1 || mx_dim(m, -1) == total) &&
                (mr != 3 || mx_dim(m, 1) == s);
    if (!fits)
      return tr_fail(t, "key_padding_mask must be [B], [B, %d] or [B, %d, %d]", total, s,
                     total);
    if (mr == 1) { /* valid lengths */
      int shape[4] = {b, 1, 1, 1};
      TR_TRY(mx_reshape(t->mx, &m, m, shape, 4));
      TR_TRY(mx_binary(t->mx, &keep, MX_LESS, j, m));
    } else {
      int shape[4] = {b, 1, mr == 3 ? s : 1, total};
      TR_TRY(mx_reshape(t->mx, &m, m, shape, 4));
      TR_TRY(mx_scalar_int(t->mx, &izero, 0, MX_INT32));
      TR_TRY(mx_binary(t->mx, &keep, MX_NOT_EQUAL, m, izero));
    }
    TR_TRY(mx_where(t->mx, out, keep, zero, fill));
  }
  if (causal) { /* added to the padding mask's fill, as ORT's kernel adds them */
    mx_array i, ok, c;
    int row[4] = {1, 1, s, 1};
    TR_TRY(mx_arange(t->mx, &i, past, past + s, 1, MX_INT32));
    TR_TRY(mx_reshape(t->mx, &i, i, row, 4));
    TR_TRY(mx_binary(t->mx, &ok, MX_LESS_EQUAL, j, i));
    TR_TRY(mx_where(t->mx, &c, ok, zero, fill));
    if (*out) TR_TRY(mx_binary(t->mx, out, MX_ADD, *out, c));
    else *out = c;
  }
  return MX_OK;
}

static int translate_mha(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  int nh = (int)ir_attr_int(n, "num_heads", 0);
  mx_array q = tr_in(t, 0), k = tr_in(t, 1), v = tr_in(t, 2), bias = tr_in(t, 3);
  mx_array pk = tr_in(t, 6), pv = tr_in(t, 7), mask, ab = tr_in(t, 5), y;
  if (mx_ndim(q) != 3 || mx_ndim(k) != 3 || mx_ndim(v) != 3)
    return tr_fail(t, "MultiHeadAttention query, key and value must be 3-D");
  int b = mx_dim(q, 0), s = mx_dim(q, 1), d = mx_dim(q, 2), dv = mx_dim(v, 2);
  if (mx_dim(k, 0) != b || mx_dim(v, 0) != b || mx_dim(k, 2) != d || mx_dim(v, 1) != mx_dim(k, 1))
    return tr_fail(t, "MultiHeadAttention key must be [B, L, %d] and value [B, L, Dv]", d);
  if (bias) {
    if (mx_ndim(bias) != 1 || mx_dim(bias, 0) != 2 * d + dv)
      return tr_fail(t, "MultiHeadAttention bias must be [%d]", 2 * d + dv);
    TR_TRY(to_f32(t, &bias));
  }
  TR_TRY(heads(t, q, bias, 0, nh, &q));
  TR_TRY(heads(t, k, bias, d, nh, &k));
  TR_TRY(heads(t, v, bias, 2 * d, nh, &v));
  int past = 0;
  if (pk) {
    if (mx_ndim(pk) != 4 || mx_dim(pk, 0) != b || mx_dim(pk, 1) != nh ||
        mx_dim(pk, 3) != d / nh || mx_ndim(pv) != 4 || mx_dim(pv, 2) != mx_dim(pk, 2) ||
        mx_dim(pv, 3) != dv / nh)
      return tr_fail(t, "past_key/past_value must be [B, num_heads, past, head size]");
    past = mx_dim(pk, 2);
    mx_array both[2];
    TR_TRY(to_f32(t, &pk));
    TR_TRY(to_f32(t, &pv));
    both[0] = pk, both[1] = k;
    TR_TRY(mx_concatenate(t->mx, &k, both, 2, 2));
    both[0] = pv, both[1] = v;
    TR_TRY(mx_concatenate(t->mx, &v, both, 2, 2));
  }
  int total = mx_dim(k, 2);
  if (tr_has_out(t, 1)) TR_TRY(tr_out_cast(t, 1, k));
  if (tr_has_out(t, 2)) TR_TRY(tr_out_cast(t, 2, v));
  TR_TRY(mask_of(t, n, b, s, past, total, &mask));
  if (ab) {
    if (mx_ndim(ab) != 4 || mx_dim(ab, 2) != s || mx_dim(ab, 3) != total ||
        (mx_dim(ab, 0) != 1 && mx_dim(ab, 0) != b) || (mx_dim(ab, 1) != 1 && mx_dim(ab, 1) != nh))
      return tr_fail(t, "attention_bias must be [B or 1, num_heads or 1, %d, %d]", s, total);
    TR_TRY(to_f32(t, &ab));
    if (mask) TR_TRY(mx_binary(t->mx, &mask, MX_ADD, mask, ab));
    else mask = ab;
  }
  double scale = ir_attr_float(n, "scale", 0.0f);
  if (scale == 0.0) scale = 1.0 / sqrt((double)(d / nh));
  TR_TRY(mx_sdpa(t->mx, &y, q, k, v, (float)scale, false, mask));
  static const int perm[4] = {0, 2, 1, 3};
  int shape[3] = {b, s, dv};
  TR_TRY(mx_transpose(t->mx, &y, y, perm, 4));
  TR_TRY(mx_reshape(t->mx, &y, y, shape, 3));
  tr_note_path(t, TR_PATH_MLX_FUSED, "sdpa", mask ? TR_FOLD_MASK : 0,
               "MLX sdpa over past + new keys");
  return tr_out_cast(t, 0, y);
}

const op_row ops_llm_mha_rows[] = {
    {"com.microsoft", "MultiHeadAttention", 1, 1, claim_mha, translate_mha, OP_SHAPE_KEYED,
     OP_T(IR_FLOAT) | OP_T(IR_FLOAT16), 0,
     "separate 3-D q/k/v, bias, past/present BNSH (growing), key_padding_mask [B], [B, T] or "
     "[B, S, T], attention_bias, unidirectional; MLX sdpa in float32; packed QKV/KV, BNSH "
     "key/value, past_sequence_length and cache_indirection declined; shape-keyed (a decode "
     "step traces once per past length)",
     NULL, NULL, 0},
    OP_ROWS_END,
};
