/*
 * Compress, NonZero and Unique: operators whose output shape depends on their input's values.
 * They read their input on the host every run (bridge host reads in the translator): eager rows
 * that the partitioner puts in a group of their own (OP_HOST_SHAPE), so the nodes around them
 * still compile. Every row takes float64 on the CPU device (OP_F64): the data is only selected
 * or compared, and float64 keys are compared as float64 (never narrowed to float32).
 */
#include "ops/families.h"
#include "plan/translate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every MLX element type, float64 included (claimed on the CPU device only). */
#define ANY_F64 (OP_ALL | OP_F64)

/* --- host-evaluated ops: Compress, NonZero, Unique --------------------------------------- */
/* Evaluates input i cast to dtype and hands back its row-major host data (valid while the
 * returned array lives). Counts a host read unless the input is a constant. */
static int host_view(tr_ctx *t, int i, mx_array a, mx_dtype dtype, const void **data) {
  if (mx_dtype_of(a) != dtype) TR_TRY(mx_astype(t->mx, &a, a, dtype));
  if (i >= 0 && !tr_input_is_constant(t, i)) t->host_reads++;
  return mx_host_data(t->mx, a, data);
}

/* A negative axis counts from the back at every opset, as in ONNX Runtime (Compress-9 too). */
static bool claim_compress(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *x = ir_input(g, n, 0), *c = ir_input(g, n, 1);
  const ir_attr *a = ir_find_attr(n, "axis");
  if (c->elem_type != IR_BOOL) return op_decline(why, "condition must be bool");
  if (c->rank >= 0 && c->rank != 1)
    return op_decline(why, "condition has rank %d; it must be 1-D", c->rank);
  if (a && x->rank >= 0 && (a->i < -x->rank || a->i >= x->rank))
    return op_decline(why, "axis %lld is out of range for rank %d", (long long)a->i, x->rank);
  return true;
}

/* A constant condition is free to read and fixes the output shape: such a node compiles keyed. */
static op_compile_class compress_node_class(const ir_graph *g, const ir_node *n) {
  return op_input_is_const(g, n, 1) ? OP_SHAPE_KEYED : OP_HOST_SHAPE;
}

/* The condition is read on the host (the output's length depends on it); its first
 * min(len, dim) entries select along axis, or over the flattened input without one. */
static int translate_compress(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), c = tr_in(t, 1), pos, y;
  const ir_attr *a = ir_find_attr(n, "axis");
  int axis = 0, flat = -1;
  if (mx_ndim(c) != 1) return tr_fail(t, "condition has rank %d; it must be 1-D", mx_ndim(c));
  if (a) TR_TRY(tr_axis(t, a->i, mx_ndim(x), &axis));
  else TR_TRY(mx_reshape(t->mx, &x, x, &flat, 1));
  const void *data;
  TR_TRY(host_view(t, 1, c, MX_BOOL, &data));
  const bool *cond = data;
  size_t len = mx_size(c), dim = (size_t)mx_dim(x, axis), count = 0;
  int64_t *keep = malloc(sizeof(int64_t) * (dim + 1));
  if (!keep) return tr_fail(t, "out of memory");
  for (size_t i = 0; i < len && i < dim; i++)
    if (cond[i]) keep[count++] = (int64_t)i;
  int rc = tr_ints_array(t, keep, (int)count, MX_INT64, &pos);
  free(keep);
  TR_TRY(rc);
  TR_TRY(mx_take(t->mx, &y, x, pos, axis));
  return tr_out(t, 0, y);
}

/* (rank, count) int64 coordinates of the nonzero elements in row-major order; a scalar counts
 * as shape (1), as in ONNX Runtime. Evaluated on the host. */
