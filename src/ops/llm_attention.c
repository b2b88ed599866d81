/*
 * GroupQueryAttention (com.microsoft) in its basic decoder form: separate q/k/v or packed QKV
 * [B, S, (Nq + 2 Nkv) H], past/present K/V in BNSH with the growing-past convention (present =
 * past + the new rows, so the valid length is past + S = total_sequence_length = seqlens_k + 1
 * for every batch entry), optional in-op rotary (do_rotary with cos/sin caches, interleaved or
 * not, partial when the cache is narrower than H / 2), causal attention with grouped heads.
 *
 * Everything then follows from shapes: the new rows are appended with a concatenation, rotary
 * positions are seqlens_k + 1 - S + s, and MLX's sdpa applies the causal mask aligned
 * bottom-right (query s sees keys up to past + s). Whether seqlens_k and total_sequence_length
 * agree with the shapes is checked in the same graph at run time (a padded batch, or the
 * shared-buffer convention where past holds the whole capacity, fails there with a message
 * instead of giving wrong values). Attention is computed in float32 from the cache values as
 * stored (half caches widened); present holds the rotated keys rounded to the cache type, as
 * ORT stores them. The translation is shape-keyed: a decode step traces once per past length.
 *
 * Declined with reasons: local_window_size (sliding windows), softcap, smooth_softmax,
 * causal 0, qk_output, quantized caches (k/v quant types, kv_cache_bit_width, non-float cache),
 * and the inputs position_ids, attention_bias, head_sink, k_scale/v_scale, q/k norm weights.
 */
#include "ops/families.h"
#include "ops/llm.h"

#include <math.h>
#include <string.h>

/* A value's static rank, or -1 when unknown (rank 0 counts as unknown: see norm.c). */
static int rank_of(const ir_value *v) { return v && v->rank > 0 ? v->rank : -1; }

static int to_f32(tr_ctx *t, mx_array *a) {
  if (*a && mx_dtype_of(*a) != MX_FLOAT32) TR_TRY(mx_astype(t->mx, a, *a, MX_FLOAT32));
  return MX_OK;
}

/* --- claim ------------------------------------------------------------------------------- */
static const struct {
  int index;
  const char *name;
} unsupported_inputs[] = {
    {9, "position_ids"}, {10, "attention_bias"}, {11, "head_sink"}, {12, "k_scale"},
    {13, "v_scale"},     {14, "q_norm_weight"},  {15, "k_norm_weight"},
};

static bool claim_attrs(const ir_node *n, op_why why) {
  int64_t nq = ir_attr_int(n, "num_heads", 0), nkv = ir_attr_int(n, "kv_num_heads", 0);
  if (nq <= 0 || nkv <= 0 || nq % nkv)
    return op_decline(why, "GroupQueryAttention needs positive num_heads (%lld) that are a "
                           "multiple of kv_num_heads (%lld)", (long long)nq, (long long)nkv);
  int64_t window = ir_attr_int(n, "local_window_size", -1);
  if (window != -1)
    return op_decline(why, "GroupQueryAttention local_window_size %lld (sliding-window "
                           "attention) is not supported yet", (long long)window);
  if (ir_attr_int(n, "sliding_window_cache", 0))
    return op_decline(why, "GroupQueryAttention sliding_window_cache is not supported yet");
  float softcap = ir_attr_float(n, "softcap", 0.0f);
  if (softcap != 0.0f)
    return op_decline(why, "GroupQueryAttention softcap %g is not supported yet", softcap);
  if (ir_attr_int(n, "smooth_softmax", 0) == 1)
    return op_decline(why, "GroupQueryAttention smooth_softmax is not supported yet");
  int64_t causal = ir_attr_int(n, "causal", 1);
  if (causal != 1)
    return op_decline(why, "GroupQueryAttention causal %lld (bidirectional) is not supported; "
                           "only causal attention", (long long)causal);
  int64_t qk = ir_attr_int(n, "qk_output", 0);
  if (qk)
    return op_decline(why, "GroupQueryAttention qk_output %lld is not supported", (long long)qk);
  const char *kq = ir_attr_string(n, "k_quant_type", "NONE"),
             *vq = ir_attr_string(n, "v_quant_type", "NONE");
  if (strcmp(kq, "NONE") || strcmp(vq, "NONE") || ir_find_attr(n, "kv_cache_bit_width"))
    return op_decline(why, "GroupQueryAttention with a quantized KV cache (k_quant_type %s, "
                           "v_quant_type %s) is not supported", kq, vq);
  return true;
}

