/*
 * GroupQueryAttention (com.microsoft) as ORT's CPU kernel computes it: separate q/k/v or packed
 * QKV [B, S, (Nq + 2 Nkv) H], past/present K/V in BNSH, seqlens_k (per batch entry its total
 * length - 1) and total_sequence_length, optional in-op rotary (do_rotary with cos/sin caches,
 * interleaved or not, partial when the cache is narrower than H / 2), causal attention over
 * grouped heads.
 *
 * Present holds P = max(total_sequence_length, past length) rows, so both cache conventions
 * are one computation: a growing past (present = past + the new rows) and the shared buffer
 * onnxruntime-genai uses (past and present of the same capacity). Per batch entry b the past
 * rows in use are past_b = seqlens_k[b] + 1 - S (none on the first prompt, S ==
 * total_sequence_length): present takes past's rows [0, past_b), the new rows at
 * [past_b, past_b + S) (gathered by index, since past_b is data) and zeros after, as ORT's
 * kernel writes a present of its own; query s attends to keys j <= past_b + s through an
 * additive mask given to MLX's sdpa. Rotary positions are past_b + s. A seqlens_k out of range
 * for the given past and present sizes fails the run with a message (checked in the graph).
 * Attention is computed in float32 from the cache values as stored (half caches widened);
 * present holds the rotated keys rounded to the cache type, as ORT stores them.
 * total_sequence_length fixes P, so it keys the traced variants (read on the host before each
 * call), by class (key_class_gqa): with the shared buffer every decode step reuses one variant;
 * with a growing past each step traces once (its shapes grow). The cache is copied into present
 * every step. total_sequence_length < S is refused when the variant is traced, not when a later
 * call of its class reuses it (nothing but P is read from it).
 *
 * The score forms exported decoders use, as ORT 1.31.1's CPU kernel computes them: scores are
 * scale * q.k; softcap c > 0 turns them into c * tanh(score / c) (Gemma 2); attention_bias
 * [B|1, N|1, S, T] is added after it (columns indexed by absolute key position); a
 * local_window_size W >= 1 keeps, for query s, only the W keys up to its last one (keys
 * (last - W, last]: Mistral, Gemma 2/3, Qwen sliding layers; the padding rows of a right-padded
 * prompt see the window over their entry's valid keys, where ORT's kernel reads score columns
 * it never wrote); smooth_softmax and head_sink
 * (GPT-OSS) add one logit to each softmax's denominator (0, or the head's sink value: head_sink
 * alone turns it on, as in ORT). position_ids [B, S] replaces the rotary positions (on a first
 * prompt, S == total_sequence_length, ORT reads only position_ids[0, 0] and every entry counts
 * up from it). The plain forms (window, bias) run in MLX's sdpa with an additive mask; softcap
 * and sinks in a composed float32 softmax over grouped heads (MLX's sdpa has no softcap, and
 * the bridge's sdpa no sinks).
 *
 * With sliding_window_cache the past and present are window-sized (capacity C >= W rows) and
 * the op evicts inside: see the section on it below. Present then always has C rows, so every
 * call shares one compiled variant.
 *
 * q_norm_weight and k_norm_weight (inputs 14, 15; ORT's CUDA graph fusion folds Qwen3's
 * Reshape, SimplifiedLayerNormalization, Reshape into them) apply a per-head RMS norm to the new
 * q and k before the rotary. ORT's CPU kernel has none: the tests' reference is the unfused
 * graph.
 *
 * Declined with reasons: causal 0, qk_output, quantized caches (k/v quant types,
 * kv_cache_bit_width, non-float cache) and the inputs k_scale/v_scale.
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
    {12, "k_scale"},
    {13, "v_scale"},
};

static bool claim_attrs(const ir_node *n, op_why why) {
  int64_t nq = ir_attr_int(n, "num_heads", 0), nkv = ir_attr_int(n, "kv_num_heads", 0);
  if (nq <= 0 || nkv <= 0 || nq % nkv)
    return op_decline(why, "GroupQueryAttention needs positive num_heads (%lld) that are a "
                           "multiple of kv_num_heads (%lld)", (long long)nq, (long long)nkv);
  int64_t window = ir_attr_int(n, "local_window_size", -1);
  if (window != -1 && window < 1)
    return op_decline(why, "GroupQueryAttention local_window_size %lld (-1, or a window of at "
                           "least one key)", (long long)window);
  if (ir_attr_int(n, "sliding_window_cache", 0) && window < 1)
    return op_decline(why, "GroupQueryAttention sliding_window_cache needs local_window_size > 0");
  float softcap = ir_attr_float(n, "softcap", 0.0f);
  if (softcap < 0.0f)
    return op_decline(why, "GroupQueryAttention softcap %g (must be >= 0)", softcap);
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
  if (ir_has_input(n, 14) != ir_has_input(n, 15))
    return op_decline(why, "GroupQueryAttention needs q_norm_weight and k_norm_weight both");
  if (ir_has_input(n, 7) != ir_has_input(n, 8))
    return op_decline(why, "GroupQueryAttention needs cos_cache and sin_cache both");
  if (ir_attr_int(n, "sliding_window_cache", 0) && !ir_has_input(n, 3))
    return op_decline(why, "GroupQueryAttention sliding_window_cache needs past_key and "
                           "past_value (their rows are the cache's capacity)");
  if (ir_attr_int(n, "do_rotary", 0) && !ir_has_input(n, 7))
    return op_decline(why, "GroupQueryAttention do_rotary needs cos_cache and sin_cache");
  const ir_value *q = ir_input(g, n, 0);
  int rank = rank_of(q);
  if (rank > 0 && rank != 3)
    return op_decline(why, "GroupQueryAttention query of rank %d (3 expected)", rank);
  int brank = rank_of(ir_input(g, n, 10));
  if (brank > 0 && brank != 4)
    return op_decline(why, "GroupQueryAttention attention_bias of rank %d (4 expected)", brank);
  int prank = rank_of(ir_input(g, n, 9));
  if (prank > 0 && prank != 2)
    return op_decline(why, "GroupQueryAttention position_ids of rank %d (2 expected)", prank);
  for (int i = 1; i <= 15; i++) {
    const ir_value *v = ir_input(g, n, i);
    if (i == 5 || i == 6 || i == 9 || i == 12 || i == 13 || !v || !q) continue;
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

static int all_of(tr_ctx *t, mx_array ok, mx_array *out) {
  int flat = -1, axis = 0;
  TR_TRY(mx_reshape(t->mx, &ok, ok, &flat, 1));
  return mx_reduce(t->mx, out, MX_ALL, ok, &axis, 1, false);
}

/* What a run's lengths fix: S new rows, present rows P = max(total, past) (ORT's rule), and per
 * batch entry the past rows in use, past_b = seqlens_k + 1 - S, as int32 [B, 1, 1, 1]. ORT
 * reads no past on a first prompt (S == total); there every entry's seqlens_k + 1 <= S, so
 * past_b = max(seqlens_k + 1 - S, 0) is the same without asking whether the call is one: the
 * translation reads total_sequence_length only for P (see key_class_gqa). */
