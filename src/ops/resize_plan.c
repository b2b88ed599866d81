/*
 * Resize's host-side plans (see resize_plan.h). Every function mirrors the corresponding step of
 * ONNX Runtime's CPU kernels (upsamplebase.h, upsample.cc, upsample_aa.h) in float32, operation
 * for operation, so that nearest indices agree exactly and weights to the last bit: coordinate
 * transforms (half_pixel_symmetric and tf_crop_and_resize's single-output case in double, as
 * there), nearest rounding (opset 10's truncate-or-ceil, round half down or up, floor, ceil), the
 * scale-1 identity (not for nearest on 1-D X), the clamping of linear coordinates, Keys' cubic
 * coefficients with exclude_outside renormalising, and Pillow's antialias windows whose taps
 * beyond the input fold into the edge taps unless exclude_outside drops them.
 */
#include "ops/resize_plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- attributes -------------------------------------------------------------------------- */
static int lookup(const char *s, const char *const *names, int count) {
  for (int i = 0; i < count; i++)
    if (names[i] && strcmp(s, names[i]) == 0) return i;
  return -1;
}

bool rs_read(const ir_node *n, bool upsample, int rank, rs_attrs *a, char *err, size_t len) {
  static const char *const modes[] = {"nearest", "linear", "cubic"};
  static const char *const ctms[] = {"half_pixel",         "asymmetric",
                                     "pytorch_half_pixel", "tf_half_pixel_for_nn",
                                     "align_corners",      "tf_crop_and_resize",
                                     "half_pixel_symmetric"};
  static const char *const nearest[] = {NULL, "round_prefer_floor", "round_prefer_ceil", "floor",
                                        "ceil"};
  static const char *const policies[] = {"stretch", "not_larger", "not_smaller"};
  memset(a, 0, sizeof *a);
  int v = a->version = n->since_version;
  a->upsample = upsample;
  a->roi_in = v >= 11 ? 1 : -1;
  a->scales_in = v >= 11 ? 2 : (upsample && v < 9) ? -1 : 1;
  a->sizes_in = v >= 11 ? 3 : -1;
  const char *s = ir_attr_string(n, "mode", "nearest");
  a->mode = lookup(s, modes, v >= 11 ? 3 : 2);
  if (a->mode < 0) {
    snprintf(err, len, "mode '%s' is not one of nearest, linear%s", s, v >= 11 ? ", cubic" : "");
    return false;
  }
  a->ctm = CT_ASYMMETRIC; /* the only transform before opset 11 */
  if (v >= 11) {
    s = ir_attr_string(n, "coordinate_transformation_mode", "half_pixel");
    a->ctm = strcmp(s, "tf_half_pixel_for_nearest") == 0 ? CT_TF_NN : lookup(s, ctms, 7);
    if (a->ctm < 0 || (a->ctm == CT_SYMMETRIC && v < 19)) {
      snprintf(err, len, "coordinate_transformation_mode '%s' is not defined in opset %d", s, v);
      return false;
    }
  }
  a->nearest = NM_SIMPLE; /* opset 10 and Upsample: truncate, or ceil when shrinking */
  if (a->mode == RS_NEAREST && v >= 11) {
    s = ir_attr_string(n, "nearest_mode", "round_prefer_floor");
    a->nearest = lookup(s, nearest, 5);
    if (a->nearest < 0) {
      snprintf(err, len, "nearest_mode '%s' is not round_prefer_floor, round_prefer_ceil, "
               "floor or ceil", s);
      return false;
    }
  }
  a->cubic_a = ir_attr_float(n, "cubic_coeff_a", -0.75f);
  a->extrapolation = ir_attr_float(n, "extrapolation_value", 0.0f);
  a->exclude_outside = v >= 11 && ir_attr_int(n, "exclude_outside", 0) != 0;
  a->antialias = v >= 18 && ir_attr_int(n, "antialias", 0) != 0;
  if (a->antialias && a->mode == RS_NEAREST) {
    snprintf(err, len, "antialias applies to linear and cubic only");
    return false;
  }
  if (a->exclude_outside && a->mode != RS_CUBIC && !(a->antialias && a->mode == RS_LINEAR)) {
    snprintf(err, len, "exclude_outside needs mode cubic (or linear with antialias), as ONNX "
             "Runtime requires");
    return false;
  }
  if (v >= 18) {
    s = ir_attr_string(n, "keep_aspect_ratio_policy", "stretch");
    a->policy = lookup(s, policies, 3);
    if (a->policy < 0) {
      snprintf(err, len, "keep_aspect_ratio_policy '%s' is not stretch, not_larger or "
               "not_smaller", s);
      return false;
    }
    const ir_attr *ax = ir_find_attr(n, "axes");
    if (ax && ax->type == IR_ATTR_INTS && ax->count > 0) {
      if (rank < 0) {
        snprintf(err, len, "axes needs X's rank, which is unknown");
        return false;
      }
      if (ax->count > (size_t)rank) {
        snprintf(err, len, "axes has %zu entries for X of rank %d", ax->count, rank);
        return false;
      }
      bool seen[MX_MAX_RANK] = {false};
      for (size_t i = 0; i < ax->count; i++) {
        int64_t e = ax->ints[i];
        if (e < -rank || e >= rank || seen[e < 0 ? e + rank : e]) {
          snprintf(err, len, "axes entry %lld is out of range or repeated", (long long)e);
          return false;
        }
        if (e < 0 && a->policy != AR_STRETCH) {
          snprintf(err, len, "keep_aspect_ratio_policy with negative axes: ONNX Runtime does "
                   "not apply the policy to them (give non-negative axes)");
          return false;
        }
        a->axes[i] = e < 0 ? e + rank : e;
        seen[a->axes[i]] = true;
      }
      a->naxes = (int)ax->count;
    }
  }
  return true;
}

