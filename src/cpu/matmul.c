/*
 * MatMul with a constant float32 weight on the CPU device. The weight is packed once, when the
 * plan is built (a host kernel evaluated into a derived value), into the panels the plugin's
 * matrix product reads (cpu/sgemm/sgemm.c); each run is then one host kernel over A's rows and the
 * packed panels, with no packing and no copy of A. A following Add of a [N] bias folds into the
 * same kernel (mx_fold_into_product), which starts C from the bias rows, and an elementwise chain
 * reading only the product folds into it as its epilogue (mx_fold_epilogue): each thread passes
 * over the rows it has just finished. Packing per call was a tenth of MiniLM's product time, and
 * reading weights panel by panel, as they were packed, streams them from memory better than the
 * strided walk a per-call packing takes.
 */
#include "cpu/sgemm/sgemm.h"
#include "cpu/workers.h"
#include "cpu/math.h"
#include "cpu/matmul.h"
#include "plan/translate.h"

#include <limits.h>
#include <stdint.h>

typedef struct cpu_matmul_geometry {
  int k, n;
} cpu_matmul_geometry;

/* The packed weight starts at a 64-byte boundary inside its buffer: MLX's CPU allocator hands
 * out addresses 8 bytes past one, where half of B's 32-byte loads straddled two cache lines
 * (MiniLM's 36 products alone, the plugin's product called directly, two copies in one process
 * alternated: 2.0-2.6 % slower with the weights 24 bytes past a boundary, in four runs). The
 * buffer's first float records where the panels start, so a copy of the buffer elsewhere (MLX
 * is free to move an array's data) still finds them, aligned or not; the slack covers it. */
enum { ALIGN_SLACK_FLOATS = 64 / sizeof(float) };

static size_t packed_buffer_floats(int k, int n) {
  size_t floats = cpu_sgemm_packed_floats(k, n);
  return floats ? floats + ALIGN_SLACK_FLOATS : 0;
}

/* Where the panels start: past the record, at the first 64-byte boundary (1 to 16 floats in). */
static float *place_panels(float *buffer) {
  float *panels = (float *)(((uintptr_t)(buffer + 1) + 63) & ~(uintptr_t)63);
  buffer[0] = (float)(panels - buffer);
  return panels;
}

static const float *packed_panels(const void *buffer) {
  const float *b = buffer;
  return b + (int)b[0];
}

static void pack_weight(const mx_host_tensor *in, int n_in, const mx_host_tensor *out,
                        const void *params) {
  (void)n_in;
  const cpu_matmul_geometry *g = params;
  cpu_sgemm_pack(g->k, g->n, in[0].data, g->n, 1, place_panels((float *)out->data));
}

/* in: A [..., k] (row-major), the packed weight, and the bias [n] when one was folded in */
static void product_packed(const mx_host_tensor *in, int n_in, const mx_host_tensor *out,
                           const void *params) {
  const cpu_matmul_geometry *g = params;
  long m = 1;
  for (int i = 0; i + 1 < in[0].ndim; i++) m *= in[0].shape[i];
  cpu_sgemm_post post = {out->epilogue, out->epilogue_params};
  cpu_sgemm_prepacked((int)m, g->n, g->k, in[0].data, g->k, packed_panels(in[1].data),
                     n_in > 2 ? in[2].data : NULL, out->epilogue ? &post : NULL,
                     (float *)out->data, g->n);
}

int cpu_matmul_prepare(tr_ctx *t, mx_array w, mx_array *packed) {
  *packed = NULL;
  if (t->mx->device != MX_DEVICE_CPU || !cpu_host_kernels_enabled() || !cpu_sgemm_own_serves() ||
      !w || mx_dtype_of(w) != MX_FLOAT32 || mx_ndim(w) != 2)
    return MX_OK;
  cpu_matmul_geometry g = {mx_dim(w, 0), mx_dim(w, 1)};
  size_t floats = packed_buffer_floats(g.k, g.n);
  if (floats == 0 || floats > INT_MAX) return MX_OK;
  int shape[1] = {(int)floats};
  return mx_host_kernel(t->mx, packed, "weight packing", pack_weight, &g, sizeof g, &w, 1, shape,
                        1, MX_FLOAT32, 0);
}

bool cpu_matmul_packed_for(mx_array packed, long k, long n) {
  return packed && k > 0 && n > 0 && k <= INT_MAX && n <= INT_MAX &&
         mx_size(packed) == packed_buffer_floats((int)k, (int)n);
}

bool cpu_matmul_applies(const tr_ctx *t, mx_array a, mx_array w, mx_array packed) {
  if (!packed || t->mx->device != MX_DEVICE_CPU || t->trace == TR_TRACE_SHAPELESS ||
      mx_dtype_of(a) != MX_FLOAT32 || mx_ndim(a) < 1 || mx_ndim(w) != 2 ||
      mx_dim(a, -1) != mx_dim(w, 0))
    return false;
  long rows = 1;
  for (int i = 0; i + 1 < mx_ndim(a); i++) rows *= mx_shape(a)[i];
  return rows <= INT_MAX && rows * (long)mx_dim(w, 1) <= INT_MAX;
}