typedef struct gqa_lengths {
  int s, past, present;
  mx_array past_b, last; /* last: seqlens_k as int32 [B, 1, 1, 1], the last key in use */
  /* the keys attention reads, [B or 1, 1, 1, keys]: their absolute positions, and which are
   * in use (NULL: all); the present rows unless the cache is windowed */
  mx_array key_pos, key_used;
} gqa_lengths;

/* seqlens_k as int32 [B, 1, 1, 1] (also L->last), and past_b = max(seqlens_k + 1 - S, 0); `zero`
 * is the int32 0 it was clamped with, for the caller's further bounds. */
static int past_begin(tr_ctx *t, int s, gqa_lengths *L, mx_array *seq, mx_array *zero) {
  int shape[4] = {-1, 1, 1, 1};
  mx_array off;
  TR_TRY(mx_astype(t->mx, seq, tr_in(t, 5), MX_INT32));
  TR_TRY(mx_reshape(t->mx, seq, *seq, shape, 4));
  L->last = *seq;
  TR_TRY(mx_scalar_int(t->mx, &off, 1 - s, MX_INT32));
  TR_TRY(mx_binary(t->mx, &L->past_b, MX_ADD, *seq, off));
  TR_TRY(mx_scalar_int(t->mx, zero, 0, MX_INT32));
  return mx_binary(t->mx, &L->past_b, MX_MAXIMUM, L->past_b, *zero);
}

static int lengths(tr_ctx *t, int s, int past, gqa_lengths *L) {
  int64_t total = 0;
  size_t count = 0;
  TR_TRY(tr_host_ints(t, 6, &total, 1, &count));
  if (count != 1 || total < s)
    return tr_fail(t, "total_sequence_length must be one value >= the new length %d", s);
  L->s = s, L->past = past;
  L->present = total > past ? (int)total : past;
  mx_array seq, off, zero, lo, hi, ok;
  int col[4] = {1, 1, 1, L->present};
  TR_TRY(mx_arange(t->mx, &L->key_pos, 0, L->present, 1, MX_INT32));
  TR_TRY(mx_reshape(t->mx, &L->key_pos, L->key_pos, col, 4));
  L->key_used = NULL;
  TR_TRY(past_begin(t, s, L, &seq, &zero));
  /* the rows read from past must exist, and the new ones must fit in present */
  int top = past < L->present - s ? past : L->present - s;
  TR_TRY(mx_binary(t->mx, &lo, MX_GREATER_EQUAL, L->past_b, zero));
  TR_TRY(mx_scalar_int(t->mx, &off, top, MX_INT32));
  TR_TRY(mx_binary(t->mx, &hi, MX_LESS_EQUAL, L->past_b, off));
  TR_TRY(mx_binary(t->mx, &ok, MX_LOGICAL_AND, lo, hi));
  TR_TRY(all_of(t, ok, &ok));
  return tr_check_that(t, ok, "seqlens_k + 1 - %d must lie in [0, %d]: the past rows in use "
                              "must be given, with room for the new ones in %d present rows",
                       s, top, L->present);
}

