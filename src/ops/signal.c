/*
 * Signal-processing operators: DFT (opset 17 takes the axis as an attribute, opset 20 as an
 * optional input defaulting to -2), STFT, the window generators HannWindow, HammingWindow and
 * BlackmanWindow (periodic or symmetric, output_datatype) and MelWeightMatrix. Complex values
 * travel as ONNX lays them out, a trailing dimension of 2 (real, imaginary); a real signal has a
 * trailing 1. A DFT packs the pairs into MLX complex64 values and runs MLX's FFT (pocketfft on
 * the CPU, the same library numpy uses, so results match onnx's reference to the last bit in the
 * cases tried), then unpacks real and imaginary parts again. dft_length zero-pads or truncates
 * the signal; onesided keeps the n/2+1 non-redundant bins; inverse scales by 1/n; inverse with
 * onesided is the inverse real FFT (Hermitian input of n/2+1 bins, real output of dft_length,
 * default 2*(bins-1)), as onnx's reference implements it. Float16/bfloat16 compute in float32.
 * Lengths, axes, sizes and the mel parameters are read on the host: free when constant, otherwise
 * the group is eager for that read. Windows and the mel matrix are computed on the host in double
 * precision (following onnx's reference formulas) and cast to output_datatype (float64 kept
 * exactly, on the CPU device where MLX holds it).
 */
#include "ops/families.h"
#include "plan/translate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

enum { DFT_AXIS_ATTR = 0, DFT_AXIS_INPUT = 1 };
enum { WIN_HANN, WIN_HAMMING, WIN_BLACKMAN };
#define MEL_MAX_ENTRIES (1ll << 26)

/* --- shared helpers ---------------------------------------------------------------------- */
/* Eager unless every input a node reads on the host (the bits of `mask`) is absent or constant. */
static op_compile_class host_read_class(const ir_graph *g, const ir_node *n, unsigned mask) {
  for (int i = 0; i < n->n_inputs && i < 32; i++)
    if ((mask >> i) & 1u && ir_has_input(n, i) && !op_input_is_const(g, n, i)) return OP_EAGER;
  return OP_SHAPE_KEYED;
}

/* Reads one integer from input i (a scalar or a one-element tensor). */
static int host_int(tr_ctx *t, int i, int64_t *v) {
  int64_t vals[1];
  size_t count = 0;
  TR_TRY(tr_host_ints(t, i, vals, 1, &count));
  if (count != 1) return tr_fail(t, "input %d must hold one value", i);
  *v = vals[0];
  return MX_OK;
}

/* An array of `count` host doubles (shape given) in dtype: float64 as is, others through
 * float32. */
static int array_from_doubles(tr_ctx *t, const double *vals, size_t count, const int *shape,
                              int ndim, mx_dtype dtype, mx_array *out) {
  if (dtype == MX_FLOAT64) return mx_from_data(t->mx, out, vals, shape, ndim, MX_FLOAT64);
  float *f = malloc(sizeof(float) * (count ? count : 1));
  if (!f) return tr_fail(t, "out of memory");
  for (size_t k = 0; k < count; k++) f[k] = (float)vals[k];
  int rc = mx_from_data(t->mx, out, f, shape, ndim, MX_FLOAT32);
  free(f);
  if (rc == MX_OK && dtype != MX_FLOAT32) rc = mx_astype(t->mx, out, *out, dtype);
  return rc;
}

static bool output_type_ok(const ir_node *n, op_why why) {
  int64_t dt = ir_attr_int(n, "output_datatype", IR_FLOAT);
  if (ir_to_mx_dtype((int)dt) < 0 || dt == IR_BOOL)
    return op_decline(why, "output_datatype %s is not translated (not a numeric type MLX holds)",
                      ir_elem_name((int)dt));
  return true;
}

/* --- the transform ----------------------------------------------------------------------- */
/* The first `count` entries of axis `axis`. */
static int head(tr_ctx *t, mx_array a, int axis, int count, mx_array *out) {
  int rank = mx_ndim(a), start[MX_MAX_RANK] = {0}, stop[MX_MAX_RANK], strides[MX_MAX_RANK];
  for (int i = 0; i < rank; i++) stop[i] = mx_dim(a, i), strides[i] = 1;
  stop[axis] = count;
  return mx_slice(t->mx, out, a, start, stop, strides, rank);
}

