/*
 * RotaryEmbedding as com.microsoft defines it (inputs: input, position_ids, cos_cache,
 * sin_cache), and the rotary helpers GroupQueryAttention shares (ops/llm.h).
 * The input is 3-D [B, S, hidden] or 4-D [B, N, S, H]; both are brought to [B, S, N, H] (a
 * reshape or a transpose) and back. As ORT's kernel decides: the head size is twice the cache
 * width when rotary_embedding_dim is 0 (else hidden / num_heads), the rotated width is
 * rotary_embedding_dim or the head size, and values past it pass through. position_ids is
 * [B, S] or one offset p (positions p + s). The `scale` attribute is ignored, as ORT's CPU
 * kernel ignores it. Computed in float32 (half inputs widened, the result rounded once); the
 * translation slices by the head size, so it is shape-keyed.
 */
#include "ops/families.h"
#include "ops/llm.h"

/* A value's static rank, or -1 when unknown (rank 0 counts as unknown: see norm.c). */
static int rank_of(const ir_value *v) { return v && v->rank > 0 ? v->rank : -1; }

static int to_f32(tr_ctx *t, mx_array *a) {
  if (*a && mx_dtype_of(*a) != MX_FLOAT32) TR_TRY(mx_astype(t->mx, a, *a, MX_FLOAT32));
  return MX_OK;
}

/* --- shared rotary helpers (ops/llm.h) ---------------------------------------------------- */
int llm_positions_from(tr_ctx *t, mx_array p0, int s, mx_array *out) {
  mx_array r;
  int one[2] = {1, 1};
  TR_TRY(mx_astype(t->mx, &p0, p0, MX_INT64));
  TR_TRY(mx_reshape(t->mx, &p0, p0, one, 2));
  TR_TRY(mx_arange(t->mx, &r, 0, s, 1, MX_INT64));
  return mx_binary(t->mx, out, MX_ADD, p0, r);
}

static int table(tr_ctx *t, mx_array cache, mx_array pos, int half, mx_array *out) {
  if (mx_ndim(cache) != 2) return tr_fail(t, "cos_cache and sin_cache must be 2-D");
  int width = mx_dim(cache, 1);
  if (width != half) { /* ORT reads rows `half` apart whatever the width */
    int flat = mx_dim(cache, 0) * width, rows = flat / half, shape[2] = {rows, half};
    int lo = 0, hi = rows * half, step = 1;
    TR_TRY(mx_reshape(t->mx, &cache, cache, &flat, 1));
    TR_TRY(mx_slice(t->mx, &cache, cache, &lo, &hi, &step, 1));
    TR_TRY(mx_reshape(t->mx, &cache, cache, shape, 2));
  }
  static const int ax2[1] = {2};
  TR_TRY(mx_take(t->mx, &cache, cache, pos, 0));
  TR_TRY(to_f32(t, &cache));
  return mx_expand_dims(t->mx, out, cache, ax2, 1);
}

int llm_rope_tables(tr_ctx *t, mx_array cos_cache, mx_array sin_cache, mx_array pos, int half,
                    mx_array *cos_out, mx_array *sin_out) {
  TR_TRY(table(t, cos_cache, pos, half, cos_out));
  return table(t, sin_cache, pos, half, sin_out);
}

int llm_rope_apply(tr_ctx *t, mx_array x, mx_array cosv, mx_array sinv, int rot, bool interleaved,
                   mx_array *out) {
  int d = mx_dim(x, 3), half = rot / 2;
  mx_array xr = x, xp = NULL, x1, x2, a, c, re, im, y;
  if (rot < d) {
    TR_TRY(tr_slice_axis(t, x, 3, 0, rot, &xr));
    TR_TRY(tr_slice_axis(t, x, 3, rot, d, &xp));
  }
  if (interleaved) { /* pairs (2i, 2i+1): view the last axis as [half, 2] */
    int shape[5] = {mx_dim(x, 0), mx_dim(x, 1), mx_dim(x, 2), half, 2};
    static const int ax4[1] = {4};
    TR_TRY(mx_reshape(t->mx, &xr, xr, shape, 5));
    TR_TRY(tr_slice_axis(t, xr, 4, 0, 1, &x1));
    TR_TRY(tr_slice_axis(t, xr, 4, 1, 2, &x2));
    TR_TRY(mx_squeeze(t->mx, &x1, x1, ax4, 1));
    TR_TRY(mx_squeeze(t->mx, &x2, x2, ax4, 1));
  } else {
    TR_TRY(tr_slice_axis(t, xr, 3, 0, half, &x1));
    TR_TRY(tr_slice_axis(t, xr, 3, half, rot, &x2));
  }
  TR_TRY(mx_binary(t->mx, &a, MX_MULTIPLY, x1, cosv));
  TR_TRY(mx_binary(t->mx, &c, MX_MULTIPLY, x2, sinv));
  TR_TRY(mx_binary(t->mx, &re, MX_SUBTRACT, a, c));
  TR_TRY(mx_binary(t->mx, &a, MX_MULTIPLY, x2, cosv));
  TR_TRY(mx_binary(t->mx, &c, MX_MULTIPLY, x1, sinv));
  TR_TRY(mx_binary(t->mx, &im, MX_ADD, a, c));
  if (interleaved) {
    static const int last[1] = {4};
    mx_array pair[2];
    int shape[4] = {mx_dim(x, 0), mx_dim(x, 1), mx_dim(x, 2), rot};
    TR_TRY(mx_expand_dims(t->mx, &pair[0], re, last, 1));
    TR_TRY(mx_expand_dims(t->mx, &pair[1], im, last, 1));
    TR_TRY(mx_concatenate(t->mx, &y, pair, 2, 4));
    TR_TRY(mx_reshape(t->mx, &y, y, shape, 4));
  } else {
    mx_array pair[2] = {re, im};
    TR_TRY(mx_concatenate(t->mx, &y, pair, 2, 3));
  }
  if (xp) {
    mx_array parts[2] = {y, xp};
    TR_TRY(mx_concatenate(t->mx, &y, parts, 2, 3));
  }
  *out = y;
  return MX_OK;
}

