/*
 * The depthwise convolution loop that runs on MLX's CPU stream as a host kernel (mx_host_kernel):
 * channels-last x [N, d, h, w, C] (1-D and 2-D inputs take d = h = 1) times per-tap channel rows
 * [taps, C], plus an optional bias [C]. For each output position it sums the taps that fall
 * inside the input over the channels, 8-channel blocks held in registers; taps that fall in the
 * zero padding are skipped, so the padded input is never built. Where the channels fill whole
 * vectors, runs of 8 outputs clear of the padding along w share each tap's weight load (PP-OCR's
 * 5x5 depthwise layers: 7.5 -> 6.1 ms for eight of them); kernels 3 and 5 wide at stride 1 slide
 * along the row instead, each input vector loaded once per row of taps (6.1 -> 3.9 ms).
 * Built per graph instead of the per-tap multiply-adds MLX would fuse: those read strided slices
 * and a broadcast weight, which sends MLX's fused kernel through its strided loop (scalar code);
 * here the inner loop runs over contiguous channels and is vectorised. Each product is added in
 * one fused multiply-add where the processor has FMA (one rounding, as ONNX Runtime's own kernels
 * do; this core issues one 8-float multiply-add or one multiply and one add a cycle, yet the
 * loop ran 17-37% faster fused: PP-OCR's 240-channel 5x5 layer on one core 473 -> 395 us, its
 * 128-channel 3x3 one 213 -> 156 us), taps in row-major order.
 * Output rows are split over the cores (cpu/workers.c) from about 10^5 products up; each output
 * is computed by one thread in the same order, so the split changes no bits. An elementwise chain
 * reading only the convolution folds in as the kernel's epilogue (mx_fold_epilogue), applied to
 * each output row as it is finished.
 */
#include "cpu/workers.h"
#include "cpu/conv.h"
#include "cpu/simd.h"

/* Multiply-adds contracted into FMA in the x86-64-v3 build of the loop (depthwise_rows). */
#pragma GCC optimize("fp-contract=fast")

enum { TAPS_PER_PASS = 64 }; /* taps whose offsets one pass over the channels holds */
/* Below this many products (taps x channels x output positions) the loop stays on one thread. */
static const double PARALLEL_MIN_PRODUCTS = 1 << 17;

/* y[c] = start[c] + sum over the n taps of x[x_at[t] + c] * w[w_at[t] + c], four then one
 * 8-channel block at a time in registers (one store per block, not one per tap), then the rest
 * one by one. Each product is added (fused where the build has FMA), taps in the order given. */
/* Always inlined: called from each build below, it must be compiled for that build's ISA. start
 * may be y itself (a later pass), so y is not restrict. */
static inline __attribute__((always_inline)) void taps_sum(float *y, const float *start,
                                                           const float *x, const float *w,
                                                           const long *x_at, const long *w_at,
                                                           int n, int c) {
  int i = 0;
  for (; i + 32 <= c; i += 32) {
    f32x8 a0, a1, a2, a3, p, q;
    LOAD8(a0, start + i), LOAD8(a1, start + i + 8), LOAD8(a2, start + i + 16);
    LOAD8(a3, start + i + 24);
    for (int t = 0; t < n; t++) {
      const float *xp = x + x_at[t] + i, *wp = w + w_at[t] + i;
      LOAD8(p, xp), LOAD8(q, wp), a0 += p * q;
      LOAD8(p, xp + 8), LOAD8(q, wp + 8), a1 += p * q;
      LOAD8(p, xp + 16), LOAD8(q, wp + 16), a2 += p * q;
      LOAD8(p, xp + 24), LOAD8(q, wp + 24), a3 += p * q;
    }
    memcpy(y + i, &a0, sizeof a0), memcpy(y + i + 8, &a1, sizeof a1);
    memcpy(y + i + 16, &a2, sizeof a2), memcpy(y + i + 24, &a3, sizeof a3);
  }
  for (; i + 8 <= c; i += 8) {
    f32x8 a, p, q;
    LOAD8(a, start + i);
    for (int t = 0; t < n; t++) LOAD8(p, x + x_at[t] + i), LOAD8(q, w + w_at[t] + i), a += p * q;
    memcpy(y + i, &a, sizeof a);
  }
  for (; i < c; i++) {
    float a = start[i];
    for (int t = 0; t < n; t++) a += x[x_at[t] + i] * w[w_at[t] + i];
    y[i] = a;
  }
}