static int translate_nonzero(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  mx_array x = tr_in(t, 0), y;
  const void *data;
  TR_TRY(host_view(t, 0, x, MX_BOOL, &data));
  const bool *nz = data;
  int rank = mx_ndim(x), rows = rank ? rank : 1;
  size_t size = mx_size(x), count = 0;
  for (size_t i = 0; i < size; i++) count += nz[i];
  if (count > INT32_MAX) return tr_fail(t, "too many nonzero elements for an MLX shape");
  int64_t *out = malloc(sizeof(int64_t) * ((size_t)rows * count + 1));
  if (!out) return tr_fail(t, "out of memory");
  for (size_t i = 0, c = 0; i < size; i++) {
    if (!nz[i]) continue;
    size_t rest = i;
    for (int d = rank - 1; d >= 0; d--) {
      out[(size_t)d * count + c] = (int64_t)(rest % (size_t)mx_dim(x, d));
      rest /= (size_t)mx_dim(x, d);
    }
    if (rank == 0) out[c] = 0;
    c++;
  }
  int shape[2] = {rows, (int)count};
  int rc = mx_from_data(t->mx, &y, out, shape, 2, MX_INT64);
  free(out);
  TR_TRY(rc);
  return tr_out(t, 0, y);
}

/* Unique compares elements (or slices along axis) by value: float64 as float64, the other floats
 * as float32 (exact for float16/bfloat16); NaN equals NaN and sorts last; signed ints and bool as
 * int64, unsigned as uint64. */
typedef struct unique_keys {
  const void *data;
  mx_dtype kind; /* MX_FLOAT32, MX_FLOAT64, MX_INT64 or MX_UINT64 */
  size_t len;    /* elements per key */
} unique_keys;

/* -1, 0 or 1; NaN equals NaN and sorts after every number. */
static int float_cmp(double p, double q) {
  bool pn = p != p, qn = q != q;
  if (pn || qn) return pn == qn ? 0 : pn ? 1 : -1;
  return p < q ? -1 : p > q ? 1 : 0;
}

static int unique_cmp(const unique_keys *u, int64_t a, int64_t b) {
  for (size_t k = 0; k < u->len; k++) {
    size_t i = (size_t)a * u->len + k, j = (size_t)b * u->len + k;
    if (u->kind == MX_FLOAT32 || u->kind == MX_FLOAT64) {
      int c = u->kind == MX_FLOAT32 /* float -> double is exact, so one comparison serves */
                  ? float_cmp(((const float *)u->data)[i], ((const float *)u->data)[j])
                  : float_cmp(((const double *)u->data)[i], ((const double *)u->data)[j]);
      if (c) return c;
    } else if (u->kind == MX_INT64) {
      int64_t p = ((const int64_t *)u->data)[i], q = ((const int64_t *)u->data)[j];
      if (p != q) return p < q ? -1 : 1;
    } else {
      uint64_t p = ((const uint64_t *)u->data)[i], q = ((const uint64_t *)u->data)[j];
      if (p != q) return p < q ? -1 : 1;
    }
  }
  return 0;
}

/* Stable bottom-up merge sort of positions by key: equal keys keep their input order. */
static void unique_sort(const unique_keys *u, int64_t *pos, int64_t *tmp, size_t n) {
  for (size_t w = 1; w < n; w *= 2) {
    for (size_t lo = 0; lo < n; lo += 2 * w) {
      size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      size_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) tmp[k++] = unique_cmp(u, pos[j], pos[i]) < 0 ? pos[j++] : pos[i++];
      while (i < mid) tmp[k++] = pos[i++];
      while (j < hi) tmp[k++] = pos[j++];
    }
    memcpy(pos, tmp, n * sizeof *pos);
  }
}

static bool claim_unique(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *x = ir_input(g, n, 0);
  const ir_attr *a = ir_find_attr(n, "axis");
  if (a && x->rank >= 0 && (a->i < -x->rank || a->i >= x->rank))
    return op_decline(why, "axis %lld is out of range for rank %d", (long long)a->i, x->rank);
  return true;
}

/* The four outputs as ONNX Runtime gives them: unique values (sorted, or in order of first
 * occurrence with sorted=0), the first occurrence of each, each input entry's position in the
 * output, and the counts. Keys are compared on the host; Y is gathered on the device. */
