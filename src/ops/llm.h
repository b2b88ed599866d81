/*
 * Helpers shared by the decoder-LLM families (src/ops/llm_*.c): the rotary embedding that
 * RotaryEmbedding (contrib and ai.onnx's, misc_nn.c) and GroupQueryAttention's in-op rotary all
 * apply.
 */
#ifndef OPS_LLM_H
#define OPS_LLM_H

#include "plan/translate.h"

#include <stdbool.h>

/* cos_cache / sin_cache rows for the given positions: pos is int64 [B or 1, S]; the caches are
 * [max_pos, width]. Rows are read as ORT's kernels read them, `half` values apart (the cache's
 * width is normally half; a wider cache is read as ORT does, row-major with stride half). The
 * results are float32 [B or 1, S, 1, half], ready to broadcast over heads. */
int llm_rope_tables(tr_ctx *t, mx_array cos_cache, mx_array sin_cache, mx_array pos, int half,
                    mx_array *cos_out, mx_array *sin_out);

/* Rotates the first `rot` values of each head of x ([B, S, N, H]) by cosv/sinv (broadcasting
 * over [B, S, N, rot/2], as llm_rope_tables makes them); interleaved pairs (x[2i], x[2i+1]) or
 * halves (x[i], x[i + rot/2]); values past rot pass through. */
int llm_rope_apply(tr_ctx *t, mx_array x, mx_array cosv, mx_array sinv, int rot, bool interleaved,
                   mx_array *out);

/* Positions p0 + [0, S) as int64 [1, S], p0 a one-element int array (any integer type). */
int llm_positions_from(tr_ctx *t, mx_array p0, int s, mx_array *out);

#endif