/* One output position the general way: the offsets of the taps that land inside the input (the
 * others read zero padding and add nothing), then their sum over the channels, TAPS_PER_PASS taps
 * per pass (a later pass starts from the earlier passes' sum). */
static inline __attribute__((always_inline)) void
position_sum(const conv_window *g, const float *x, const float *rows, const float *bias,
             float *acc, int b, int od, int oh, int ow) {
  const int c = g->c;
  const long in_plane = (long)g->in[1] * g->in[2];
  long x_at[TAPS_PER_PASS], w_at[TAPS_PER_PASS];
  static const float zeros[64];
  const float *start = bias;
  if (!start) {
    if (c <= 64) start = zeros;
    else memset(acc, 0, sizeof(float) * (size_t)c), start = acc;
  }
  int n = 0;
  long tap = 0;
  for (int kd = 0; kd < g->k[0]; kd++) {
    int id = od * g->stride[0] - g->lo[0] + kd * g->dil[0];
    bool d_in = id >= 0 && id < g->in[0];
    for (int kh = 0; kh < g->k[1]; kh++) {
      int ih = oh * g->stride[1] - g->lo[1] + kh * g->dil[1];
      bool h_in = d_in && ih >= 0 && ih < g->in[1];
      for (int kw = 0; kw < g->k[2]; kw++, tap++) {
        int iw = ow * g->stride[2] - g->lo[2] + kw * g->dil[2];
        if (!h_in || iw < 0 || iw >= g->in[2]) continue;
        x_at[n] = (((long)b * g->in[0] + id) * in_plane + (long)ih * g->in[2] + iw) * c;
        w_at[n] = tap * c;
        if (++n == TAPS_PER_PASS) {
          taps_sum(acc, start, x, rows, x_at, w_at, n, c);
          start = acc, n = 0;
        }
      }
    }
  }
  if (n || start != acc) taps_sum(acc, start, x, rows, x_at, w_at, n, c);
}

/* OW_BLOCK neighbouring outputs of one row whose taps all lie inside the input along w (the
 * row's in-range depth and height taps: x rows at x_row[i], their first tap's weight row
 * w_row[i]): per 8 channels, each tap's weights are loaded once for all OW_BLOCK outputs, whose
 * sums stay in registers. The same products, added alike and in the same order, as
 * position_sum: one load per product instead of two. */
enum { OW_BLOCK = 8, SLIDE_MAX_K = 5, SLIDE_MAX_OW = 8 };
static inline __attribute__((always_inline)) void
interior_block(const conv_window *g, const float *x, const float *rows, const float *bias,
               float *acc, const long *x_row, const long *w_row, int n_rows, int ow) {
  const int c = g->c;
  const long step = (long)g->stride[2] * c;
  for (int cb = 0; cb < c; cb += 8) {
    f32x8 sum[OW_BLOCK], wv, p;
    for (int j = 0; j < OW_BLOCK; j++) {
      sum[j] = (f32x8){0};
      if (bias) LOAD8(sum[j], bias + cb);
    }
    for (int i = 0; i < n_rows; i++)
      for (int kw = 0; kw < g->k[2]; kw++) {
        long iw = ow * g->stride[2] - g->lo[2] + kw * g->dil[2];
        const float *xp = x + x_row[i] + iw * c + cb;
        LOAD8(wv, rows + w_row[i] + (long)kw * c + cb);
#pragma GCC unroll 8
        for (int j = 0; j < OW_BLOCK; j++) LOAD8(p, xp + j * step), sum[j] += p * wv;
      }
    for (int j = 0; j < OW_BLOCK; j++) STORE8(acc + (long)j * c + cb, sum[j]);
  }
}