/* Transforms axis `axis` of x (float32, trailing dim c = 1 or 2) with n_fft points: kind MX_FFT
 * (the first k_out bins kept), MX_IFFT or MX_IRFFT (real output). The result has the axis resized
 * and a trailing dim of 2 (1 for MX_IRFFT). A real signal's forward transform is a real FFT whose
 * upper bins, where wanted, are the conjugates of the lower ones, as numpy computes it (so the
 * imaginary parts that must vanish do so exactly). */
static int dft_axis(tr_ctx *t, mx_array x, int axis, int64_t n_fft, mx_fft_kind kind,
                    int64_t k_out, mx_array *y) {
  int rank = mx_ndim(x), last = rank - 1;
  int start[MX_MAX_RANK] = {0}, stop[MX_MAX_RANK], strides[MX_MAX_RANK];
  for (int i = 0; i < rank; i++) stop[i] = mx_dim(x, i), strides[i] = 1;
  mx_array re, im = NULL, z, parts[2];
  stop[last] = 1;
  TR_TRY(mx_slice(t->mx, &re, x, start, stop, strides, rank));
  TR_TRY(mx_squeeze(t->mx, &re, re, &last, 1));
  if (mx_dim(x, -1) == 2) {
    start[last] = 1, stop[last] = 2;
    TR_TRY(mx_slice(t->mx, &im, x, start, stop, strides, rank));
    TR_TRY(mx_squeeze(t->mx, &im, im, &last, 1));
  }
  if (kind == MX_FFT && !im) {
    int64_t half = n_fft / 2 + 1;
    TR_TRY(mx_fft(t->mx, &z, re, (int)n_fft, axis, MX_RFFT));
    if (k_out < half) TR_TRY(head(t, z, axis, (int)k_out, &z));
    TR_TRY(mx_real(t->mx, &parts[0], z));
    TR_TRY(mx_imag(t->mx, &parts[1], z));
    if (k_out > half) { /* bins half..k_out-1 mirror bins n-k */
      int count = (int)(k_out - half);
      int32_t *src = malloc(sizeof(int32_t) * (size_t)count);
      if (!src) return tr_fail(t, "out of memory");
      for (int k = 0; k < count; k++) src[k] = (int32_t)(n_fft - (half + k));
      mx_array idx, tail[2];
      int rc = mx_from_data(t->mx, &idx, src, &count, 1, MX_INT32);
      free(src);
      TR_TRY(rc);
      TR_TRY(mx_take(t->mx, &tail[0], parts[0], idx, axis));
      TR_TRY(mx_take(t->mx, &tail[1], parts[1], idx, axis));
      TR_TRY(mx_unary(t->mx, &tail[1], MX_NEG, tail[1]));
      for (int p = 0; p < 2; p++) {
        mx_array both[2] = {parts[p], tail[p]};
        TR_TRY(mx_concatenate(t->mx, &parts[p], both, 2, axis));
      }
    }
  } else {
    TR_TRY(mx_complex(t->mx, &z, re, im));
    TR_TRY(mx_fft(t->mx, &z, z, (int)n_fft, axis, kind));
    if (kind == MX_IRFFT) return mx_expand_dims(t->mx, y, z, &last, 1);
    if (k_out < n_fft) TR_TRY(head(t, z, axis, (int)k_out, &z));
    TR_TRY(mx_real(t->mx, &parts[0], z));
    TR_TRY(mx_imag(t->mx, &parts[1], z));
  }
  TR_TRY(mx_expand_dims(t->mx, &parts[0], parts[0], &last, 1));
  TR_TRY(mx_expand_dims(t->mx, &parts[1], parts[1], &last, 1));
  return mx_concatenate(t->mx, y, parts, 2, last);
}

/* --- DFT --------------------------------------------------------------------------------- */
static bool claim_dft(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  const ir_value *x = ir_input(g, n, 0);
  if (x->rank >= 0 && x->rank < 2)
    return op_decline(why, "input has rank %d; DFT needs [batch, ..., 1 or 2]", x->rank);
  if (x->rank > 0 && x->dims[x->rank - 1] != IR_DIM_UNKNOWN && x->dims[x->rank - 1] != 1 &&
      x->dims[x->rank - 1] != 2)
    return op_decline(why, "the last dimension is %lld; it must be 1 (real) or 2 (complex)",
                      (long long)x->dims[x->rank - 1]);
  if (r->code == DFT_AXIS_ATTR && x->rank > 0) {
    int64_t axis = ir_attr_int(n, "axis", 1);
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis > x->rank - 2)
      return op_decline(why, "axis %lld is out of range [%d, %d] for rank %d",
                        (long long)ir_attr_int(n, "axis", 1), -x->rank, x->rank - 2, x->rank);
  }
  return true;
}