/* --- sliding_window_cache: a window-sized cache the op evicts from --------------------------
 * The past holds C rows (its capacity, C >= W). After T tokens an entry's rows [0, L(T)) hold
 * its L(T) most recent positions in order (row i: position T - L(T) + i), where L(T) = T up to
 * C and then T - G * ceil((T - C) / G), G = C - W + 1: eviction reclaims G rows at once, so the
 * layout depends on T alone. A step reads the past's resident rows and the new ones as one key
 * sequence of C + S rows (past rows, then new), each with its absolute position, and writes
 * present as the last L(T) of them; rows past L(T) are unspecified by the operator (zeros
 * here). Attention masks by absolute position, as with a full cache. */
static int resident_rows(tr_ctx *t, mx_array tokens, int cap, int window, mx_array *out) {
  mx_array c, g, over, steps, fits;
  int gap = cap - window + 1;
  TR_TRY(mx_scalar_int(t->mx, &c, cap, MX_INT32));
  TR_TRY(mx_scalar_int(t->mx, &g, gap, MX_INT32));
  TR_TRY(mx_binary(t->mx, &over, MX_SUBTRACT, tokens, c));
  TR_TRY(mx_scalar_int(t->mx, &c, gap - 1, MX_INT32));
  TR_TRY(mx_binary(t->mx, &steps, MX_ADD, over, c));
  TR_TRY(mx_binary(t->mx, &steps, MX_FLOOR_DIVIDE, steps, g)); /* ceil((T - C) / G) */
  TR_TRY(mx_binary(t->mx, &steps, MX_MULTIPLY, steps, g));
  TR_TRY(mx_binary(t->mx, &steps, MX_SUBTRACT, tokens, steps));
  TR_TRY(mx_scalar_int(t->mx, &c, 0, MX_INT32));
  TR_TRY(mx_binary(t->mx, &fits, MX_LESS_EQUAL, over, c));
  return mx_where(t->mx, out, fits, tokens, steps);
}

/* The lengths of a windowed step: past_b = the entry's tokens before it (none on a first
 * prompt), `resident` = L(past_b) past rows in use, `kept` = L(seqlens_k + 1) present rows; the
 * keys are the C past rows then the S new ones, at absolute positions past_b - resident + i and
 * past_b + s, the past's rows from `resident` on unused. */
static int windowed_lengths(tr_ctx *t, int s, int cap, int window, gqa_lengths *L,
                            mx_array *resident, mx_array *kept) {
  if (cap < window)
    return tr_fail(t, "sliding_window_cache needs a capacity (past rows, %d) of at least "
                      "local_window_size (%d)", cap, window);
  L->s = s, L->past = cap, L->present = cap;
  mx_array seq, off, zero, i, start, pos_past, pos_new, in_past, used;
  int col[4] = {1, 1, 1, cap + s};
  TR_TRY(past_begin(t, s, L, &seq, &zero));
  TR_TRY(resident_rows(t, L->past_b, cap, window, resident));
  TR_TRY(mx_scalar_int(t->mx, &off, 1, MX_INT32));
  TR_TRY(mx_binary(t->mx, &off, MX_ADD, seq, off));
  TR_TRY(resident_rows(t, off, cap, window, kept));
  TR_TRY(mx_arange(t->mx, &i, 0, cap + s, 1, MX_INT32));
  TR_TRY(mx_reshape(t->mx, &i, i, col, 4));
  TR_TRY(mx_binary(t->mx, &start, MX_SUBTRACT, L->past_b, *resident));
  TR_TRY(mx_binary(t->mx, &pos_past, MX_ADD, start, i));
  TR_TRY(mx_scalar_int(t->mx, &off, cap, MX_INT32));
  TR_TRY(mx_binary(t->mx, &pos_new, MX_SUBTRACT, i, off));
  TR_TRY(mx_binary(t->mx, &pos_new, MX_ADD, pos_new, L->past_b));
  TR_TRY(mx_binary(t->mx, &in_past, MX_LESS, i, off));
  TR_TRY(mx_where(t->mx, &L->key_pos, in_past, pos_past, pos_new));
  TR_TRY(mx_binary(t->mx, &used, MX_LESS, i, *resident));
  TR_TRY(mx_binary(t->mx, &in_past, MX_GREATER_EQUAL, i, off));
  return mx_binary(t->mx, &L->key_used, MX_LOGICAL_OR, used, in_past);
}

