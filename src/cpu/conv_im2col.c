/*
 * The im2col copy of an ungrouped convolution on the CPU device, a host kernel: channels-last
 * x [N, d, h, w, C] (1-D and 2-D inputs take d = h = 1), read where it lies (any strides, so a
 * channels-first input's transposed view is not copied first), becomes the columns
 * [N * positions, taps * C] that one product with the weight's packed [taps * C, O] matrix turns
 * into the output (cpu/conv.c). Row p holds output position p's window, tap after tap in
 * row-major kernel order, C channels each; a tap that falls in the padding is zeros, so the
 * padded input is never built. MLX's own CPU convolution makes the same columns with two generic
 * strided copies (into a padded input, then the window view), on its stream's one thread, and
 * hands an unpacked weight to the product on every call: PP-OCRv4 rec's three such layers (a
 * 3x3 stride-2 stem, two 1x3 layers over 480 and 960 channels) ran between the host kernels on
 * one core. Rows are split over the cores (cpu/workers.c) from about 10^5 copied values up.
 */
#include "cpu/workers.h"
#include "cpu/conv.h"

#include <string.h>

static const double PARALLEL_MIN_VALUES = 1 << 16;

typedef struct im2col_job {
  const conv_window *g;
  const float *x;
  long x_stride[5]; /* n, d, h, w, c: elements between neighbours (0 for an absent axis) */
  float *cols;
  long rows;
  int parts;
} im2col_job;

/* Output position r (row r of the columns): its batch item (returned) and output coordinates. */
static inline long position_of(const conv_window *g, long r, int *od, int *oh, int *ow) {
  *ow = (int)(r % g->out[2]);
  r /= g->out[2];
  *oh = (int)(r % g->out[1]);
  r /= g->out[1];
  *od = (int)(r % g->out[0]);
  return r / g->out[0];
}

/* One tap's C channels at x_at into dst: a plain copy when the channels are adjacent. */
static inline void copy_channels(float *dst, const float *x, long x_at, long c_stride, int c) {
  if (c_stride == 1) {
    memcpy(dst, x + x_at, sizeof(float) * (size_t)c);
    return;
  }
  for (int ch = 0; ch < c; ch++) dst[ch] = x[x_at + ch * c_stride];
}

static void im2col_rows(const im2col_job *j, long first, long last) {
  const conv_window *g = j->g;
  const long *s = j->x_stride;
  int c = g->c;
  long taps_c = (long)g->k[0] * g->k[1] * g->k[2] * c;
  /* along w, a tap run [kw0, kw1) clear of the padding is one copy when the taps' channels
   * follow one another in memory (stride-1 dilation over dense channels-last rows) */
  bool runs = s[4] == 1 && g->dil[2] == 1 && s[3] == c;
  for (long r = first; r < last; r++) {
    int od, oh, ow;
    long b = position_of(g, r, &od, &oh, &ow);
    float *dst = j->cols + r * taps_c;
    int w0 = ow * g->stride[2] - g->lo[2];
    for (int kd = 0; kd < g->k[0]; kd++) {
      int id = od * g->stride[0] - g->lo[0] + kd * g->dil[0];
      for (int kh = 0; kh < g->k[1]; kh++, dst += (long)g->k[2] * c) {
        int ih = oh * g->stride[1] - g->lo[1] + kh * g->dil[1];
        if (id < 0 || id >= g->in[0] || ih < 0 || ih >= g->in[1]) {
          memset(dst, 0, sizeof(float) * (size_t)g->k[2] * (size_t)c);
          continue;
        }
        long row_at = b * s[0] + id * s[1] + ih * s[2];
        int kw = 0;
        for (; kw < g->k[2] && w0 + kw * g->dil[2] < 0; kw++)
          memset(dst + (long)kw * c, 0, sizeof(float) * (size_t)c);
        int kw_end = kw;
        while (kw_end < g->k[2] && w0 + kw_end * g->dil[2] < g->in[2]) kw_end++;
        if (runs && kw_end > kw) {
          memcpy(dst + (long)kw * c, j->x + row_at + (long)(w0 + kw) * s[3],
                 sizeof(float) * (size_t)(kw_end - kw) * (size_t)c);
        } else {
          for (int t = kw; t < kw_end; t++)
            copy_channels(dst + (long)t * c, j->x, row_at + (long)(w0 + t * g->dil[2]) * s[3],
                          s[4], c);
        }
        if (kw_end < g->k[2])
          memset(dst + (long)kw_end * c, 0, sizeof(float) * (size_t)(g->k[2] - kw_end) * c);
      }
    }
  }
}

