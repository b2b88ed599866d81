/*
 * Sliding-window attributes (see window.h): one reader for kernel_shape, strides, dilations, pads
 * and auto_pad with ONNX's defaults (stride 1, dilation 1, no padding, NOTSET), and the SAME rule.
 * When auto_pad is set, explicit pads are ignored, as ONNX Runtime ignores them.
 */
#include "ops/window.h"

#include <stdio.h>
#include <string.h>

enum { WIN_MAX_VALUE = 1 << 24 }; /* larger windows, strides or pads are not meaningful here */

/* Reads an INTS attribute of `want` entries, each >= min, into out; absent: fills `fallback`. */
static bool read_ints(const ir_node *n, const char *name, size_t want, int64_t min,
                      int64_t fallback, int64_t *out, bool *present, char *err, size_t len) {
  const ir_attr *a = ir_find_attr(n, name);
  if (present) *present = a != NULL;
  if (!a) {
    for (size_t i = 0; i < want; i++) out[i] = fallback;
    return true;
  }
  if (a->type != IR_ATTR_INTS) {
    snprintf(err, len, "attribute %s must be a list of integers", name);
    return false;
  }
  if (a->count == 0) { /* an empty list means the default, as ONNX Runtime reads it */
    if (present) *present = false;
    for (size_t i = 0; i < want; i++) out[i] = fallback;
    return true;
  }
  if (a->count != want) {
    snprintf(err, len, "attribute %s has %zu values, %zu expected for this rank", name,
             a->count, want);
    return false;
  }
  for (size_t i = 0; i < want; i++) {
    if (a->ints[i] < min || a->ints[i] > WIN_MAX_VALUE) {
      snprintf(err, len, "attribute %s value %lld is outside [%lld, %d]", name,
               (long long)a->ints[i], (long long)min, WIN_MAX_VALUE);
      return false;
    }
    out[i] = a->ints[i];
  }
  return true;
}

bool win_read(const ir_node *n, int nd, win_attrs *w, char *err, size_t len) {
  memset(w, 0, sizeof *w);
  if (nd < 1 || nd > WIN_MAX_DIMS) {
    snprintf(err, len, "%d spatial dimensions are not supported", nd);
    return false;
  }
  w->nd = nd;
  int64_t pads[2 * WIN_MAX_DIMS];
  size_t k = (size_t)nd;
  if (!read_ints(n, "kernel_shape", k, 1, 0, w->kernel, &w->has_kernel, err, len) ||
      !read_ints(n, "strides", k, 1, 1, w->stride, NULL, err, len) ||
      !read_ints(n, "dilations", k, 1, 1, w->dilation, NULL, err, len) ||
      !read_ints(n, "pads", 2 * k, 0, 0, pads, NULL, err, len))
    return false;
  const char *ap = ir_attr_string(n, "auto_pad", "NOTSET");
  if (strcmp(ap, "NOTSET") == 0 || ap[0] == 0) w->auto_pad = WIN_NOTSET;
  else if (strcmp(ap, "SAME_UPPER") == 0) w->auto_pad = WIN_SAME_UPPER;
  else if (strcmp(ap, "SAME_LOWER") == 0) w->auto_pad = WIN_SAME_LOWER;
  else if (strcmp(ap, "VALID") == 0) w->auto_pad = WIN_VALID;
  else {
    snprintf(err, len, "auto_pad '%s' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID", ap);
    return false;
  }
  if (w->auto_pad == WIN_NOTSET)
    for (int i = 0; i < nd; i++) {
      w->pad_lo[i] = pads[i];
      w->pad_hi[i] = pads[nd + i];
    }
  return true;
}

int64_t win_extent(const win_attrs *w, int i) { return (w->kernel[i] - 1) * w->dilation[i] + 1; }

int64_t win_same_pads(int64_t in, int64_t stride, int64_t extent, bool upper, int64_t *lo,
                      int64_t *hi) {
  int64_t out = (in + stride - 1) / stride;
  int64_t total = (out - 1) * stride + extent - in;
  int64_t t = total > 0 ? total : 0;
  *lo = upper ? t / 2 : t - t / 2;
  *hi = t - *lo;
  return total;
}

bool win_same_may_go_negative(const win_attrs *w, const int64_t *in) {
  if (w->auto_pad != WIN_SAME_UPPER && w->auto_pad != WIN_SAME_LOWER) return false;
  for (int i = 0; i < w->nd; i++) {
    int64_t e = win_extent(w, i), lo, hi;
    if (e >= w->stride[i]) continue;
    if (!in || in[i] < 0) return true;
    if (win_same_pads(in[i], w->stride[i], e, true, &lo, &hi) < 0) return true;
  }
  return false;
}

const char *win_fmt(const int64_t *v, int nd, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = 0;
  for (int i = 0; i < nd && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? ", " : "[", (long long)v[i]);
  if (used < len) snprintf(buf + used, len - used, nd ? "]" : "[]");
  return buf;
}