/* The keys (or values) of a windowed step, past then new rows [B, Nkv, C + S, H], and the
 * present: row j is the key of position T - kept + j (T = seqlens_k + 1), for j < kept. */
static int windowed_cache(tr_ctx *t, const gqa_lengths *L, mx_array resident, mx_array kept,
                          mx_array past, mx_array fresh, mx_array *keys, mx_array *present) {
  int b = mx_dim(fresh, 0), nkv = mx_dim(fresh, 1), h = mx_dim(fresh, 3), cap = L->past;
  int col[4] = {1, 1, cap, 1}, full[4] = {b, nkv, cap, h};
  mx_array both[2] = {past, fresh}, j, pos, from_past, src, one, c, top, zero, idx, got, keep;
  TR_TRY(mx_concatenate(t->mx, keys, both, 2, 2));
  TR_TRY(mx_arange(t->mx, &j, 0, cap, 1, MX_INT32));
  TR_TRY(mx_reshape(t->mx, &j, j, col, 4));
  TR_TRY(mx_scalar_int(t->mx, &one, 1, MX_INT32));
  TR_TRY(mx_binary(t->mx, &pos, MX_ADD, L->last, one));
  TR_TRY(mx_binary(t->mx, &pos, MX_SUBTRACT, pos, kept));
  TR_TRY(mx_binary(t->mx, &pos, MX_ADD, pos, j)); /* [B, 1, C, 1] absolute positions */
  TR_TRY(mx_binary(t->mx, &from_past, MX_LESS, pos, L->past_b));
  TR_TRY(mx_binary(t->mx, &src, MX_SUBTRACT, pos, L->past_b)); /* new row index */
  TR_TRY(mx_scalar_int(t->mx, &c, cap, MX_INT32));
  TR_TRY(mx_binary(t->mx, &src, MX_ADD, src, c));
  TR_TRY(mx_binary(t->mx, &idx, MX_ADD, pos, resident)); /* past row: pos - (past_b - res) */
  TR_TRY(mx_binary(t->mx, &idx, MX_SUBTRACT, idx, L->past_b));
  TR_TRY(mx_where(t->mx, &idx, from_past, idx, src));
  TR_TRY(mx_scalar_int(t->mx, &zero, 0, MX_INT32));
  TR_TRY(mx_scalar_int(t->mx, &top, cap + L->s - 1, MX_INT32));
  TR_TRY(mx_clip(t->mx, &idx, idx, zero, top));
  TR_TRY(mx_broadcast_to(t->mx, &idx, idx, full, 4));
  TR_TRY(mx_take_along_axis(t->mx, &got, *keys, idx, 2));
  TR_TRY(mx_binary(t->mx, &keep, MX_LESS, j, kept));
  TR_TRY(mx_scalar(t->mx, &zero, 0.0, mx_dtype_of(fresh)));
  return mx_where(t->mx, present, keep, got, zero);
}

/* The key's class (op_row.key_class): the translation depends on total_sequence_length only
 * through P = max(total, past), so every total up to the past's rows (the shared buffer of
 * onnxruntime-genai, whose decode steps keep the shapes) shares one compiled variant; a growing
 * past keys on the total (its shapes change every step anyway). Unknown past rows: no class. */
static bool key_class_gqa(const ir_node *n, int input, int64_t total, const int *const *dims,
                          const int *ranks, int64_t *klass) {
  int past = 0;
  if (input != 6) return false;
  if (ir_attr_int(n, "sliding_window_cache", 0)) { /* present holds the past's rows: P fixed */
    *klass = -1;
    return true;
  }
  if (n->inputs[3] != IR_NONE) {
    if (ranks[3] != 4) return false;
    past = dims[3][2];
  }
  *klass = total > past ? total : -1;
  return true;
}

/* The present cache [B, Nkv, P, H]: per entry past rows [0, past_b), the new rows at
 * [past_b, past_b + S) and zeros after (as ORT's kernel writes a present of its own). */