static bool claim_gqa(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  if (!claim_attrs(n, why)) return false;
  for (size_t i = 0; i < sizeof unsupported_inputs / sizeof *unsupported_inputs; i++)
    if (ir_has_input(n, unsupported_inputs[i].index))
      return op_decline(why, "GroupQueryAttention input %s is not supported yet",
                        unsupported_inputs[i].name);
  if (n->n_outputs > 3 && ir_output(g, n, 3))
    return op_decline(why, "GroupQueryAttention output_qk is not supported");
  if (ir_has_input(n, 1) != ir_has_input(n, 2))
    return op_decline(why, "GroupQueryAttention needs key and value both, or neither (packed)");
  if (ir_has_input(n, 3) != ir_has_input(n, 4))
    return op_decline(why, "GroupQueryAttention needs past_key and past_value both, or neither");
  if (ir_has_input(n, 7) != ir_has_input(n, 8))
    return op_decline(why, "GroupQueryAttention needs cos_cache and sin_cache both");
  if (ir_attr_int(n, "do_rotary", 0) && !ir_has_input(n, 7))
    return op_decline(why, "GroupQueryAttention do_rotary needs cos_cache and sin_cache");
  const ir_value *q = ir_input(g, n, 0);
  int rank = rank_of(q);
  if (rank > 0 && rank != 3)
    return op_decline(why, "GroupQueryAttention query of rank %d (3 expected)", rank);
  if (rank == 3 && q->dims[0] > 1)
    return op_decline(why, "GroupQueryAttention with batch %lld is not supported yet (batch 1: "
                           "padded batches need per-entry cache offsets)", (long long)q->dims[0]);
  for (int i = 1; i <= 8; i++) {
    const ir_value *v = ir_input(g, n, i);
    if (i == 5 || i == 6 || !v || !q) continue;
    if (v->elem_type != q->elem_type)
      return op_decline(why, "GroupQueryAttention input %d has element type %s, unlike query's "
                             "%s (quantized caches are not supported)", i,
                        ir_elem_name(v->elem_type), ir_elem_name(q->elem_type));
  }
  return true;
}

/* --- translation ------------------------------------------------------------------------- */
/* x [B, S, N*H] as [B, S, N, H]. */
static int heads_of(tr_ctx *t, mx_array x, int heads, int head, mx_array *out) {
  int shape[4] = {mx_dim(x, 0), mx_dim(x, 1), heads, head};
  return mx_reshape(t->mx, out, x, shape, 4);
}

/* Run-time agreement of seqlens_k and total_sequence_length with the growing-past shapes. */
static int all_of(tr_ctx *t, mx_array ok, mx_array *out) {
  int flat = -1, axis = 0;
  TR_TRY(mx_reshape(t->mx, &ok, ok, &flat, 1));
  return mx_reduce(t->mx, out, MX_ALL, ok, &axis, 1, false);
}

static int check_lengths(tr_ctx *t, mx_array seqlens, mx_array total, int valid) {
  mx_array want, ok, ok2;
  TR_TRY(mx_astype(t->mx, &seqlens, seqlens, MX_INT32));
  TR_TRY(mx_scalar_int(t->mx, &want, valid - 1, MX_INT32));
  TR_TRY(mx_binary(t->mx, &ok, MX_EQUAL, seqlens, want));
  TR_TRY(all_of(t, ok, &ok));
  TR_TRY(mx_astype(t->mx, &total, total, MX_INT32));
  TR_TRY(mx_scalar_int(t->mx, &want, valid, MX_INT32));
  TR_TRY(mx_binary(t->mx, &ok2, MX_EQUAL, total, want));
  TR_TRY(all_of(t, ok2, &ok2));
  TR_TRY(mx_binary(t->mx, &ok, MX_LOGICAL_AND, ok, ok2));
  return tr_check_that(t, ok, "seqlens_k + 1 and total_sequence_length must equal past + new "
                              "length (%d): only the growing-past cache of batch 1 is "
                              "supported", valid);
}

/* Rotary on the new q and k ([B, S, N, H] float32) at positions seqlens_k + 1 - S + s. */
static int rotate_new(tr_ctx *t, const ir_node *n, mx_array *q, mx_array *k) {
  mx_array cosc = tr_in(t, 7), sinc = tr_in(t, 8), seq = tr_in(t, 5), pos, r, one, cosv, sinv;
  int s = mx_dim(*q, 1), half = mx_dim(cosc, -1), col[2] = {-1, 1};
  if (mx_ndim(cosc) != 2 || 2 * half > mx_dim(*q, 3))
    return tr_fail(t, "cos_cache must be [max_position, rotary_dim / 2] with rotary_dim <= H");
  TR_TRY(mx_astype(t->mx, &seq, seq, MX_INT64));
  TR_TRY(mx_reshape(t->mx, &seq, seq, col, 2));
  TR_TRY(mx_scalar_int(t->mx, &one, 1 - s, MX_INT64));
  TR_TRY(mx_binary(t->mx, &seq, MX_ADD, seq, one));
  TR_TRY(mx_arange(t->mx, &r, 0, s, 1, MX_INT64));
  TR_TRY(mx_binary(t->mx, &pos, MX_ADD, seq, r));
  TR_TRY(llm_rope_tables(t, cosc, sinc, pos, half, &cosv, &sinv));
  bool inter = ir_attr_int(n, "rotary_interleaved", 0) != 0;
  TR_TRY(llm_rope_apply(t, *q, cosv, sinv, 2 * half, inter, q));
  return llm_rope_apply(t, *k, cosv, sinv, 2 * half, inter, k);
}

