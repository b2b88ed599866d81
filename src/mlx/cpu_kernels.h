/*
 * MLX's fused CPU kernels built with AVX2 where the CPU has it (see cpu_kernels.c).
 */
#ifndef CPU_KERNELS_H
#define CPU_KERNELS_H

/* Makes MLX's kernel compiler target AVX2/FMA/F16C from now on; NULL when done (or already
 * done), else why not. Never fails the caller: kernels then stay as MLX builds them. */
const char *cpu_kernels_use_avx2(void);

#endif