/* The same columns from an input whose channels are not adjacent in memory (a channels-first
 * input's transposed view: the network's image, or a Concat's channels-first result). Per
 * column (one tap's one channel), a walk along an output row reads the input row in order
 * and writes every row's slot of that column; gathering each position's channels one by one
 * instead cost 3.5 ns a value (PP-OCRv4 rec's 3-channel stem: 369 us for 104k values). */
static void im2col_rows_planar(const im2col_job *j, long first, long last) {
  const conv_window *g = j->g;
  const long *s = j->x_stride;
  const int c = g->c;
  const long taps_c = (long)g->k[0] * g->k[1] * g->k[2] * c;
  for (long r = first; r < last;) {
    int od, oh, ow0;
    long b = position_of(g, r, &od, &oh, &ow0);
    int ow1 = last - r < g->out[2] - ow0 ? ow0 + (int)(last - r) : g->out[2];
    float *row0 = j->cols + (r - ow0) * taps_c; /* output position ow's row: row0 + ow * taps_c */
    long col = 0;
    for (int kd = 0; kd < g->k[0]; kd++) {
      int id = od * g->stride[0] - g->lo[0] + kd * g->dil[0];
      for (int kh = 0; kh < g->k[1]; kh++) {
        int ih = oh * g->stride[1] - g->lo[1] + kh * g->dil[1];
        bool inside = id >= 0 && id < g->in[0] && ih >= 0 && ih < g->in[1];
        for (int kw = 0; kw < g->k[2]; kw++) {
          int w_at = kw * g->dil[2] - g->lo[2];
          /* outputs [a, e) of [ow0, ow1) read inside the input along w */
          int a = ow0, e = ow1;
          while (a < e && a * g->stride[2] + w_at < 0) a++;
          while (e > a && (e - 1) * g->stride[2] + w_at >= g->in[2]) e--;
          if (!inside) a = e = ow1;
          const long step = (long)g->stride[2] * s[3];
          for (int ch = 0; ch < c; ch++, col++) {
            float *dst = row0 + col;
            for (int ow = ow0; ow < a; ow++) dst[ow * taps_c] = 0.0f;
            const float *src = j->x + b * s[0] + id * s[1] + ih * s[2] + ch * s[4] +
                               ((long)a * g->stride[2] + w_at) * s[3];
            float *to = dst + (long)a * taps_c;
            for (int ow = a; ow < e; ow++, src += step, to += taps_c) *to = *src;
            for (int ow = e; ow < ow1; ow++) dst[ow * taps_c] = 0.0f;
          }
        }
      }
    }
    r += ow1 - ow0;
  }
}

static void im2col_part(void *arg, int part) {
  const im2col_job *j = arg;
  long first, last;
  cpu_workers_range(j->rows, j->parts, part, &first, &last);
  if (first >= last) return;
  if (j->x_stride[4] != 1 && j->g->c > 1) im2col_rows_planar(j, first, last);
  else im2col_rows(j, first, last);
}

static void im2col_loop(const mx_host_tensor *in, int n_in, const mx_host_tensor *out,
                        const void *params) {
  (void)n_in;
  const conv_window *g = params;
  const mx_host_tensor *x = &in[0];
  im2col_job j = {g, x->data, {0}, (float *)out->data,
                  (long)g->n * g->out[0] * g->out[1] * g->out[2], 1};
  int nd = x->ndim - 2;
  j.x_stride[0] = (long)x->strides[0];
  j.x_stride[4] = (long)x->strides[nd + 1];
  for (int i = 0; i < nd; i++) j.x_stride[1 + 3 - nd + i] = (long)x->strides[1 + i];
  if (j.rows == 0) return;
  double values = (double)j.rows * g->k[0] * g->k[1] * g->k[2] * g->c;
  if (values >= PARALLEL_MIN_VALUES) j.parts = cpu_workers_parts();
  if (j.parts > j.rows) j.parts = (int)j.rows;
  cpu_workers_run(im2col_part, &j, j.parts);
}

int cpu_conv_im2col_loop(tr_ctx *t, mx_array x, const conv_window *g, mx_array *cols) {
  long rows = (long)g->n * g->out[0] * g->out[1] * g->out[2];
  long width = (long)g->k[0] * g->k[1] * g->k[2] * g->c;
  if (rows > INT32_MAX || width > INT32_MAX)
    return tr_fail(t, "the im2col columns have more than 2^31 rows or columns");
  int shape[2] = {(int)rows, (int)width};
  return mx_host_kernel(t->mx, cols, "im2col", im2col_loop, g, sizeof *g, &x, 1, shape, 2,
                        MX_FLOAT32, MX_HOST_STRIDED_INPUTS);
}