static int present_of(tr_ctx *t, const gqa_lengths *L, mx_array past, mx_array fresh,
                      mx_array *out) {
  int b = mx_dim(fresh, 0), nkv = mx_dim(fresh, 1), h = mx_dim(fresh, 3), p = L->present;
  mx_array j, rel, idx, in_new, keep, zero, smax, base, got;
  int col[4] = {1, 1, p, 1}, full[4] = {b, nkv, p, h};
  TR_TRY(mx_arange(t->mx, &j, 0, p, 1, MX_INT32));
  TR_TRY(mx_reshape(t->mx, &j, j, col, 4));
  TR_TRY(mx_binary(t->mx, &rel, MX_SUBTRACT, j, L->past_b)); /* [B, 1, P, 1] */
  TR_TRY(mx_scalar_int(t->mx, &zero, 0, MX_INT32));
  TR_TRY(mx_scalar_int(t->mx, &smax, L->s - 1, MX_INT32));
  TR_TRY(mx_clip(t->mx, &idx, rel, zero, smax));
  TR_TRY(mx_broadcast_to(t->mx, &idx, idx, full, 4));
  TR_TRY(mx_take_along_axis(t->mx, &got, fresh, idx, 2));
  TR_TRY(mx_binary(t->mx, &in_new, MX_GREATER_EQUAL, rel, zero));
  TR_TRY(mx_binary(t->mx, &keep, MX_LESS_EQUAL, rel, smax));
  TR_TRY(mx_binary(t->mx, &in_new, MX_LOGICAL_AND, in_new, keep));
  TR_TRY(mx_scalar(t->mx, &base, 0.0, mx_dtype_of(fresh)));
  if (past && L->past > 0) {
    mx_array padded = past;
    if (L->past < p) {
      int lo[4] = {0, 0, 0, 0}, hi[4] = {0, 0, p - L->past, 0};
      TR_TRY(mx_pad(t->mx, &padded, past, lo, hi, 4, base));
    }
    TR_TRY(mx_binary(t->mx, &keep, MX_LESS, j, L->past_b));
    TR_TRY(mx_where(t->mx, &base, keep, padded, base));
  }
  return mx_where(t->mx, out, in_new, got, base);
}

/* Which keys each query sees, [B, 1, S, P]: query s sees keys j <= lim = min(past_b + s,
 * seqlens_k) (the padding rows of a right-padded prompt see only its valid keys, as in ORT's
 * kernel; elsewhere past_b + s never exceeds it), and with a window W only j > lim - W. */
static int visible_keys(tr_ctx *t, const gqa_lengths *L, int window, mx_array *out) {
  mx_array j = L->key_pos, s, lim, ok, lo, far;
  int row[4] = {1, 1, L->s, 1};
  TR_TRY(mx_arange(t->mx, &s, 0, L->s, 1, MX_INT32));
  TR_TRY(mx_reshape(t->mx, &s, s, row, 4));
  TR_TRY(mx_binary(t->mx, &lim, MX_ADD, L->past_b, s));
  TR_TRY(mx_binary(t->mx, &lim, MX_MINIMUM, lim, L->last));
  TR_TRY(mx_binary(t->mx, &ok, MX_LESS_EQUAL, j, lim));
  if (window > 0) {
    TR_TRY(mx_scalar_int(t->mx, &far, window, MX_INT32));
    TR_TRY(mx_binary(t->mx, &lo, MX_SUBTRACT, lim, far));
    TR_TRY(mx_binary(t->mx, &lo, MX_GREATER, j, lo));
    TR_TRY(mx_binary(t->mx, &ok, MX_LOGICAL_AND, ok, lo));
  }
  if (L->key_used) TR_TRY(mx_binary(t->mx, &ok, MX_LOGICAL_AND, ok, L->key_used));
  *out = ok;
  return MX_OK;
}

/* attention_bias [B|1, N|1, S, T] in float32 with P columns: its columns are absolute key
 * positions, so it is cut or zero-padded to the present rows (columns past an entry's last key
 * are masked anyway). */
static int bias_columns(tr_ctx *t, const gqa_lengths *L, mx_array bias, mx_array *out) {
  if (mx_ndim(bias) != 4 || mx_dim(bias, 2) != L->s)
    return tr_fail(t, "attention_bias must be [B or 1, num_heads or 1, %d, total]", L->s);
  int w = mx_dim(bias, 3);
  TR_TRY(to_f32(t, &bias));
  if (L->key_used) { /* a windowed cache: each key's column is its absolute position */
    mx_array idx, zero, top;
    int b = mx_dim(L->past_b, 0), keys = mx_dim(L->key_pos, 3);
    int wide[4] = {b, mx_dim(bias, 1), L->s, w}, picked[4] = {b, mx_dim(bias, 1), L->s, keys};
    TR_TRY(mx_scalar_int(t->mx, &zero, 0, MX_INT32));
    TR_TRY(mx_scalar_int(t->mx, &top, w - 1, MX_INT32));
    TR_TRY(mx_clip(t->mx, &idx, L->key_pos, zero, top));
    TR_TRY(mx_broadcast_to(t->mx, &idx, idx, picked, 4));
    TR_TRY(mx_broadcast_to(t->mx, &bias, bias, wide, 4));
    return mx_take_along_axis(t->mx, out, bias, idx, 3);
  }
  if (w > L->present) TR_TRY(tr_slice_axis(t, bias, 3, 0, L->present, &bias));
  else if (w < L->present) {
    mx_array zero;
    int lo[4] = {0, 0, 0, 0}, hi[4] = {0, 0, 0, L->present - w};
    TR_TRY(mx_scalar(t->mx, &zero, 0.0, MX_FLOAT32));
    TR_TRY(mx_pad(t->mx, &bias, bias, lo, hi, 4, zero));
  }
  *out = bias;
  return MX_OK;
}