/* --- host arithmetic, as ONNX Runtime's kernels do it ------------------------------------ */
/* The input coordinate of output position x (upsamplebase.h's transforms, float by float). */
static float original_coord(int ctm, float x, const rs_axis *ax) {
  float s = ax->scale, lr = (float)ax->out, lo = (float)ax->in;
  switch (ctm) {
    case CT_ASYMMETRIC: return x / s;
    case CT_PYTORCH: return lr > 1 ? (x + 0.5f) / s - 0.5f : 0.0f;
    case CT_TF_NN: return (x + 0.5f) / s;
    case CT_ALIGN: return lr == 1 ? 0 : x * (lo - 1) / (lr - 1);
    case CT_CROP:
      if (lr > 1)
        return ax->roi_lo * (lo - 1) + (x * (ax->roi_hi - ax->roi_lo) * (lo - 1)) / (lr - 1);
      return (float)(0.5 * (double)(ax->roi_lo + ax->roi_hi) * (double)(lo - 1));
    case CT_SYMMETRIC: {
      float width = s * lo, adjustment = lr / width, center = lo / 2;
      float offset = center * (1 - adjustment);
      return (float)(offset + ((double)x + 0.5) / s - 0.5);
    }
    default: return ((x + 0.5f) / s) - 0.5f;
  }
}

static int64_t nearest_pixel(int mode, float x, bool shrinking) {
  switch (mode) {
    case NM_SIMPLE: return shrinking ? (int64_t)ceilf(x) : (int64_t)x;
    case NM_PREFER_CEIL: return (int64_t)roundf(x);
    case NM_FLOOR: return (int64_t)floorf(x);
    case NM_CEIL: return (int64_t)ceilf(x);
    default:
      if (x == (float)(int64_t)x + 0.5f) return (int64_t)floorf(x);
      return (int64_t)roundf(x);
  }
}

static void cubic_coeffs(float s, float a, float c[4]) {
  float t = fabsf(s);
  c[0] = ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a;
  c[1] = ((a + 2) * t - (a + 3)) * t * t + 1;
  c[2] = ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1;
  c[3] = ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a;
}