int cpu_matmul_build(tr_ctx *t, mx_array a, mx_array w, mx_array packed, mx_array bias,
                     mx_array *y) {
  cpu_matmul_geometry g = {mx_dim(w, 0), mx_dim(w, 1)};
  int rank = mx_ndim(a), shape[MX_MAX_RANK];
  for (int i = 0; i + 1 < rank; i++) shape[i] = mx_shape(a)[i];
  shape[rank - 1] = g.n;
  mx_array ins[3] = {a, packed, bias};
  return mx_host_kernel(t->mx, y, "matmul (packed weight)", product_packed, &g, sizeof g, ins,
                        bias ? 3 : 2, shape, rank, MX_FLOAT32,
                        MX_HOST_TAKES_EPILOGUE | (bias ? 0 : MX_HOST_TAKES_BIAS_ROW));
}

/* --- batched products of computed operands ------------------------------------------------ */
/* The batch of products: output batch axes batch[0:n_batch] (broadcast), each product m x k by
 * k x n. */
typedef struct bm_geometry {
  int m, n, k, n_batch;
  int batch[MX_MAX_RANK];
  long items;
} bm_geometry;

typedef struct bm_job {
  const bm_geometry *g;
  const mx_host_tensor *a, *b;
  float *c;
  int parts;
} bm_job;

long cpu_matmul_item_offset(const mx_host_tensor *t, int n_batch, const int *batch, long item) {
  long at = 0;
  for (int i = n_batch - 1, j = t->ndim - 3; i >= 0; i--, j--) {
    long index = item % batch[i];
    item /= batch[i];
    if (j >= 0 && t->shape[j] != 1) at += index * t->strides[j];
  }
  return at;
}

static void batched_part(void *arg, int part) {
  const bm_job *j = arg;
  const bm_geometry *g = j->g;
  const mx_host_tensor *a = j->a, *b = j->b;
  long first, last;
  cpu_workers_range(g->items, j->parts, part, &first, &last);
  for (long item = first; item < last; item++)
    cpu_sgemm(g->m, g->n, g->k, 1.0f,
             (const float *)a->data + cpu_matmul_item_offset(a, g->n_batch, g->batch, item),
             a->strides[a->ndim - 2], a->strides[a->ndim - 1],
             (const float *)b->data + cpu_matmul_item_offset(b, g->n_batch, g->batch, item),
             b->strides[b->ndim - 2], b->strides[b->ndim - 1], 0.0f,
             j->c + item * (long)g->m * g->n, g->n);
}

/* Items split over the cores, each product on one thread (a product called from a part finds
 * the pool busy and runs alone); one item takes the product's own split. */
static void product_batched(const mx_host_tensor *in, int n_in, const mx_host_tensor *out,
                            const void *params) {
  (void)n_in;
  const bm_geometry *g = params;
  bm_job j = {g, &in[0], &in[1], (float *)out->data, 1};
  int parts = cpu_workers_parts();
  if (g->items > 1) j.parts = g->items < parts ? (int)g->items : parts;
  cpu_workers_run(batched_part, &j, j.parts);
}

bool cpu_matmul_batched_applies(const tr_ctx *t, mx_array a, mx_array b) {
  int ra = mx_ndim(a), rb = mx_ndim(b);
  if (t->mx->device != MX_DEVICE_CPU || t->trace == TR_TRACE_SHAPELESS ||
      !cpu_host_kernels_enabled() || !cpu_sgemm_own_serves() || mx_dtype_of(a) != MX_FLOAT32 ||
      mx_dtype_of(b) != MX_FLOAT32 || ra < 2 || rb < 2 || (ra < 3 && rb < 3) ||
      mx_dim(a, -1) != mx_dim(b, -2))
    return false;
  for (int i = 3; i <= ra && i <= rb; i++) { /* batch axes broadcast */
    int da = mx_dim(a, -i), db = mx_dim(b, -i);
    if (da != db && da != 1 && db != 1) return false;
  }
  double out = (double)mx_dim(a, -2) * mx_dim(b, -1);
  for (int i = 3; i <= (ra > rb ? ra : rb); i++)
    out *= i <= ra && i <= rb ? (mx_dim(a, -i) > mx_dim(b, -i) ? mx_dim(a, -i) : mx_dim(b, -i))
                              : (i <= ra ? mx_dim(a, -i) : mx_dim(b, -i));
  return out > 0 && out <= INT_MAX;
}

int cpu_matmul_batched_build(tr_ctx *t, mx_array a, mx_array b, mx_array *y) {
  int ra = mx_ndim(a), rb = mx_ndim(b), rank = ra > rb ? ra : rb, shape[MX_MAX_RANK];
  bm_geometry g = {mx_dim(a, -2), mx_dim(b, -1), mx_dim(a, -1), rank - 2, {0}, 1};
  for (int i = 0; i < g.n_batch; i++) {
    int from_end = rank - i; /* this axis is -from_end in the output */
    int da = from_end <= ra ? mx_dim(a, -from_end) : 1;
    int db = from_end <= rb ? mx_dim(b, -from_end) : 1;
    g.batch[i] = shape[i] = da > db ? da : db;
    g.items *= g.batch[i];
  }
  shape[rank - 2] = g.m, shape[rank - 1] = g.n;
  mx_array ins[2] = {a, b};
  return mx_host_kernel(t->mx, y, "batched matmul", product_batched, &g, sizeof g, ins, 2, shape,
                        rank, MX_FLOAT32, MX_HOST_STRIDED_INPUTS);
}