/* The additive mask: the bias (or 0) where a key is visible, -inf elsewhere. */
static int additive_mask(tr_ctx *t, mx_array ok, mx_array bias, mx_array *out) {
  mx_array zero, ninf;
  TR_TRY(mx_scalar(t->mx, &ninf, -INFINITY, MX_FLOAT32));
  if (!bias) TR_TRY(mx_scalar(t->mx, &zero, 0.0, MX_FLOAT32));
  return mx_where(t->mx, out, ok, bias ? bias : zero, ninf);
}

/* Rotary positions [B, S]: past_b + s, or position_ids. On a first prompt (S ==
 * total_sequence_length) ORT reads only position_ids[0, 0] and every entry counts up from it;
 * whether the call is one is decided in the graph (a variant serves a class of totals). */
static int rotary_positions(tr_ctx *t, const gqa_lengths *L, mx_array *out) {
  mx_array pos = tr_in(t, 9), r, first, total, len, prompt;
  int col[2] = {-1, 1}, b = mx_dim(L->past_b, 0);
  TR_TRY(mx_arange(t->mx, &r, 0, L->s, 1, MX_INT64));
  if (!pos) {
    TR_TRY(mx_astype(t->mx, &pos, L->past_b, MX_INT64));
    TR_TRY(mx_reshape(t->mx, &pos, pos, col, 2));
    return mx_binary(t->mx, out, MX_ADD, pos, r);
  }
  if (mx_ndim(pos) != 2 || mx_dim(pos, 1) != L->s || (mx_dim(pos, 0) != b && mx_dim(pos, 0) != 1))
    return tr_fail(t, "position_ids must be [batch, %d]", L->s);
  TR_TRY(mx_astype(t->mx, &pos, pos, MX_INT64));
  TR_TRY(tr_slice_axis(t, pos, 0, 0, 1, &first));
  TR_TRY(tr_slice_axis(t, first, 1, 0, 1, &first));
  TR_TRY(mx_binary(t->mx, &first, MX_ADD, first, r));
  TR_TRY(mx_astype(t->mx, &total, tr_in(t, 6), MX_INT64));
  TR_TRY(mx_scalar_int(t->mx, &len, L->s, MX_INT64));
  TR_TRY(mx_binary(t->mx, &prompt, MX_EQUAL, total, len));
  return mx_where(t->mx, out, prompt, first, pos);
}

/* Qwen3's per-head RMS norm of q or k ([B, S, N, H]) by weight [H], before the rotary: in
 * float32, rounded to the input's type as the SimplifiedLayerNormalization nodes exporters
 * otherwise write would round it. */
static int head_norm(tr_ctx *t, mx_array weight, float eps, int head, mx_array *x) {
  if ((int)mx_size(weight) != head)
    return tr_fail(t, "q_norm_weight and k_norm_weight must hold head_size (%d) values", head);
  mx_dtype type = mx_dtype_of(*x);
  mx_array y = *x;
  int flat = head;
  TR_TRY(mx_reshape(t->mx, &weight, weight, &flat, 1));
  TR_TRY(to_f32(t, &y));
  TR_TRY(to_f32(t, &weight));
  TR_TRY(mx_rms_norm(t->mx, &y, y, weight, eps));
  return mx_astype(t->mx, x, y, type);
}

/* Rotary on the new q and k ([B, S, N, H] float32). */
static int rotate_new(tr_ctx *t, const ir_node *n, const gqa_lengths *L, mx_array *q,
                      mx_array *k) {
  mx_array cosc = tr_in(t, 7), sinc = tr_in(t, 8), pos, cosv, sinv;
  int half = mx_dim(cosc, -1);
  if (mx_ndim(cosc) != 2 || 2 * half > mx_dim(*q, 3))
    return tr_fail(t, "cos_cache must be [max_position, rotary_dim / 2] with rotary_dim <= H");
  TR_TRY(rotary_positions(t, L, &pos));
  TR_TRY(llm_rope_tables(t, cosc, sinc, pos, half, &cosv, &sinv));
  bool inter = ir_attr_int(n, "rotary_interleaved", 0) != 0;
  TR_TRY(llm_rope_apply(t, *q, cosv, sinv, 2 * half, inter, q));
  return llm_rope_apply(t, *k, cosv, sinv, 2 * half, inter, k);
}

/* Attention with softcap or a sink logit, composed (MLX's sdpa has neither): q [B, Nq, S, H],
 * k and v [B, Nkv, P, H], all float32; query head n reads KV head n / (Nq / Nkv), so q is viewed
 * as [B, Nkv, G * S, H] for the products. mask: the additive mask, broadcasting to
 * [B, Nq, S, P]. Returns [B, Nq, S, H]. */