static int translate_dft(tr_ctx *t, const ir_node *n, const op_row *r) {
  mx_array x = tr_in(t, 0), y;
  int rank = mx_ndim(x);
  if (rank < 2 || (mx_dim(x, -1) != 1 && mx_dim(x, -1) != 2))
    return tr_fail(t, "input must be [batch, ..., 1 or 2]");
  int64_t axis = r->code == DFT_AXIS_ATTR ? ir_attr_int(n, "axis", 1) : -2;
  if (r->code == DFT_AXIS_INPUT && tr_in(t, 2)) TR_TRY(host_int(t, 2, &axis));
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a > rank - 2)
    return tr_fail(t, "axis %lld is out of range for rank %d (the last dim holds re/im)",
                   (long long)axis, rank);
  bool inverse = ir_attr_int(n, "inverse", 0) != 0, onesided = ir_attr_int(n, "onesided", 0);
  int len = mx_dim(x, (int)a);
  int64_t n_fft = inverse && onesided ? 2 * ((int64_t)len - 1) : len;
  if (tr_in(t, 1)) TR_TRY(host_int(t, 1, &n_fft));
  if (n_fft < 1 || n_fft > INT32_MAX) return tr_fail(t, "dft_length %lld must be positive",
                                                      (long long)n_fft);
  mx_fft_kind kind = !inverse ? MX_FFT : onesided ? MX_IRFFT : MX_IFFT;
  int64_t k_out = kind == MX_FFT && onesided ? n_fft / 2 + 1 : n_fft;
  mx_dtype out = tr_out_dtype(t, 0);
  if (mx_dtype_of(x) != MX_FLOAT32) TR_TRY(mx_astype(t->mx, &x, x, MX_FLOAT32));
  TR_TRY(dft_axis(t, x, (int)a, n_fft, kind, k_out, &y));
  if (out != MX_FLOAT32) TR_TRY(mx_astype(t->mx, &y, y, out));
  return tr_out(t, 0, y);
}

static op_compile_class dft_node_class(const ir_graph *g, const ir_node *n) {
  return host_read_class(g, n, 0x6); /* dft_length, axis */
}

/* --- STFT -------------------------------------------------------------------------------- */
static bool claim_stft(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *x = ir_input(g, n, 0);
  if (x->rank >= 0 && x->rank != 3)
    return op_decline(why, "signal has rank %d; STFT needs [batch, length, 1 or 2]", x->rank);
  if (x->rank == 3 && x->dims[2] != IR_DIM_UNKNOWN && x->dims[2] != 1 && x->dims[2] != 2)
    return op_decline(why, "the last dimension is %lld; it must be 1 (real) or 2 (complex)",
                      (long long)x->dims[2]);
  if (!ir_has_input(n, 2) && !ir_has_input(n, 3))
    return op_decline(why, "neither window nor frame_length is given; one is needed to size "
                           "the frames");
  const ir_value *w = ir_input(g, n, 2);
  if (w && w->rank >= 0 && w->rank != 1)
    return op_decline(why, "window has rank %d; it must be 1-D", w->rank);
  return true;
}

