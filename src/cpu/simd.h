/*
 * What the host kernels' loops (conv_depthwise.c, math.c, chain.c) share: 8-float
 * vectors in GCC's vector extension, unaligned loads and stores, a splat and a select, and the
 * attributes that build a loop twice on x86-64 (AVX2, or AVX2 with FMA, and the baseline), the
 * loader picking one for the processor.
 * Contraction stays off (ISO C mode) unless a file turns it on, so CPU_CLONES builds round each
 * operation alike and give the same bits.
 */
#ifndef CPU_SIMD_H
#define CPU_SIMD_H

#include <string.h>

typedef float f32x8 __attribute__((vector_size(32)));
typedef int i32x8 __attribute__((vector_size(32)));

/* Eight floats from or to anywhere (no alignment assumed); macros, since passing 32-byte vectors
 * through functions changes the ABI between the two builds. */
#define LOAD8(v, p) memcpy(&(v), (p), sizeof(f32x8))
#define STORE8(p, v) memcpy((p), &(v), sizeof(f32x8))

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CPU_CLONES __attribute__((target_clones("avx2", "default")))
/* For loops that may fuse multiply-adds (their file allows contraction): AVX2 with FMA, picked
 * by the processor's features (x86-64-v3), and the baseline. */
#define CPU_CLONES_FMA __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CPU_CLONES
#define CPU_CLONES_FMA
#endif

/* Inlined into each build of its caller, so compiled for that build's instruction set; being
 * always inlined, such helpers may take and return vectors, whose calling convention (which GCC
 * warns differs between the builds) never comes into play. */
#define CPU_INLINE static inline __attribute__((always_inline))
#pragma GCC diagnostic ignored "-Wpsabi"

/* stmt for l = 0 .. n - 1, unrolled (n a constant at the call, at most 8): the host loops keep
 * several vectors in flight, each step over all of them before the next. */
#define FOR_LANES(n, stmt) _Pragma("GCC unroll 8") for (int l = 0; l < (n); l++) stmt

/* v in every lane */
CPU_INLINE f32x8 splat8(float v) { return (f32x8){v, v, v, v, v, v, v, v}; }

/* a where mask is set (all ones), else b */
CPU_INLINE f32x8 select8(i32x8 mask, f32x8 a, f32x8 b) {
  return (f32x8)((mask & (i32x8)a) | (~mask & (i32x8)b));
}

#endif
