/*
 * MLX's fused CPU kernels built with AVX2 where the CPU has it (see kernel_cache.c).
 */
#ifndef CPU_KERNEL_CACHE_H
#define CPU_KERNEL_CACHE_H

/* Makes MLX's kernel compiler target AVX2/FMA/F16C from now on; NULL when done (or already
 * done), else why not. Never fails the caller: kernels then stay as MLX builds them. */
const char *cpu_kernel_cache_use_avx2(void);

#endif
