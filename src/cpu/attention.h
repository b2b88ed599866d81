/*
 * Attention spelled in ONNX nodes as one host kernel on the CPU device (attention.c):
 * softmax(q @ kt * scale + mask) @ v, a block of query rows at a time, the scores never leaving
 * the core's cache.
 */
#ifndef CPU_ATTENTION_H
#define CPU_ATTENTION_H

#include "plan/translate.h"

/* Whether float32 q [..., M, K], kt [..., K, N] and v [..., N, D] take the kernel: the CPU
 * device outside shapeless traces, host kernels and the plugin's product serving; q's and kt's
 * batch axes broadcast, v's fit in theirs. */
bool cpu_attention_applies(const tr_ctx *t, mx_array q, mx_array kt, mx_array v);

/* softmax(q @ kt * scale + mask) @ v over the last axis, mask NULL or a float32 array whose axes
 * align with the scores' trailing ones, each 1 or the scores', the last whole (the caller
 * checks). heads_last (with two batch axes [B, H]): the kernel writes [B, M, H, D] and *y is its
 * [B, H, M, D] view, for a reader that transposes the heads back next to the rows. */
int cpu_attention_build(tr_ctx *t, mx_array q, mx_array kt, mx_array v, mx_array mask,
                        float scale, bool heads_last, mx_array *y);

#endif