/* Pillow's filters, as ONNX Runtime's antialias path evaluates them. */
static float aa_filter(int mode, float a, float x) {
  if (x < 0.0f) x = -x;
  if (mode == RS_LINEAR) return x < 1.0f ? 1.0f - x : 0.0f;
  if (x < 1.0f) return ((a + 2.0f) * x - (a + 3.0f)) * x * x + 1;
  if (x < 2.0f) return (((x - 5.0f) * x + 8.f) * x - 4.f) * a;
  return 0.0f;
}

/* --- per-axis plans ---------------------------------------------------------------------- */
void rs_plan_free(rs_plan *p) {
  free(p->idx);
  free(p->w);
  free(p->inside);
}

static bool plan_alloc(rs_plan *p, int taps, int out, bool weights) {
  p->taps = taps, p->out = out;
  size_t cells = (size_t)taps * (size_t)(out > 0 ? out : 1);
  p->idx = calloc(cells, sizeof(int32_t));
  p->w = weights ? calloc(cells, sizeof(float)) : NULL;
  p->inside = malloc(sizeof(bool) * (size_t)(out > 0 ? out : 1));
  if (!p->idx || (weights && !p->w) || !p->inside) return false;
  for (int o = 0; o < out; o++) p->inside[o] = true;
  return true;
}

static int clampi(int64_t v, int hi) { return v < 0 ? 0 : v > hi ? hi : (int)v; }

/* The coordinate that linear and cubic start from: the output position itself at scale 1. */
static float start_coord(const rs_attrs *a, const rs_axis *ax, int o) {
  return ax->scale == 1.0f ? (float)o : original_coord(a->ctm, (float)o, ax);
}

static bool outside(float c, int in) { return c < 0 || c > (float)(in - 1); }

static void plan_nearest(const rs_attrs *a, const rs_axis *ax, bool rank1, rs_plan *p) {
  for (int o = 0; o < ax->out; o++) {
    if (ax->scale == 1.0f && !rank1) { /* ONNX Runtime's identity mapping (not for rank 1) */
      p->idx[o] = o < ax->in ? o : ax->in - 1;
      continue;
    }
    float c = original_coord(a->ctm, (float)o, ax);
    if (a->ctm == CT_CROP && outside(c, ax->in)) p->inside[o] = false;
    p->idx[o] = clampi(nearest_pixel(a->nearest, c, ax->scale < 1), ax->in - 1);
  }
}

static void plan_linear(const rs_attrs *a, const rs_axis *ax, rs_plan *p) {
  float top = (float)(ax->in - 1);
  for (int o = 0; o < ax->out; o++) {
    float c = start_coord(a, ax, o);
    if (a->ctm == CT_CROP && outside(c, ax->in)) p->inside[o] = false;
    c = fmaxf(0.0f, fminf(c, top));
    int x1 = (int)c < ax->in - 1 ? (int)c : ax->in - 1;
    int x2 = x1 + 1 < ax->in - 1 ? x1 + 1 : ax->in - 1;
    float d1 = fabsf(c - (float)x1), d2 = fabsf(c - (float)x2);
    if (x1 == x2) d1 = d2 = 0.5f;
    p->idx[o] = x1, p->w[o] = d2;
    p->idx[p->out + o] = x2, p->w[p->out + o] = d1;
  }
}

static void plan_cubic(const rs_attrs *a, const rs_axis *ax, rs_plan *p) {
  for (int o = 0; o < ax->out; o++) {
    float c = start_coord(a, ax, o), k[4], sum = 1;
    if (a->ctm == CT_CROP && outside(c, ax->in)) p->inside[o] = false;
    int64_t base = (int64_t)floorf(c);
    cubic_coeffs(c - floorf(c), a->cubic_a, k);
    if (a->exclude_outside) {
      sum = 0;
      for (int i = 0; i < 4; i++) {
        int64_t at = base - 1 + i;
        if (at < 0 || at >= ax->in) k[i] = 0.0f;
        sum += k[i];
      }
    }
    for (int i = 0; i < 4; i++) {
      p->idx[i * p->out + o] = clampi(base - 1 + i, ax->in - 1);
      p->w[i * p->out + o] = k[i] / sum;
    }
  }
}

