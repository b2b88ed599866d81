/*
 * The CPU device's set-up for a session (cpu.h): the bridge's layout policy, the sgemm's
 * switches, the host kernels' switch, the check of which BLAS serves MLX's matrix products,
 * MLX's buffer cache limit, and, only when the user opts in, MLX's run-time kernels built for
 * AVX2 (kernel_cache.c). Each applies process-wide; the checks that depend only on the process
 * run once.
 */
#include "cpu/cpu.h"

#include "cpu/blas_binding.h"
#include "cpu/kernel_cache.h"
#include "cpu/math.h"
#include "cpu/sgemm/sgemm.h"
#include "mlx/mx.h"

#include <pthread.h>

static const char *avx2_note;
static void use_avx2_kernels(void) { avx2_note = cpu_kernel_cache_use_avx2(); }

/* Checked once per process: libmlx's symbols are bound once, when it loads. */
static char blas_note[1024];
static bool blas_as_built;
static void check_blas(void) {
  blas_as_built = cpu_blas_binding_check(blas_note, sizeof blas_note);
}

/* The bridge's layout rules for MLX's CPU device (src/mlx/layout.cpp has the mechanism). MLX's
 * fused CPU kernels take their contiguous (vectorised) loop only when every operand that is not
 * a single value is row-contiguous and single values have no dimensions; otherwise they run a
 * strided loop that g++ does not vectorise (measured in docs/BENCHMARKS.md). Fusion barriers at
 * 8: MLX's compile cuts chains deeper than 11 itself, and where its cut falls on the Broadcast
 * under a scalar operand the whole kernel above goes strided. Sunk transposes: a convolution
 * hands ONNX a channels-first view of its channels-last result, and an activation (or a
 * squeeze-and-excitation scale) applied to that view otherwise ran strided and wrote a
 * channels-first copy the next convolution copied back (PP-OCRv4 rec). Reductions beneath
 * transposes: GlobalAveragePool over PP-OCRv4 rec's [1, 480, 6, 80] view took 1.1 ms, 0.11 ms
 * over the channels-last array beneath. The GPU device sets no policy. */
static const mx_layout_policy cpu_layout = {.fuse_barrier_at = 8,
                                            .sink_transposes = true,
                                            .single_values_as_scalars = true,
                                            .reduce_beneath_transposes = true};

void cpu_setup(const cpu_settings *s, cpu_setup_notes *notes) {
  *notes = (cpu_setup_notes){0};
  mx_set_layout_policy(MX_DEVICE_CPU, &cpu_layout);
  if (s->avx2_kernels) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, use_avx2_kernels);
    notes->avx2 = avx2_note;
  }
  notes->own_sgemm = cpu_sgemm_use_own(s->own_sgemm);
  cpu_sgemm_use_portable(s->portable_sgemm);
  cpu_sgemm_use_avx512(s->avx512_sgemm);
  cpu_set_host_kernels(s->host_kernels);
  static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
  pthread_once(&blas_once, check_blas);
  notes->blas = blas_note;
  notes->blas_as_built = blas_as_built;
  /* MLX's CPU allocator keeps only 32 MiB of freed buffers; beyond that a buffer goes back to
   * malloc, and large ones back to the kernel, so the next Run faults in and zeroes fresh pages
   * (PP-OCRv4 det: about 37,000 page faults per Run, 150 MiB). ORT's own CPU arena keeps what it
   * allocated as well. Process-wide, raised and never lowered. */
  if (s->cache_mb > 0)
    notes->cache_limit_mb = mx_cache_limit_at_least((size_t)s->cache_mb << 20) >> 20;
}
