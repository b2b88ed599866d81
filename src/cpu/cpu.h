/*
 * The CPU device room as the generic rooms (ep/, plan/) see it: one set-up call made when a
 * session on MLX's CPU device is created, and the few questions a plan asks while it builds
 * and runs. Everything else of src/cpu/ (host kernels, their SIMD loops, the sgemm, the worker
 * pool, the BLAS binding check, the kernel-cache opt-in) stays behind this header; operator
 * translators in ops/ reach the host kernels through cpu/<kernel>.h.
 */
#ifndef CPU_CPU_H
#define CPU_CPU_H

#include <stdbool.h>
#include <stddef.h>

/* What a session asks of the CPU device (from its provider options and environment). */
typedef struct cpu_settings {
  bool host_kernels;   /* softmax, layer norm, erf and friends as host kernels (math.c) */
  bool own_sgemm;      /* the plugin's sgemm serves MLX's matrix products, else OpenBLAS */
  bool portable_sgemm; /* the sgemm's portable kernels only (tests) */
  bool avx512_sgemm;   /* the sgemm's AVX-512 kernels where the processor has them */
  bool avx2_kernels;   /* opt-in: MLX's run-time CPU kernels built for AVX2 (kernel_cache.c) */
  long cache_mb;       /* MLX keeps at least this many MiB of freed buffers (0: MLX's own) */
} cpu_settings;

/* What the set-up did, for the EP to log. */
typedef struct cpu_setup_notes {
  const char *avx2;       /* avx2_kernels asked: NULL when done, else why not */
  const char *blas;       /* which library serves MLX's matrix products, in words */
  bool blas_as_built;     /* that library is the one the build chose */
  bool own_sgemm;         /* the plugin's own product serves them */
  size_t cache_limit_mb;  /* MLX's buffer cache limit now (cache_mb > 0) */
} cpu_setup_notes;

/* Applies s for this process (the last session's settings hold). The caller holds the EP's MLX
 * lock: the buffer cache limit is MLX state shared with every session. */
void cpu_setup(const cpu_settings *s, cpu_setup_notes *notes);

/* Whether the host kernels are on (a plan keys their groups on shapes when they are). */
bool cpu_host_kernels_enabled(void);

/* Between cpu_workers_hold and cpu_workers_release the pool threads spin between jobs instead of
 * going to sleep 200 us after one, and sleeping ones are woken: a Run holds them through MLX's
 * scheduling of its host kernels. Calls nest; each hold must be released. */
void cpu_workers_hold(void);
void cpu_workers_release(void);

#endif
