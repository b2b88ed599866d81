/*
 * MatMul with a constant float32 weight on the CPU device. The weight is packed once, when the
 * plan is built (a host kernel evaluated into a derived value), into the panels the plugin's
 * matrix product reads (blas/sgemm.c); each run is then one host kernel over A's rows and the
 * packed panels, with no packing and no copy of A. A following Add of a [N] bias folds into the
 * same kernel (mx_fold_into_product), which starts C from the bias rows. Packing per call was a
 * tenth of MiniLM's product time, and reading weights panel by panel, as they were packed,
 * streams them from memory better than the strided walk a per-call packing takes.
 */
#include "blas/sgemm.h"
#include "ops/host_math.h"
#include "ops/matmul_cpu.h"
#include "plan/translate.h"

#include <limits.h>

typedef struct mm_geometry {
  int k, n;
} mm_geometry;

static void pack_weight(const mx_host_tensor *in, int n_in, const mx_host_tensor *out,
                        const void *params) {
  (void)n_in;
  const mm_geometry *g = params;
  ep_sgemm_pack(g->k, g->n, in[0].data, g->n, 1, (float *)out->data);
}

/* in: A [..., k] (row-major), the packed weight, and the bias [n] when one was folded in */
static void product_packed(const mx_host_tensor *in, int n_in, const mx_host_tensor *out,
                           const void *params) {
  const mm_geometry *g = params;
  long m = 1;
  for (int i = 0; i + 1 < in[0].ndim; i++) m *= in[0].shape[i];
  ep_sgemm_prepacked((int)m, g->n, g->k, in[0].data, g->k, in[1].data,
                     n_in > 2 ? in[2].data : NULL, (float *)out->data, g->n);
}

int matmul_cpu_prepare(tr_ctx *t, mx_array w, mx_array *packed) {
  *packed = NULL;
  if (t->mx->device != MX_DEVICE_CPU || !hm_enabled() || !ep_sgemm_own_serves() || !w ||
      mx_dtype_of(w) != MX_FLOAT32 || mx_ndim(w) != 2)
    return MX_OK;
  mm_geometry g = {mx_dim(w, 0), mx_dim(w, 1)};
  size_t floats = ep_sgemm_packed_floats(g.k, g.n);
  if (floats == 0 || floats > INT_MAX) return MX_OK;
  int shape[1] = {(int)floats};
  return mx_host_kernel(t->mx, packed, "weight packing", pack_weight, &g, sizeof g, &w, 1, shape,
                        1, MX_FLOAT32, 0);
}

bool matmul_cpu_applies(const tr_ctx *t, mx_array a, mx_array w, mx_array packed) {
  if (!packed || t->mx->device != MX_DEVICE_CPU || t->trace == TR_TRACE_SHAPELESS ||
      mx_dtype_of(a) != MX_FLOAT32 || mx_ndim(a) < 1 || mx_ndim(w) != 2 ||
      mx_dim(a, -1) != mx_dim(w, 0))
    return false;
  long rows = 1;
  for (int i = 0; i + 1 < mx_ndim(a); i++) rows *= mx_shape(a)[i];
  return rows <= INT_MAX && rows * (long)mx_dim(w, 1) <= INT_MAX;
}

int matmul_cpu_build(tr_ctx *t, mx_array a, mx_array w, mx_array packed, mx_array bias,
                     mx_array *y) {
  mm_geometry g = {mx_dim(w, 0), mx_dim(w, 1)};
  int rank = mx_ndim(a), shape[MX_MAX_RANK];
  for (int i = 0; i + 1 < rank; i++) shape[i] = mx_shape(a)[i];
  shape[rank - 1] = g.n;
  mx_array ins[3] = {a, packed, bias};
  return mx_host_kernel(t->mx, y, "matmul (packed weight)", product_packed, &g, sizeof g, ins,
                        bias ? 3 : 2, shape, rank, MX_FLOAT32, bias ? 0 : MX_HOST_TAKES_BIAS_ROW);
}