static int composed_attention(tr_ctx *t, const ir_node *n, mx_array q, mx_array k, mx_array v,
                              float scale, mx_array mask, mx_array *out) {
  int b = mx_dim(q, 0), nq = mx_dim(q, 1), s = mx_dim(q, 2), h = mx_dim(q, 3);
  int nkv = mx_dim(k, 1), p = mx_dim(k, 2);
  int grouped[4] = {b, nkv, nq / nkv * s, h}, scores_shape[4] = {b, nq, s, p};
  static const int swap[4] = {0, 1, 3, 2}, last[1] = {3};
  mx_array kt, x, c, sink = tr_in(t, 11);
  TR_TRY(mx_reshape(t->mx, &q, q, grouped, 4));
  TR_TRY(mx_transpose(t->mx, &kt, k, swap, 4));
  TR_TRY(mx_matmul(t->mx, &x, q, kt));
  TR_TRY(mx_reshape(t->mx, &x, x, scores_shape, 4));
  TR_TRY(mx_scalar(t->mx, &c, scale, MX_FLOAT32));
  TR_TRY(mx_binary(t->mx, &x, MX_MULTIPLY, x, c));
  float softcap = ir_attr_float(n, "softcap", 0.0f);
  if (softcap > 0.0f) { /* before the mask: a masked key must stay -inf */
    TR_TRY(mx_scalar(t->mx, &c, 1.0 / softcap, MX_FLOAT32));
    TR_TRY(mx_binary(t->mx, &x, MX_MULTIPLY, x, c));
    TR_TRY(mx_unary(t->mx, &x, MX_TANH, x));
    TR_TRY(mx_scalar(t->mx, &c, softcap, MX_FLOAT32));
    TR_TRY(mx_binary(t->mx, &x, MX_MULTIPLY, x, c));
  }
  TR_TRY(mx_binary(t->mx, &x, MX_ADD, x, mask));
  bool sinked = sink || ir_attr_int(n, "smooth_softmax", 0) == 1;
  if (sinked) { /* one more logit per row (0, or the head's sink), dropped after the softmax */
    int col[4] = {1, nq, 1, 1}, wide[4] = {b, nq, s, 1};
    if (sink) {
      if (mx_size(sink) != (size_t)nq)
        return tr_fail(t, "head_sink must hold num_heads (%d) values", nq);
      TR_TRY(to_f32(t, &sink));
      TR_TRY(mx_reshape(t->mx, &sink, sink, col, 4));
    } else {
      TR_TRY(mx_scalar(t->mx, &sink, 0.0, MX_FLOAT32));
    }
    TR_TRY(mx_broadcast_to(t->mx, &sink, sink, wide, 4));
    mx_array both[2] = {x, sink};
    TR_TRY(mx_concatenate(t->mx, &x, both, 2, 3));
  }
  TR_TRY(mx_softmax(t->mx, &x, x, last, 1));
  if (sinked) TR_TRY(tr_slice_axis(t, x, 3, 0, p, &x));
  int probs[4] = {b, nkv, nq / nkv * s, p}, result[4] = {b, nq, s, h};
  TR_TRY(mx_reshape(t->mx, &x, x, probs, 4));
  TR_TRY(mx_matmul(t->mx, &x, x, v));
  return mx_reshape(t->mx, out, x, result, 4);
}