/* The antialias filter's support widens by the shrink factor (upsample_aa.h). */
int rs_aa_window(int mode, float rscale) {
  float scale = 1.0f / rscale, size = mode == RS_LINEAR ? 2.0f : 4.0f;
  float support = scale >= 1.0f ? (size * 0.5f) * scale : size * 0.5f;
  return (int)ceilf(support) * 2 + 1;
}

static void plan_antialias(const rs_attrs *a, const rs_axis *ax, rs_plan *p) {
  float scale = 1.0f / ax->scale, size = a->mode == RS_LINEAR ? 2.0f : 4.0f;
  float support = scale >= 1.0f ? (size * 0.5f) * scale : size * 0.5f;
  float inv_scale = scale >= 1.0f ? 1.0f / scale : 1.0f;
  int window = p->taps;
  float w[RS_MAX_TAPS + 1];
  for (int o = 0; o < ax->out; o++) {
    float center = 0.5f + (scale == 1.0f ? (float)o : original_coord(a->ctm, (float)o, ax));
    if (a->ctm == CT_CROP && outside(center - 0.5f, ax->in)) p->inside[o] = false;
    int64_t xmin_real = (int64_t)floorf(center - support + 0.5f);
    int64_t xmax_real = (int64_t)floorf(center + support + 0.5f);
    int64_t xmin_cut = xmin_real > 0 ? xmin_real : 0;
    int64_t xmax_cut = xmax_real < ax->in ? xmax_real : ax->in;
    int64_t xmin = a->exclude_outside ? xmin_cut : xmin_real;
    int64_t count = (a->exclude_outside ? xmax_cut : xmax_real) - xmin;
    float total = 0.0f;
    memset(w, 0, sizeof w);
    for (int64_t x = 0; x < count && x < window; x++) {
      w[x] = aa_filter(a->mode, a->cubic_a, ((float)(x + xmin) - center + 0.5f) * inv_scale);
      total += w[x];
    }
    if (!a->exclude_outside) { /* fold the taps outside the input into the edge taps */
      int64_t neg = xmin < 0 ? -xmin : 0;
      for (int64_t x = 0; x < neg && neg < window; x++) w[neg] += w[x];
      int64_t beyond = count + xmin > ax->in ? count + xmin - ax->in : 0;
      for (int64_t x = count - beyond; x < count && count - beyond - 1 >= 0; x++)
        if (x < window && count - beyond - 1 < window) w[count - beyond - 1] += w[x];
      for (int64_t x = 0; (neg | beyond) > 0 && x < xmax_cut - xmin_cut; x++)
        w[x] = x + neg < window ? w[x + neg] : 0.0f;
    }
    float inv_total = total == 0.0f ? 1.f : 1.0f / total;
    for (int k = 0; k < window; k++) {
      bool used = k < xmax_cut - xmin_cut;
      p->idx[k * p->out + o] = clampi(xmin_cut + (used ? k : 0), ax->in - 1);
      p->w[k * p->out + o] = used ? w[k] * inv_total : 0.0f;
    }
  }
}

/* Whether output position o is exactly input element o: its taps at o weigh 1 in all, the
 * others nothing. */
static bool maps_to_itself(const rs_plan *p, int o) {
  if (!p->w) return p->idx[o] == o;
  float at = 0.0f;
  for (int k = 0; k < p->taps; k++) {
    size_t c = (size_t)k * p->out + o;
    if (p->idx[c] == o) at += p->w[c];
    else if (p->w[c] != 0.0f) return false;
  }
  return at == 1.0f;
}

bool rs_plan_axis(const rs_attrs *a, const rs_axis *ax, bool rank1, rs_plan *p) {
  memset(p, 0, sizeof *p);
  int taps = a->antialias ? rs_aa_window(a->mode, ax->scale)
             : a->mode == RS_NEAREST ? 1 : a->mode == RS_LINEAR ? 2 : 4;
  if (!plan_alloc(p, taps, ax->out, a->mode != RS_NEAREST)) return false;
  if (a->antialias) plan_antialias(a, ax, p);
  else if (a->mode == RS_NEAREST) plan_nearest(a, ax, rank1, p);
  else if (a->mode == RS_LINEAR) plan_linear(a, ax, p);
  else plan_cubic(a, ax, p);
  bool same = ax->out == ax->in;
  for (int o = 0; o < ax->out; o++) {
    p->clipped |= !p->inside[o];
    same = same && maps_to_itself(p, o);
  }
  /* antialias, as ONNX Runtime, copies an axis whose length does not change */
  p->identity = a->antialias ? ax->out == ax->in : same;
  return true;
}