static int translate_unique(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), keys = x, y;
  const ir_attr *a = ir_find_attr(n, "axis");
  int axis = 0, flat = -1, rank = mx_ndim(x);
  if (a) {
    TR_TRY(tr_axis(t, a->i, rank, &axis));
    int perm[MX_MAX_RANK], k = 1;
    perm[0] = axis;
    for (int i = 0; i < rank; i++)
      if (i != axis) perm[k++] = i;
    TR_TRY(mx_transpose(t->mx, &keys, x, perm, rank));
  } else {
    TR_TRY(mx_reshape(t->mx, &x, x, &flat, 1));
    keys = x;
  }
  mx_dtype dt = mx_dtype_of(x);
  unique_keys u = {NULL, dt == MX_FLOAT64                ? MX_FLOAT64
                         : mx_dtype_is_float(dt)        ? MX_FLOAT32
                         : mx_dtype_is_unsigned_int(dt) ? MX_UINT64
                                                        : MX_INT64,
                   0};
  TR_TRY(host_view(t, 0, keys, u.kind, &u.data));
  size_t n_keys = (size_t)mx_dim(x, axis);
  u.len = n_keys ? mx_size(x) / n_keys : 0;
  int64_t *buf = malloc(sizeof(int64_t) * (5 * n_keys + 1));
  if (!buf) return tr_fail(t, "out of memory");
  int64_t *order = buf, *tmp = buf + n_keys, *first = tmp + n_keys, *counts = first + n_keys,
          *inverse = counts + n_keys;
  for (size_t i = 0; i < n_keys; i++) order[i] = (int64_t)i;
  unique_sort(&u, order, tmp, n_keys);
  size_t groups = 0; /* group g: sorted rank; tmp[pos] = its group */
  for (size_t i = 0; i < n_keys; i++) {
    if (i == 0 || unique_cmp(&u, order[i - 1], order[i]) != 0) {
      first[groups] = order[i];
      counts[groups++] = 0;
    }
    counts[groups - 1]++;
    tmp[order[i]] = (int64_t)groups - 1;
  }
  if (ir_attr_int(n, "sorted", 1) == 0) { /* renumber groups by first occurrence */
    int64_t *slot = order, next = 0; /* order is free now: group -> output slot */
    for (size_t g = 0; g < groups; g++) slot[g] = -1;
    int64_t *f2 = inverse; /* scratch for the reordered firsts and counts, copied back below */
    for (size_t i = 0; i < n_keys; i++)
      if (slot[tmp[i]] < 0) {
        slot[tmp[i]] = next;
        f2[next++] = (int64_t)i;
      }
    int64_t *c2 = malloc(sizeof(int64_t) * (groups + 1));
    if (!c2) {
      free(buf);
      return tr_fail(t, "out of memory");
    }
    for (size_t g = 0; g < groups; g++) c2[slot[g]] = counts[g];
    memcpy(counts, c2, groups * sizeof *counts);
    memcpy(first, f2, groups * sizeof *first);
    free(c2);
    for (size_t i = 0; i < n_keys; i++) inverse[i] = slot[tmp[i]];
  } else {
    memcpy(inverse, tmp, n_keys * sizeof *inverse);
  }
  mx_array pos, out_first, out_inverse, out_counts;
  int rc = tr_ints_array(t, first, (int)groups, MX_INT64, &pos);
  if (rc == MX_OK) rc = mx_take(t->mx, &y, x, pos, axis);
  if (rc == MX_OK) out_first = pos;
  if (rc == MX_OK) rc = tr_ints_array(t, inverse, (int)n_keys, MX_INT64, &out_inverse);
  if (rc == MX_OK) rc = tr_ints_array(t, counts, (int)groups, MX_INT64, &out_counts);
  free(buf);
  TR_TRY(rc);
  TR_TRY(tr_out(t, 0, y));
  TR_TRY(tr_out(t, 1, out_first));
  TR_TRY(tr_out(t, 2, out_inverse));
  return tr_out(t, 3, out_counts);
}

const op_row ops_value_shaped_rows[] = {
    {"", "Compress", 9, 25, claim_compress, translate_compress, OP_HOST_SHAPE, ANY_F64, 0,
     "data-dependent output shape: a computed condition is evaluated on the host every run (a "
     "constant one compiles keyed); a negative axis counts from the back (Compress-9 too, as in "
     "ONNX Runtime)",
     compress_node_class},
    {"", "NonZero", 9, 25, NULL, translate_nonzero, OP_HOST_SHAPE, ANY_F64, 0,
     "data-dependent output shape: evaluated on the host every run"},
    {"", "Unique", 11, 25, claim_unique, translate_unique, OP_HOST_SHAPE, ANY_F64, 0,
     "data-dependent output shape: evaluated on the host every run; NaN equals NaN and sorts "
     "last"},
    OP_ROWS_END,
};
