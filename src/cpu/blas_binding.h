/*
 * Which library serves MLX's cblas_sgemm in this process (see blas_binding.c).
 */
#ifndef CPU_BLAS_BINDING_H
#define CPU_BLAS_BINDING_H

#include <stdbool.h>
#include <stddef.h>

/* Writes which library libmlx's cblas_sgemm is bound to into note. False when it is not the one
 * the plugin was built to use (MLX loaded first); note then says why and what to do. */
bool cpu_blas_binding_check(char *note, size_t note_size);

#endif