static int translate_gqa(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array q = tr_in(t, 0), k = tr_in(t, 1), v = tr_in(t, 2);
  mx_array pk = tr_in(t, 3), pv = tr_in(t, 4), y;
  int nq = (int)ir_attr_int(n, "num_heads", 0), nkv = (int)ir_attr_int(n, "kv_num_heads", 0);
  if (mx_ndim(q) != 3) return tr_fail(t, "GroupQueryAttention query must be 3-D");
  int b = mx_dim(q, 0), s = mx_dim(q, 1), width = mx_dim(q, 2);
  int head = k ? width / nq : width / (nq + 2 * nkv);
  if (head <= 0 || (k ? head * nq : head * (nq + 2 * nkv)) != width)
    return tr_fail(t, "query width %d does not split into the heads", width);
  mx_dtype cache_t = mx_dtype_of(q);
  if (!k) { /* packed: [q | k | v] along the last axis */
    TR_TRY(tr_slice_axis(t, q, 2, nq * head, (nq + nkv) * head, &k));
    TR_TRY(tr_slice_axis(t, q, 2, (nq + nkv) * head, width, &v));
    TR_TRY(tr_slice_axis(t, q, 2, 0, nq * head, &q));
  }
  TR_TRY(heads_of(t, q, nq, head, &q));
  TR_TRY(heads_of(t, k, nkv, head, &k));
  TR_TRY(heads_of(t, v, nkv, head, &v));
  if (ir_attr_int(n, "do_rotary", 0)) {
    TR_TRY(to_f32(t, &q));
    TR_TRY(to_f32(t, &k));
    TR_TRY(rotate_new(t, n, &q, &k));
    TR_TRY(mx_astype(t->mx, &k, k, cache_t)); /* stored as ORT stores it */
  }
  static const int perm[4] = {0, 2, 1, 3};
  TR_TRY(mx_transpose(t->mx, &q, q, perm, 4));
  TR_TRY(mx_transpose(t->mx, &k, k, perm, 4));
  TR_TRY(mx_transpose(t->mx, &v, v, perm, 4));
  int past = 0;
  if (pk) {
    if (mx_ndim(pk) != 4 || mx_dim(pk, 1) != nkv || mx_dim(pk, 3) != head ||
        mx_ndim(pv) != 4 || mx_dim(pv, 2) != mx_dim(pk, 2))
      return tr_fail(t, "past_key/past_value must be [B, kv_num_heads, past, H]");
    past = mx_dim(pk, 2);
    mx_array kk[2] = {pk, k}, vv[2] = {pv, v};
    if (past > 0) {
      TR_TRY(mx_concatenate(t->mx, &k, kk, 2, 2));
      TR_TRY(mx_concatenate(t->mx, &v, vv, 2, 2));
    }
  }
  TR_TRY(check_lengths(t, tr_in(t, 5), tr_in(t, 6), past + s));
  TR_TRY(tr_out_cast(t, 1, k));
  TR_TRY(tr_out_cast(t, 2, v));
  double scale = ir_attr_float(n, "scale", 0.0f);
  if (scale == 0.0) scale = 1.0 / sqrt((double)head);
  TR_TRY(to_f32(t, &q));
  TR_TRY(to_f32(t, &k));
  TR_TRY(to_f32(t, &v));
  TR_TRY(mx_sdpa(t->mx, &y, q, k, v, (float)scale, s > 1, NULL));
  TR_TRY(mx_transpose(t->mx, &y, y, perm, 4));
  int shape[3] = {b, s, nq * head};
  TR_TRY(mx_reshape(t->mx, &y, y, shape, 3));
  tr_note_path(t, "growing past, MLX sdpa");
  return tr_out_cast(t, 0, y);
}

const op_row ops_llm_attention_rows[] = {
    {"com.microsoft", "GroupQueryAttention", 1, 1, claim_gqa, translate_gqa, OP_SHAPE_KEYED,
     OP_T(IR_FLOAT) | OP_T(IR_FLOAT16), 0,
     "batch 1, growing past (BNSH), separate or packed QKV, in-op rotary; causal MLX sdpa in "
     "float32; sliding window, softcap, smooth_softmax, quantized caches and inputs 9-15 "
     "declined; shape-keyed (a decode step traces once per past length)",
     NULL, NULL, 0},
    OP_ROWS_END,
};
