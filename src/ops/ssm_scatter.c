/*
 * TensorScatter (ai.onnx opset 24): writes `update` into a copy of `past_cache` along one
 * non-batch axis at a per-batch offset (a KV-cache append). The offsets (write_indices, one int64
 * per batch; offset 0 when absent) are read on the host and the write becomes one MLX
 * slice_update per run of batches sharing an offset, so the write is always in bounds by
 * construction. Linear mode requires 0 <= index <= capacity - length: constant indices are
 * checked at claim time, live ones on every run, where a violation is an error naming the node
 * (never an out-of-bounds write). Circular mode starts at the Euclidean index mod capacity,
 * computed without overflow (INT64_MIN works), and a write running past the end wraps to 0 as a
 * second slice_update. Reading live indices on the host makes the row eager; the registry's
 * compile class is per row, so nodes without indices or with constant ones are eager too.
 */
#include "ops/families.h"
#include "plan/translate.h"

#include <stdlib.h>
#include <string.h>

enum { TS_LINEAR, TS_CIRCULAR, TS_UNKNOWN };

static int ts_mode(const ir_node *n) {
  const char *m = ir_attr_string(n, "mode", "linear");
  return strcmp(m, "linear") == 0 ? TS_LINEAR : strcmp(m, "circular") == 0 ? TS_CIRCULAR
                                                                            : TS_UNKNOWN;
}

/* index mod capacity in [0, capacity), for any int64 (C's % truncates toward zero and never
 * overflows for a positive divisor). */
static int64_t euclid_mod(int64_t index, int64_t capacity) {
  int64_t m = index % capacity;
  return m < 0 ? m + capacity : m;
}

static bool ts_linear_index_ok(int64_t index, int64_t capacity, int64_t length) {
  return index >= 0 && index <= capacity - length;
}

/* Writes update[b0:b1] (all of its axis length) at `start` into *out, wrapping past the end. */
static int ts_write(tr_ctx *t, mx_array *out, mx_array upd, int ax, int b0, int b1, int start,
                    int capacity) {
  int rank = mx_ndim(upd), length = mx_dim(upd, ax);
  int first = length < capacity - start ? length : capacity - start;
  for (int part = 0; part < 2; part++) {
    int from = part ? first : 0, to = part ? length : first, at = part ? 0 : start;
    if (to <= from) continue;
    int ustart[MX_MAX_RANK], ustop[MX_MAX_RANK], cstart[MX_MAX_RANK], cstop[MX_MAX_RANK],
        strides[MX_MAX_RANK];
    for (int i = 0; i < rank; i++) {
      ustart[i] = cstart[i] = 0;
      ustop[i] = cstop[i] = mx_dim(upd, i);
      strides[i] = 1;
    }
    ustart[0] = cstart[0] = b0;
    ustop[0] = cstop[0] = b1;
    ustart[ax] = from;
    ustop[ax] = to;
    cstart[ax] = at;
    cstop[ax] = at + (to - from);
    mx_array piece = upd;
    if (b0 != 0 || b1 != mx_dim(upd, 0) || from != 0 || to != length)
      TR_TRY(mx_slice(t->mx, &piece, upd, ustart, ustop, strides, rank));
    TR_TRY(mx_slice_update(t->mx, out, *out, piece, cstart, cstop, strides, rank));
  }
  return MX_OK;
}

static bool claim_scatter(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  if (n->n_inputs < 2 || n->n_inputs > 3 || n->n_outputs != 1)
    return op_decline(why, "TensorScatter takes 2-3 inputs and 1 output (has %d and %d)",
                      n->n_inputs, n->n_outputs);
  const ir_value *cache = ir_input(g, n, 0), *upd = ir_input(g, n, 1), *idx = ir_input(g, n, 2);
  const ir_value *out = ir_output(g, n, 0);
  if (!cache || !upd || !out) return op_decline(why, "TensorScatter needs past_cache and update");
  int mode = ts_mode(n);
  if (mode == TS_UNKNOWN)
    return op_decline(why, "mode '%s' is not 'linear' or 'circular'",
                      ir_attr_string(n, "mode", ""));
  if (upd->elem_type != cache->elem_type ||
      (out->elem_type != IR_UNDEFINED && out->elem_type != cache->elem_type))
    return op_decline(why, "past_cache, update and present_cache must share one element type");
  if (cache->rank >= 0 && cache->rank < 2)
    return op_decline(why, "past_cache must have rank >= 2 (batch plus the written axis)");
  if (cache->rank >= 0 && upd->rank >= 0 && cache->rank != upd->rank)
    return op_decline(why, "update has rank %d, past_cache rank %d: they must match", upd->rank,
                      cache->rank);
  int64_t axis = ir_attr_int(n, "axis", -2);
  int rank = cache->rank >= 0 ? cache->rank : upd->rank, ax = -1;
  if (rank >= 0) {
    if (axis < -rank || axis >= rank)
      return op_decline(why, "axis %lld is out of range for rank %d", (long long)axis, rank);
    ax = (int)(axis < 0 ? axis + rank : axis);
    if (ax == 0)
      return op_decline(why, "axis %lld is the batch axis; TensorScatter writes along a "
                             "non-batch axis", (long long)axis);
  } else if (axis == 0) {
    return op_decline(why, "axis 0 is the batch axis; TensorScatter writes along a non-batch "
                           "axis");
  }
  int64_t capacity = -1, length = -1;
  if (cache->rank >= 0 && upd->rank == cache->rank) {
    for (int i = 0; i < rank; i++) {
      int64_t c = cache->dims[i], u = upd->dims[i];
      if (i != ax && c >= 0 && u >= 0 && c != u)
        return op_decline(why, "update dim %d is %lld, past_cache's is %lld: only the axis-%d "
                               "lengths may differ", i, (long long)u, (long long)c, ax);
    }
    capacity = cache->dims[ax];
    length = upd->dims[ax];
    if (capacity >= 0 && length > capacity)
      return op_decline(why, "update length %lld exceeds the cache length %lld on axis %d",
                        (long long)length, (long long)capacity, ax);
  }
  if (idx) {
    if (idx->elem_type != IR_INT64)
      return op_decline(why, "write_indices must be int64 (is %s)", ir_elem_name(idx->elem_type));
    if (idx->rank >= 0 && idx->rank != 1)
      return op_decline(why, "write_indices must have rank 1 (one entry per batch), has rank %d",
                        idx->rank);
    int64_t batch = cache->rank > 0 ? cache->dims[0] : -1;
    if (idx->rank == 1 && idx->dims[0] >= 0 && batch >= 0 && idx->dims[0] != batch)
      return op_decline(why, "write_indices has %lld entries for a batch of %lld",
                        (long long)idx->dims[0], (long long)batch);
    int64_t *vals = NULL;
    size_t count = 0;
    if (mode == TS_LINEAR && capacity >= 0 && length >= 0 && ir_const_ints(idx, &vals, &count)) {
      for (size_t b = 0; b < count; b++)
        if (!ts_linear_index_ok(vals[b], capacity, length)) {
          long long bad = (long long)vals[b];
          free(vals);
          return op_decline(why, "constant write_indices[%zu] = %lld is out of range: linear "
                                 "mode needs 0 <= index <= %lld (capacity %lld - length %lld)",
                            b, bad, (long long)(capacity - length), (long long)capacity,
                            (long long)length);
        }
    }
    free(vals);
  }
  return true;
}