/* The same sums for a kernel K wide at stride 1 and no dilation along w, OW outputs at a time
 * (all of whose taps lie inside the input along w): per 8 channels, the row's K weight vectors
 * stay in registers and each input vector of the row is loaded once and multiplied into every
 * output of the block it reaches. Output o takes input column o + kw as its kw-th tap, so
 * walking the columns in order adds each output's taps in row-major order, as position_sum does.
 * About one load per three products where interior_block needs one per product; this processor
 * loads one 8-float vector a cycle (PP-OCR's 240-channel 5x5 layers: 0.63 -> 0.46 ms a layer on
 * one core, its 3x3 ones 0.38 -> 0.19 ms; the same bits). K and OW are constants at each call,
 * so the loops unroll into registers: OW accumulators, K weights, an input and a product fit
 * AVX2's sixteen. */
CPU_INLINE void slide_block(const int K, const int OW, const float *x, const float *rows,
                             const float *bias, float *acc, const long *x_row,
                             const long *w_row, int n_rows, int col0, int c) {
  for (int cb = 0; cb < c; cb += 8) {
    f32x8 sum[SLIDE_MAX_OW];
#pragma GCC unroll 8
    for (int o = 0; o < OW; o++) {
      sum[o] = (f32x8){0};
      if (bias) LOAD8(sum[o], bias + cb);
    }
    for (int i = 0; i < n_rows; i++) {
      f32x8 wv[SLIDE_MAX_K];
#pragma GCC unroll 8
      for (int kw = 0; kw < K; kw++) LOAD8(wv[kw], rows + w_row[i] + (long)kw * c + cb);
      const float *xp = x + x_row[i] + (long)col0 * c + cb;
#pragma GCC unroll 16
      for (int j = 0; j < OW + K - 1; j++) {
        f32x8 xv;
        LOAD8(xv, xp + (long)j * c);
#pragma GCC unroll 8
        for (int kw = 0; kw < K; kw++)
          if (j - kw >= 0 && j - kw < OW) sum[j - kw] += xv * wv[kw];
      }
    }
#pragma GCC unroll 8
    for (int o = 0; o < OW; o++) STORE8(acc + (long)o * c + cb, sum[o]);
  }
}

/* Outputs [lo, hi) of one row, all clear of the padding along w, OW at a time through
 * slide_block; a last partial block is taken as the OW outputs ending at hi (recomputing some,
 * to the same bits). hi - lo >= OW. */
CPU_INLINE void slide_span(const int K, const int OW, const float *x, const float *rows,
                            const float *bias, float *out, const long *x_row, const long *w_row,
                            int n_rows, int lo, int hi, int pad, int c) {
  for (int ow = lo; ow < hi; ow += OW) {
    int at = ow + OW <= hi ? ow : hi - OW;
    slide_block(K, OW, x, rows, bias, out + (long)at * c, x_row, w_row, n_rows, at - pad, c);
  }
}

/* Output rows (one per batch item, output depth and output height) [first, last). With channels
 * in whole 8-float vectors, the outputs whose taps all lie inside the input along w go through
 * slide_block (kernels 3 and 5 wide at stride 1 along w) or OW_BLOCK at a time through
 * interior_block; the rest, and every other geometry, take position_sum. */