static int translate_stft(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), window = tr_in(t, 2), y;
  if (mx_ndim(x) != 3 || (mx_dim(x, 2) != 1 && mx_dim(x, 2) != 2))
    return tr_fail(t, "signal must be [batch, length, 1 or 2]");
  int64_t step, frame = window ? mx_dim(window, 0) : 0;
  TR_TRY(host_int(t, 1, &step));
  if (tr_in(t, 3)) {
    int64_t given;
    TR_TRY(host_int(t, 3, &given));
    if (window && given != frame)
      return tr_fail(t, "frame_length %lld differs from the window's length %lld",
                     (long long)given, (long long)frame);
    frame = given;
  }
  int len = mx_dim(x, 1);
  if (step < 1) return tr_fail(t, "frame_step %lld must be positive", (long long)step);
  if (frame < 1 || frame > len)
    return tr_fail(t, "frame_length %lld must be in [1, %d] (the signal's length)",
                   (long long)frame, len);
  int64_t frames = 1 + (len - frame) / step;
  if (frames * frame > INT32_MAX) return tr_fail(t, "too many frames");
  int32_t *idx = malloc(sizeof(int32_t) * (size_t)(frames * frame));
  if (!idx) return tr_fail(t, "out of memory");
  for (int64_t f = 0; f < frames; f++)
    for (int64_t j = 0; j < frame; j++) idx[f * frame + j] = (int32_t)(f * step + j);
  int n_idx = (int)(frames * frame);
  mx_array positions;
  int rc = mx_from_data(t->mx, &positions, idx, &n_idx, 1, MX_INT32);
  free(idx);
  TR_TRY(rc);
  int c = mx_dim(x, 2);
  int shape[4] = {mx_dim(x, 0), (int)frames, (int)frame, c};
  if (mx_dtype_of(x) != MX_FLOAT32) TR_TRY(mx_astype(t->mx, &x, x, MX_FLOAT32));
  TR_TRY(mx_take(t->mx, &x, x, positions, 1));
  TR_TRY(mx_reshape(t->mx, &x, x, shape, 4));
  if (window) {
    int wshape[4] = {1, 1, (int)frame, 1};
    mx_array w;
    TR_TRY(mx_astype(t->mx, &w, window, MX_FLOAT32));
    TR_TRY(mx_reshape(t->mx, &w, w, wshape, 4));
    TR_TRY(mx_binary(t->mx, &x, MX_MULTIPLY, x, w));
  }
  bool onesided = ir_attr_int(n, "onesided", 1) != 0;
  TR_TRY(dft_axis(t, x, 2, frame, MX_FFT, onesided ? frame / 2 + 1 : frame, &y));
  mx_dtype out = tr_out_dtype(t, 0);
  if (out != MX_FLOAT32) TR_TRY(mx_astype(t->mx, &y, y, out));
  return tr_out(t, 0, y);
}

static op_compile_class stft_node_class(const ir_graph *g, const ir_node *n) {
  return host_read_class(g, n, 0xa); /* frame_step, frame_length */
}

/* --- windows ----------------------------------------------------------------------------- */
static bool claim_window(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *size = ir_input(g, n, 0);
  if (size->rank > 1 || (size->rank == 1 && size->dims[0] != 1 && size->dims[0] != IR_DIM_UNKNOWN))
    return op_decline(why, "size must be a scalar");
  return output_type_ok(n, why);
}

static int translate_window(tr_ctx *t, const ir_node *n, const op_row *r) {
  int64_t size;
  TR_TRY(host_int(t, 0, &size));
  if (size < 0 || size > INT32_MAX) return tr_fail(t, "size %lld is out of range",
                                                   (long long)size);
  double denom = (double)(ir_attr_int(n, "periodic", 1) ? size : size - 1);
  double *vals = malloc(sizeof(double) * (size_t)(size ? size : 1));
  if (!vals) return tr_fail(t, "out of memory");
  for (int64_t i = 0; i < size; i++) {
    double a = 2.0 * M_PI * (double)i / denom;
    switch (r->code) {
      case WIN_HANN: { /* onnx's reference: sin(pi n / N)^2 */
        double s = sin(M_PI * (double)i / denom);
        vals[i] = s * s;
        break;
      }
      case WIN_HAMMING: vals[i] = 25.0 / 46.0 - (21.0 / 46.0) * cos(a); break;
      default: vals[i] = 0.42 - 0.5 * cos(a) + 0.08 * cos(2.0 * a); break;
    }
  }
  int shape = (int)size;
  mx_array y;
  int rc = array_from_doubles(t, vals, (size_t)size, &shape, 1, tr_out_dtype(t, 0), &y);
  free(vals);
  TR_TRY(rc);
  return tr_out(t, 0, y);
}

static op_compile_class window_node_class(const ir_graph *g, const ir_node *n) {
  return host_read_class(g, n, 0x1);
}

/* --- MelWeightMatrix --------------------------------------------------------------------- */
static bool claim_mel(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)g, (void)r;
  return output_type_ok(n, why);
}

/* onnx's reference: num_mel_bins + 2 points evenly spaced on the mel scale between the edges,
 * mapped to DFT bins (floored), then triangles rising and falling between neighbouring points. */