static int translate_scatter(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array cache = tr_in(t, 0), upd = tr_in(t, 1), out = cache;
  int rank = mx_ndim(cache), ax;
  TR_TRY(tr_axis(t, ir_attr_int(n, "axis", -2), rank, &ax));
  if (ax == 0 || rank < 2) return tr_fail(t, "axis must name a non-batch axis");
  if (mx_ndim(upd) != rank) return tr_fail(t, "update and past_cache ranks differ");
  for (int i = 0; i < rank; i++)
    if (i != ax && mx_dim(upd, i) != mx_dim(cache, i))
      return tr_fail(t, "update dim %d is %d, past_cache's is %d", i, mx_dim(upd, i),
                     mx_dim(cache, i));
  if (mx_dtype_of(upd) != mx_dtype_of(cache))
    TR_TRY(mx_astype(t->mx, &upd, upd, mx_dtype_of(cache)));
  int capacity = mx_dim(cache, ax), length = mx_dim(upd, ax), batch = mx_dim(cache, 0);
  if (length > capacity)
    return tr_fail(t, "update length %d exceeds the cache length %d", length, capacity);
  if (length == 0 || batch == 0) return tr_out(t, 0, cache);
  if (!tr_in(t, 2)) {
    TR_TRY(ts_write(t, &out, upd, ax, 0, batch, 0, capacity));
    return tr_out(t, 0, out);
  }
  int64_t *vals = malloc(sizeof(int64_t) * (size_t)batch);
  int *starts = malloc(sizeof(int) * (size_t)batch);
  size_t count = 0;
  int rc = !vals || !starts ? tr_fail(t, "out of memory") : MX_OK;
  if (rc == MX_OK) rc = tr_host_ints(t, 2, vals, (size_t)batch, &count);
  if (rc == MX_OK && count != (size_t)batch)
    rc = tr_fail(t, "write_indices has %zu entries for a batch of %d", count, batch);
  bool circular = ts_mode(n) == TS_CIRCULAR;
  for (int b = 0; rc == MX_OK && b < batch; b++) {
    if (circular) {
      starts[b] = (int)euclid_mod(vals[b], capacity);
    } else if (!ts_linear_index_ok(vals[b], capacity, length)) {
      rc = tr_fail(t, "write_indices[%d] = %lld is out of range: linear mode needs 0 <= index "
                      "<= %d (capacity %d - update length %d)", b, (long long)vals[b],
                   capacity - length, capacity, length);
    } else {
      starts[b] = (int)vals[b];
    }
  }
  /* One write per run of consecutive batches sharing a start (all of them, typically). */
  for (int b0 = 0, b1; rc == MX_OK && b0 < batch; b0 = b1) {
    for (b1 = b0 + 1; b1 < batch && starts[b1] == starts[b0];) b1++;
    rc = ts_write(t, &out, upd, ax, b0, b1, starts[b0], capacity);
  }
  free(vals);
  free(starts);
  if (rc != MX_OK) return rc;
  return tr_out(t, 0, out);
}

/* Without write_indices, or with constant ones (validated at claim time), the offsets are fixed:
 * the node compiles keyed on shape. Only live indices need the host every run. */
static op_compile_class scatter_node_class(const ir_graph *g, const ir_node *n) {
  return !ir_has_input(n, 2) || op_input_is_const(g, n, 2) ? OP_SHAPE_KEYED : OP_EAGER;
}

const op_row ops_ssm_scatter_rows[] = {
    {"", "TensorScatter", 24, 24, claim_scatter, translate_scatter, OP_EAGER, 0, 0,
     "eager with live write_indices (read and validated on the host each run); keyed on shape "
     "without indices or with constant ones", scatter_node_class},
    OP_ROWS_END,
};
