/*
 * Average pooling of float32 on the CPU device as host kernels: AveragePool's windows and
 * GlobalAveragePool. The input is read where it lies (a convolution's output is a channels-first
 * view of a channels-last array), and the output is written channels-last and handed back as the
 * same kind of view, ready for the convolution that usually follows. Composed from MLX
 * operations, a pooling was a pad, strided slices, an add per tap and a division per axis, each
 * a pass in MLX's strided loop: PP-OCRv4 rec's neck pooled [480, 3, 80] in about 0.25 ms.
 * Each window sums its taps inside the input in row-major order and divides once by its count
 * (the taps inside the input, or inside the explicit padding with count_include_pad), as ONNX
 * Runtime's kernel does; the global form sums every position in order.
 */
#include "cpu/pool.h"

#include "cpu/workers.h"
#include "cpu/math.h"
#include "cpu/simd.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Below this many taps read (taps x channels x outputs) one thread does the work. */
enum { PARALLEL_MIN_READS = 1 << 16 };

typedef struct pool_params {
  int nd; /* spatial axes, 1 to CPU_POOL_MAX_ND; the window's geometry per axis */
  cpu_pool_axis ax[CPU_POOL_MAX_ND];
  bool global;
  long positions; /* output positions per image (the global form: 1) */
} pool_params;

typedef struct pool_job {
  const pool_params *p;
  const mx_host_tensor *x;
  float *y;
  int parts;
} pool_job;

/* acc[0:c] += the c channels of one position, step floats apart (8 at a time where adjacent). */
CPU_INLINE void add_row(float *acc, const float *x, long step, int c) {
  int i = 0;
  if (step == 1)
    for (f32x8 a, v; i + 8 <= c; i += 8)
      LOAD8(a, acc + i), LOAD8(v, x + i), a += v, STORE8(acc + i, a);
  for (; i < c; i++) acc[i] += x[i * step];
}

/* Output position `pos` of image n (row-major over the output's spatial axes): its window's taps
 * inside the input summed over every channel into y[0:c], divided by the count. */
CPU_CLONES static void window_at(const pool_params *p, const mx_host_tensor *x, int n, long pos,
                                  float *y) {
  int c = (int)x->shape[1], o[CPU_POOL_MAX_ND], lo[CPU_POOL_MAX_ND], hi[CPU_POOL_MAX_ND];
  long count = 1;
  for (int i = p->nd - 1; i >= 0; i--) {
    const cpu_pool_axis *a = &p->ax[i];
    o[i] = (int)(pos % a->out), pos /= a->out;
    int start = o[i] * a->s - a->lo, counted = 0;
    lo[i] = a->k, hi[i] = 0; /* the taps inside the input: [lo, hi) */
    for (int k = 0; k < a->k; k++) {
      int at = start + k * a->d;
      if (at >= 0 && at < a->in) lo[i] = k < lo[i] ? k : lo[i], hi[i] = k + 1;
      counted += at >= a->count_lo && at < a->count_hi;
    }
    count *= counted ? counted : 1;
  }
  memset(y, 0, sizeof(float) * (size_t)c);
  const float *base = (const float *)x->data + n * x->strides[0];
  int k[CPU_POOL_MAX_ND];
  bool any = true;
  for (int i = 0; i < p->nd; i++) k[i] = lo[i], any = any && lo[i] < hi[i];
  while (any) { /* the taps inside the input, row-major */
    const float *row = base;
    for (int i = 0; i < p->nd; i++)
      row += (o[i] * p->ax[i].s - p->ax[i].lo + k[i] * p->ax[i].d) * x->strides[2 + i];
    add_row(y, row, x->strides[1], c);
    int i = p->nd - 1;
    while (i >= 0 && ++k[i] == hi[i]) k[i] = lo[i], i--;
    any = i >= 0;
  }
  for (int i = 0; i < c; i++) y[i] /= (float)count;
}