static int translate_gqa(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array q = tr_in(t, 0), k = tr_in(t, 1), v = tr_in(t, 2);
  mx_array pk = tr_in(t, 3), pv = tr_in(t, 4), y, ok, bias = NULL, mask;
  int nq = (int)ir_attr_int(n, "num_heads", 0), nkv = (int)ir_attr_int(n, "kv_num_heads", 0);
  if (mx_ndim(q) != 3) return tr_fail(t, "GroupQueryAttention query must be 3-D");
  int b = mx_dim(q, 0), s = mx_dim(q, 1), width = mx_dim(q, 2);
  int head = k ? width / nq : width / (nq + 2 * nkv);
  if (head <= 0 || (k ? head * nq : head * (nq + 2 * nkv)) != width)
    return tr_fail(t, "query width %d does not split into the heads", width);
  int past = 0;
  if (pk) {
    if (mx_ndim(pk) != 4 || mx_dim(pk, 0) != b || mx_dim(pk, 1) != nkv ||
        mx_dim(pk, 3) != head || mx_ndim(pv) != 4 || mx_dim(pv, 2) != mx_dim(pk, 2))
      return tr_fail(t, "past_key/past_value must be [B, kv_num_heads, past, H]");
    past = mx_dim(pk, 2);
  }
  gqa_lengths L;
  int window = (int)ir_attr_int(n, "local_window_size", -1);
  bool windowed = ir_attr_int(n, "sliding_window_cache", 0) != 0;
  mx_array resident = NULL, kept = NULL;
  if (windowed) TR_TRY(windowed_lengths(t, s, past, window, &L, &resident, &kept));
  else TR_TRY(lengths(t, s, past, &L));
  mx_dtype cache_t = mx_dtype_of(q);
  if (!k) { /* packed: [q | k | v] along the last axis */
    TR_TRY(tr_slice_axis(t, q, 2, nq * head, (nq + nkv) * head, &k));
    TR_TRY(tr_slice_axis(t, q, 2, (nq + nkv) * head, width, &v));
    TR_TRY(tr_slice_axis(t, q, 2, 0, nq * head, &q));
  }
  TR_TRY(heads_of(t, q, nq, head, &q));
  TR_TRY(heads_of(t, k, nkv, head, &k));
  TR_TRY(heads_of(t, v, nkv, head, &v));
  if (tr_in(t, 14)) {
    float eps = ir_attr_float(n, "qk_norm_epsilon", 1e-6f);
    TR_TRY(head_norm(t, tr_in(t, 14), eps, head, &q));
    TR_TRY(head_norm(t, tr_in(t, 15), eps, head, &k));
  }
  if (ir_attr_int(n, "do_rotary", 0)) {
    TR_TRY(to_f32(t, &q));
    TR_TRY(to_f32(t, &k));
    TR_TRY(rotate_new(t, n, &L, &q, &k));
    TR_TRY(mx_astype(t->mx, &k, k, cache_t)); /* stored as ORT stores it */
  }
  static const int perm[4] = {0, 2, 1, 3};
  TR_TRY(mx_transpose(t->mx, &q, q, perm, 4));
  TR_TRY(mx_transpose(t->mx, &k, k, perm, 4));
  TR_TRY(mx_transpose(t->mx, &v, v, perm, 4));
  if (windowed) { /* attention reads past and new rows; present keeps the last of them */
    mx_array present_k, present_v;
    TR_TRY(windowed_cache(t, &L, resident, kept, pk, k, &k, &present_k));
    TR_TRY(windowed_cache(t, &L, resident, kept, pv, v, &v, &present_v));
    TR_TRY(tr_out_cast(t, 1, present_k));
    TR_TRY(tr_out_cast(t, 2, present_v));
  } else {
    TR_TRY(present_of(t, &L, pk, k, &k));
    TR_TRY(present_of(t, &L, pv, v, &v));
    TR_TRY(tr_out_cast(t, 1, k));
    TR_TRY(tr_out_cast(t, 2, v));
  }
  double scale = ir_attr_float(n, "scale", 0.0f);
  if (scale == 0.0) scale = 1.0 / sqrt((double)head);
  TR_TRY(to_f32(t, &q));
  TR_TRY(to_f32(t, &k));
  TR_TRY(to_f32(t, &v));
  TR_TRY(visible_keys(t, &L, window, &ok));
  if (tr_in(t, 10)) TR_TRY(bias_columns(t, &L, tr_in(t, 10), &bias));
  TR_TRY(additive_mask(t, ok, bias, &mask));
  if (ir_attr_float(n, "softcap", 0.0f) > 0.0f || tr_in(t, 11) ||
      ir_attr_int(n, "smooth_softmax", 0) == 1) {
    TR_TRY(composed_attention(t, n, q, k, v, (float)scale, mask, &y));
    tr_note_path(t, TR_PATH_COMPOSED, "softcap_or_sink_attention", 0,
                 "float32 attention composed of MLX products and softmax (softcap or sink)");
  } else {
    TR_TRY(mx_sdpa(t->mx, &y, q, k, v, (float)scale, false, mask));
    tr_note_path(t, TR_PATH_MLX_FUSED, "sdpa", 0, "masked MLX sdpa over the present cache");
  }
  TR_TRY(mx_transpose(t->mx, &y, y, perm, 4));
  int shape[3] = {b, s, nq * head};
  TR_TRY(mx_reshape(t->mx, &y, y, shape, 3));
  return tr_out_cast(t, 0, y);
}

const op_row ops_llm_attention_rows[] = {
    {"com.microsoft", "GroupQueryAttention", 1, 1, claim_gqa, translate_gqa, OP_VALUE_KEYED,
     OP_T(IR_FLOAT) | OP_T(IR_FLOAT16), 0,
     "past/present BNSH, growing or shared buffer, batch entries of their own lengths "
     "(seqlens_k); separate or packed QKV, in-op rotary (position_ids); local_window_size, "
     "attention_bias: masked MLX sdpa in float32; softcap, smooth_softmax, head_sink: composed "
     "float32 softmax; sliding_window_cache: window-sized caches evicted in the op; q/k norm "
     "weights (per-head RMS norm); quantized caches declined; keyed on total_sequence_length "
     "by class: shared-buffer and windowed decode steps share one trace where the group's "
     "inputs keep their shapes (a group fed the growing attention_mask traces per step), a "
     "growing past traces once per length",
     NULL, NULL, 1u << 6, key_class_gqa},
    OP_ROWS_END,
};