static int translate_mel(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  int64_t bins, dft_length, rate;
  double lo, hi;
  TR_TRY(host_int(t, 0, &bins));
  TR_TRY(host_int(t, 1, &dft_length));
  TR_TRY(host_int(t, 2, &rate));
  TR_TRY(tr_host_scalar(t, 3, &lo));
  TR_TRY(tr_host_scalar(t, 4, &hi));
  if (bins < 1 || dft_length < 1 || rate < 1 || bins > (1 << 20) || dft_length > (1 << 24))
    return tr_fail(t, "num_mel_bins, dft_length and sample_rate must be positive (and sizes "
                   "bounded)");
  int64_t spec = dft_length / 2 + 1;
  if (spec * bins > MEL_MAX_ENTRIES) return tr_fail(t, "the matrix is too large");
  int64_t *points = malloc(sizeof(int64_t) * (size_t)(bins + 2));
  double *out = calloc((size_t)(spec * bins), sizeof(double));
  if (!points || !out) {
    free(points), free(out);
    return tr_fail(t, "out of memory");
  }
  /* The reference computes the mel edges and step in float32 (its inputs' type). */
  float lo_mel = 2595.0f * log10f(1.0f + (float)lo / 700.0f);
  float hi_mel = 2595.0f * log10f(1.0f + (float)hi / 700.0f);
  float step = (hi_mel - lo_mel) / (float)(bins + 2);
  for (int64_t i = 0; i < bins + 2; i++) {
    double mel = (double)i * (double)step + (double)lo_mel;
    double hz = 700.0 * (pow(10.0, mel / 2595.0) - 1.0);
    points[i] = (int64_t)floor((double)(dft_length + 1) * hz / (double)rate);
  }
  int rc = MX_OK;
  for (int64_t i = 0; i < bins && rc == MX_OK; i++) {
    int64_t left = points[i], center = points[i + 1], right = points[i + 2];
    if (left < 0 || right >= spec || center < left || right < center) {
      rc = tr_fail(t, "mel bin %lld spans DFT bins [%lld, %lld], outside [0, %lld)",
                   (long long)i, (long long)left, (long long)right, (long long)spec);
      break;
    }
    if (center == left) out[center * bins + i] = 1.0;
    else
      for (int64_t j = left; j <= center; j++)
        out[j * bins + i] = (double)(j - left) / (double)(center - left);
    for (int64_t j = center; j < right; j++)
      out[j * bins + i] = (double)(right - j) / (double)(right - center);
  }
  mx_array y = NULL;
  int shape[2] = {(int)spec, (int)bins};
  if (rc == MX_OK)
    rc = array_from_doubles(t, out, (size_t)(spec * bins), shape, 2, tr_out_dtype(t, 0), &y);
  free(points), free(out);
  TR_TRY(rc);
  return tr_out(t, 0, y);
}

static op_compile_class mel_node_class(const ir_graph *g, const ir_node *n) {
  return host_read_class(g, n, 0x1f);
}

#define WINDOW_ROW(name, code)                                                                \
  {"", name, 17, 25, claim_window, translate_window, OP_EAGER,                                \
   OP_T(IR_INT32) | OP_T(IR_INT64) | OP_F64, code,                                            \
   "computed on the host in double precision; size read on the host (eager unless "           \
   "constant); periodic, output_datatype (float64 on the CPU device)", window_node_class}

const op_row ops_signal_rows[] = {
    {"", "DFT", 17, 19, claim_dft, translate_dft, OP_EAGER, OP_FLOATS, DFT_AXIS_ATTR,
     "axis attribute; MLX's FFT over complex64; dft_length read on the host (eager unless "
     "constant); real or complex (trailing 2) input, onesided, inverse, inverse+onesided as "
     "the inverse real FFT",
     dft_node_class},
    {"", "DFT", 20, 25, claim_dft, translate_dft, OP_EAGER, OP_FLOATS, DFT_AXIS_INPUT,
     "axis input (default -2); MLX's FFT over complex64; dft_length and axis read on the host "
     "(eager unless constant); onesided, inverse, inverse+onesided as the inverse real FFT",
     dft_node_class},
    {"", "STFT", 17, 25, claim_stft, translate_stft, OP_EAGER, OP_FLOATS, 0,
     "frames gathered, windowed and transformed with MLX's FFT; frame_step and frame_length "
     "read on the host (eager unless constant)",
     stft_node_class},
    WINDOW_ROW("HannWindow", WIN_HANN),
    WINDOW_ROW("HammingWindow", WIN_HAMMING),
    WINDOW_ROW("BlackmanWindow", WIN_BLACKMAN),
    {"", "MelWeightMatrix", 17, 25, claim_mel, translate_mel, OP_EAGER,
     OP_T(IR_INT32) | OP_T(IR_INT64) | OP_F64, 0,
     "computed on the host from the five scalars (eager unless constant), as onnx's reference; "
     "output_datatype (float64 on the CPU device)",
     mel_node_class},
    OP_ROWS_END,
};