/* --- RotaryEmbedding (com.microsoft) ------------------------------------------------------ */
static bool claim_rotary(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  int rank = rank_of(ir_input(g, n, 0));
  if (rank > 0 && rank != 3 && rank != 4)
    return op_decline(why, "RotaryEmbedding input of rank %d is not supported (3 or 4)", rank);
  int64_t rot = ir_attr_int(n, "rotary_embedding_dim", 0), nh = ir_attr_int(n, "num_heads", 0);
  if (rot < 0 || rot % 2)
    return op_decline(why, "RotaryEmbedding rotary_embedding_dim %lld must be even and >= 0",
                      (long long)rot);
  if (rot > 0 && nh <= 0)
    return op_decline(why, "RotaryEmbedding with rotary_embedding_dim needs num_heads (as ONNX "
                           "Runtime requires)");
  int64_t packed = ir_attr_int(n, "is_packed_batching", 0);
  if (packed)
    return op_decline(why, "RotaryEmbedding is_packed_batching %lld (ragged batches) is not "
                           "supported", (long long)packed);
  const ir_value *x = ir_input(g, n, 0);
  for (int i = 2; i <= 3; i++) {
    const ir_value *v = ir_input(g, n, i);
    if (x && v && v->elem_type != x->elem_type)
      return op_decline(why, "RotaryEmbedding input %d has element type %s, unlike input 0's %s",
                        i, ir_elem_name(v->elem_type), ir_elem_name(x->elem_type));
  }
  return true;
}

static int translate_rotary(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), pos = tr_in(t, 1), cosc = tr_in(t, 2), sinc = tr_in(t, 3), y;
  int rank = mx_ndim(x);
  if (rank != 3 && rank != 4) return tr_fail(t, "RotaryEmbedding input must be 3-D or 4-D");
  if (mx_ndim(cosc) != 2) return tr_fail(t, "cos_cache and sin_cache must be 2-D");
  int rot = (int)ir_attr_int(n, "rotary_embedding_dim", 0);
  int nh = (int)ir_attr_int(n, "num_heads", 0);
  int b = mx_dim(x, 0), s = mx_dim(x, rank == 4 ? 2 : 1);
  int hidden = rank == 4 ? mx_dim(x, 1) * mx_dim(x, 3) : mx_dim(x, 2);
  int head = rot == 0 ? 2 * mx_dim(cosc, 1) : hidden / nh;
  if (head <= 0 || hidden % head)
    return tr_fail(t, "RotaryEmbedding hidden size %d is not a multiple of the head size %d",
                   hidden, head);
  if (rot == 0) rot = head;
  if (rot > head) return tr_fail(t, "rotary_embedding_dim %d exceeds the head size %d", rot, head);
  int heads = hidden / head;
  if (rank == 4 && heads != mx_dim(x, 1))
    return tr_fail(t, "RotaryEmbedding 4-D input has %d heads, the attributes say %d",
                   mx_dim(x, 1), heads);
  static const int perm[4] = {0, 2, 1, 3};
  int bsnh[4] = {b, s, heads, head};
  if (rank == 4) TR_TRY(mx_transpose(t->mx, &x, x, perm, 4));
  else TR_TRY(mx_reshape(t->mx, &x, x, bsnh, 4));
  if (mx_size(pos) == 1) TR_TRY(llm_positions_from(t, pos, s, &pos));
  else if (mx_ndim(pos) != 2) return tr_fail(t, "position_ids must be [1] or [batch, sequence]");
  mx_array cosv, sinv;
  TR_TRY(llm_rope_tables(t, cosc, sinc, pos, rot / 2, &cosv, &sinv));
  TR_TRY(to_f32(t, &x));
  TR_TRY(llm_rope_apply(t, x, cosv, sinv, rot, ir_attr_int(n, "interleaved", 0) != 0, &y));
  if (rank == 4) TR_TRY(mx_transpose(t->mx, &y, y, perm, 4));
  else TR_TRY(mx_reshape(t->mx, &y, y, mx_shape(tr_in(t, 0)), 3));
  return tr_out_cast(t, 0, y);
}

const op_row ops_llm_rotary_rows[] = {
    {"com.microsoft", "RotaryEmbedding", 1, 1, claim_rotary, translate_rotary, OP_SHAPE_KEYED,
     OP_FLOATS, 0,
     "3-D or 4-D (BNSH) input, position_ids [B,S] or an offset; partial rotary; float32 "
     "compute; scale ignored (as ORT's CPU kernel does); is_packed_batching declined; "
     "shape-keyed",
     NULL, NULL, 0},
    OP_ROWS_END,
};