int rs_repeat_factor(const rs_plan *p, int in) {
  if (p->w || p->clipped || in <= 0 || p->out % in) return 0;
  int f = p->out / in;
  for (int o = 0; o < p->out; o++)
    if (p->idx[o] != o / f) return 0;
  return f;
}

/* --- periodic plans ---------------------------------------------------------------------- */
typedef struct rs_tap {
  int idx;
  float w;
} rs_tap;



/* Adds weight w at index idx to a tap set; returns the new count. */
static int tap_add(rs_tap *set, int n, int idx, float w) {
  for (int j = 0; j < n; j++)
    if (set[j].idx == idx) return set[j].w += w, n;
  set[n] = (rs_tap){idx, w};
  return n + 1;
}

/* Drops zero weights and sorts by index; returns the new count. */
static int tap_normalise(rs_tap *set, int n) {
  int m = 0;
  for (int j = 0; j < n; j++)
    if (set[j].w != 0.0f) set[m++] = set[j];
  for (int j = 1; j < m; j++)
    for (int k = j; k > 0 && set[k - 1].idx > set[k].idx; k--) {
      rs_tap tmp = set[k];
      set[k] = set[k - 1], set[k - 1] = tmp;
    }
  return m;
}

static int plan_taps(const rs_plan *p, int o, rs_tap *set) {
  int n = 0;
  for (int k = 0; k < p->taps; k++) {
    size_t c = (size_t)k * p->out + o;
    n = tap_add(set, n, p->idx[c], p->w ? p->w[c] : 1.0f);
  }
  return tap_normalise(set, n);
}

static bool same_taps(const rs_tap *a, int na, const rs_tap *b, int nb) {
  if (na != nb) return false;
  for (int j = 0; j < na; j++)
    if (a[j].idx != b[j].idx || fabsf(a[j].w - b[j].w) > 1e-6f) return false;
  return true;
}

bool rs_find_periodic(const rs_plan *p, int in, rs_periodic *q) {
  if (p->taps > RS_PERIODIC_TAPS || p->clipped || p->out <= 0 || in <= 0) return false;
  int f = 1, g = 1;
  if (p->out >= in) {
    if (p->out % in) return false;
    f = p->out / in;
  } else {
    if (in % p->out) return false;
    g = in / p->out;
  }
  if (f > RS_MAX_PHASES) return false;
  memset(q, 0, sizeof *q);
  q->f = f, q->g = g, q->n = p->out / f;
  int i0 = q->n / 2, lo = 0, hi = 0;
  for (int r = 0; r < f; r++) {
    rs_tap ref[RS_PERIODIC_TAPS], got[RS_PERIODIC_TAPS], want[RS_PERIODIC_TAPS];
    int m = plan_taps(p, i0 * f + r, ref);
    q->count[r] = m;
    for (int j = 0; j < m; j++) {
      q->d[r][j] = ref[j].idx - i0 * g;
      q->w[r][j] = ref[j].w;
      if (-q->d[r][j] > lo) lo = -q->d[r][j];
      int last = (q->n - 1) * g + q->d[r][j] - (in - 1);
      if (last > hi) hi = last;
    }
    for (int i = 0; i < q->n; i++) {
      int ng = plan_taps(p, i * f + r, got), nw = 0;
      for (int j = 0; j < m; j++) nw = tap_add(want, nw, clampi((int64_t)i * g + q->d[r][j],
                                                                in - 1), q->w[r][j]);
      if (!same_taps(got, ng, want, tap_normalise(want, nw))) return false;
    }
  }
  q->lo = lo, q->hi = hi;
  return lo <= in && hi <= in;
}