/* Image n's every position summed per channel into y[0:c], divided by the count. */
CPU_CLONES static void global_at(const mx_host_tensor *x, int n, float *y) {
  int c = (int)x->shape[1], nd = x->ndim - 2, idx[MX_MAX_RANK] = {0};
  long count = 1;
  for (int i = 0; i < nd; i++) count *= x->shape[2 + i];
  memset(y, 0, sizeof(float) * (size_t)c);
  const float *base = (const float *)x->data + n * x->strides[0];
  for (long pos = 0; pos < count; pos++) {
    const float *row = base;
    for (int i = 0; i < nd; i++) row += idx[i] * x->strides[2 + i];
    add_row(y, row, x->strides[1], c);
    for (int i = nd - 1; i >= 0 && ++idx[i] == x->shape[2 + i]; i--) idx[i] = 0;
  }
  for (int i = 0; i < c; i++) y[i] /= (float)count;
}

static void pool_part(void *arg, int part) {
  const pool_job *j = arg;
  const pool_params *p = j->p;
  int c = (int)j->x->shape[1];
  long first, last;
  cpu_workers_range(j->x->shape[0] * p->positions, j->parts, part, &first, &last);
  for (long u = first; u < last; u++) {
    int n = (int)(u / p->positions);
    if (p->global) global_at(j->x, n, j->y + u * c);
    else window_at(p, j->x, n, u % p->positions, j->y + u * c);
  }
}

static void pool_kernel(const mx_host_tensor *in, int n_in, const mx_host_tensor *out,
                        const void *params) {
  (void)n_in;
  const pool_params *p = params;
  pool_job j = {p, &in[0], (float *)out->data, 1};
  double reads = (double)in[0].shape[0] * in[0].shape[1];
  if (p->global) {
    for (int i = 2; i < in[0].ndim; i++) reads *= in[0].shape[i];
  } else {
    reads *= p->positions;
    for (int i = 0; i < p->nd; i++) reads *= p->ax[i].k;
  }
  long units = in[0].shape[0] * p->positions;
  if (reads >= PARALLEL_MIN_READS && units > 1)
    j.parts = units < cpu_workers_available() ? (int)units : cpu_workers_available();
  cpu_workers_run(pool_part, &j, j.parts);
}

bool cpu_pool_applies(const tr_ctx *t, mx_array x) {
  return cpu_kernel_applies(t, x) && mx_ndim(x) >= 3 && mx_ndim(x) <= CPU_POOL_MAX_ND + 2 &&
         mx_size(x) > 0 && mx_size(x) <= INT_MAX;
}

/* The kernel over x [N, C, spatial...] writing [N, out spatial..., C], handed back as the
 * channels-first view [N, C, out spatial...]. */
static int build(tr_ctx *t, mx_array x, const pool_params *p, const int *out, mx_array *y) {
  int nd = mx_ndim(x) - 2, shape[MX_MAX_RANK], perm[MX_MAX_RANK];
  shape[0] = mx_dim(x, 0), shape[nd + 1] = mx_dim(x, 1);
  for (int i = 0; i < nd; i++) shape[1 + i] = out[i];
  TR_TRY(mx_host_kernel(t->mx, y, p->global ? "global average pool" : "average pool",
                        pool_kernel, p, sizeof *p, &x, 1, shape, nd + 2, MX_FLOAT32,
                        MX_HOST_STRIDED_INPUTS));
  perm[0] = 0, perm[1] = nd + 1;
  for (int i = 0; i < nd; i++) perm[2 + i] = 1 + i;
  return mx_transpose(t->mx, y, *y, perm, nd + 2);
}

int cpu_pool_average(tr_ctx *t, mx_array x, const cpu_pool_axis *ax, mx_array *y) {
  pool_params p = {mx_ndim(x) - 2, {{0}}, false, 1};
  int out[CPU_POOL_MAX_ND];
  for (int i = 0; i < p.nd; i++) p.ax[i] = ax[i], p.positions *= ax[i].out, out[i] = ax[i].out;
  return build(t, x, &p, out, y);
}

int cpu_pool_global_average(tr_ctx *t, mx_array x, mx_array *y) {
  pool_params p = {mx_ndim(x) - 2, {{0}}, true, 1};
  int out[MX_MAX_RANK];
  for (int i = 0; i < p.nd; i++) out[i] = 1;
  return build(t, x, &p, out, y);
}