CPU_CLONES_FMA
static void depthwise_rows(const conv_window *g, const float *x, const float *rows,
                           const float *bias, const mx_host_tensor *out_view, long first,
                           long last) {
  float *y = (float *)out_view->data;
  const int c = g->c;
  const long in_plane = (long)g->in[1] * g->in[2], out_plane = (long)g->out[1] * g->out[2];
  /* outputs [w_lo, w_hi) read no padding along w */
  int span = (g->k[2] - 1) * g->dil[2], w_lo = 0, w_hi = g->out[2];
  while (w_lo < w_hi && w_lo * g->stride[2] - g->lo[2] < 0) w_lo++;
  while (w_hi > w_lo && (w_hi - 1) * g->stride[2] - g->lo[2] + span >= g->in[2]) w_hi--;
  bool blocks = c % 8 == 0 && g->k[0] * g->k[1] <= TAPS_PER_PASS;
  /* slide_block's widths: K = 3 takes 8 outputs at a time, K = 5 six (registers) */
  const int slide_ow = g->k[2] == 3 ? 8 : 6;
  bool slides = blocks && g->stride[2] == 1 && g->dil[2] == 1 &&
                (g->k[2] == 3 || g->k[2] == 5) && w_hi - w_lo >= slide_ow;
  long x_row[TAPS_PER_PASS], w_row[TAPS_PER_PASS];
  for (long r = first; r < last; r++) {
    int oh = (int)(r % g->out[1]), od = (int)(r / g->out[1] % g->out[0]);
    int b = (int)(r / g->out[1] / g->out[0]);
    float *out = y + (((long)b * g->out[0] + od) * out_plane + (long)oh * g->out[2]) * c;
    int n_rows = 0;
    for (int kd = 0; blocks && kd < g->k[0]; kd++) {
      int id = od * g->stride[0] - g->lo[0] + kd * g->dil[0];
      for (int kh = 0; kh < g->k[1]; kh++) {
        int ih = oh * g->stride[1] - g->lo[1] + kh * g->dil[1];
        if (id < 0 || id >= g->in[0] || ih < 0 || ih >= g->in[1]) continue;
        x_row[n_rows] = (((long)b * g->in[0] + id) * in_plane + (long)ih * g->in[2]) * c;
        w_row[n_rows++] = ((long)kd * g->k[1] + kh) * g->k[2] * c;
      }
    }
    int ow = 0;
    if (slides) {
      for (; ow < w_lo; ow++)
        position_sum(g, x, rows, bias, out + (long)ow * c, b, od, oh, ow);
      if (g->k[2] == 3)
        slide_span(3, 8, x, rows, bias, out, x_row, w_row, n_rows, w_lo, w_hi, g->lo[2], c);
      else
        slide_span(5, 6, x, rows, bias, out, x_row, w_row, n_rows, w_lo, w_hi, g->lo[2], c);
      ow = w_hi;
    }
    for (; ow < g->out[2]; ow++) {
      if (blocks && ow >= w_lo && ow + OW_BLOCK <= w_hi) {
        interior_block(g, x, rows, bias, out + (long)ow * c, x_row, w_row, n_rows, ow);
        ow += OW_BLOCK - 1;
      } else {
        position_sum(g, x, rows, bias, out + (long)ow * c, b, od, oh, ow);
      }
    }
    if (out_view->epilogue)
      out_view->epilogue(out_view->epilogue_params, out, (long)g->out[2] * c);
  }
}

typedef struct depthwise_job {
  const conv_window *g;
  const float *x, *rows, *bias;
  const mx_host_tensor *out;
  long rows_total;
  int parts;
} depthwise_job;

static void depthwise_part(void *arg, int part) {
  const depthwise_job *j = arg;
  long first, last;
  cpu_workers_range(j->rows_total, j->parts, part, &first, &last);
  if (first < last) depthwise_rows(j->g, j->x, j->rows, j->bias, j->out, first, last);
}

/* Output rows are split over the cores (cpu/workers.c) once there is enough work. */
static void depthwise_loop(const mx_host_tensor *in, int n_in, const mx_host_tensor *out,
                           const void *params) {
  const conv_window *g = params;
  depthwise_job j = {g, in[0].data, in[1].data, n_in > 2 ? in[2].data : NULL, out,
                     (long)g->n * g->out[0] * g->out[1], 1};
  if (j.rows_total == 0) return;
  long taps = (long)g->k[0] * g->k[1] * g->k[2];
  double work = (double)j.rows_total * g->out[2] * taps * g->c;
  if (work >= PARALLEL_MIN_PRODUCTS) j.parts = cpu_workers_parts();
  if (j.parts > j.rows_total) j.parts = (int)j.rows_total;
  cpu_workers_run(depthwise_part, &j, j.parts);
}

int cpu_conv_depthwise_loop(tr_ctx *t, mx_array x, mx_array rows, mx_array bias,
                         const conv_window *g, mx_array *y) {
  mx_array ins[3] = {x, rows, bias};
  int shape[MX_MAX_RANK], nd = mx_ndim(x) - 2;
  shape[0] = g->n, shape[nd + 1] = g->c;
  for (int i = 0; i < nd; i++) shape[1 + i] = g->out[3 - nd + i];
  return mx_host_kernel(t->mx, y, "depthwise convolution", depthwise_loop, g, sizeof *g, ins,
                        bias ? 3 : 2, shape, nd + 2, MX_FLOAT32, MX_HOST_TAKES_EPILOGUE);
}
