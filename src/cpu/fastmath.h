/*
 * Composed transcendental kernels for the CPU device (fastmath.c). MLX's CPU backend computes
 * exp and erf (and with them sigmoid and softmax) with scalar code, several times slower than its
 * vectorised arithmetic; the same functions composed from that arithmetic are faster, and as
 * accurate (docs/BENCHMARKS.md). Used for float32 on the CPU device only.
 */
#ifndef CPU_FASTMATH_H
#define CPU_FASTMATH_H

#include "plan/translate.h"

/* exp's constants, shared with its host-kernel form (math.c): ln 2 in two parts and the
 * polynomial (highest degree first). */
enum { CPU_FAST_EXP_TERMS = 6 };
extern const double CPU_FAST_LOG2E, CPU_FAST_LN2_HI, CPU_FAST_LN2_LO;
extern const double CPU_FAST_EXP_POLY[CPU_FAST_EXP_TERMS];

/* Whether x takes the composed kernels: float32 on the CPU device, in keyed traces. */
bool cpu_fast_applies(const tr_ctx *t, mx_array x);
/* Whether unary op `op` (an mx_unary_op) has a composed form. */
bool cpu_fast_has_unary(int op);
int cpu_fast_unary(tr_ctx *t, int op, mx_array x, mx_array *out);
int cpu_fast_exp(tr_ctx *t, mx_array x, mx_array *out);
/* softmax over `axes` (n of them): exp(x - max) / sum, with the composed exp. */
int cpu_fast_softmax(tr_ctx *t, mx_array x, const int *axes, int n, mx_array *out);

#endif
