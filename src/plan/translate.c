/*
 * The translation context's helpers (see translate.h): input and output access, host reads of
 * small integer inputs, axis normalisation and error messages.
 */
#include "plan/translate.h"

#include "ops/registry.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool tr_input_is_constant(const tr_ctx *t, int i) {
  return ir_has_input(t->node, i) && t->const_values && t->const_values[t->node->inputs[i]];
}

mx_array tr_in(tr_ctx *t, int i) {
  return ir_has_input(t->node, i) ? t->values[t->node->inputs[i]] : NULL;
}

bool tr_has_out(tr_ctx *t, int i) {
  return i < t->node->n_outputs && t->node->outputs[i] != IR_NONE;
}

int tr_out(tr_ctx *t, int i, mx_array a) {
  if (!tr_has_out(t, i)) return MX_OK; /* an omitted optional output */
  t->values[t->node->outputs[i]] = a;
  return MX_OK;
}

int tr_out_cast(tr_ctx *t, int i, mx_array a) {
  mx_dtype want = tr_out_dtype(t, i);
  if (mx_dtype_of(a) != want) TR_TRY(mx_astype(t->mx, &a, a, want));
  return tr_out(t, i, a);
}

int tr_fail(tr_ctx *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->mx->error, sizeof t->mx->error, fmt, ap);
  va_end(ap);
  return MX_ERR_ARG;
}

/* Input i for a host read: a known input's fixed value (a constant, or a value that keys the
 * variant being traced, which the trace also computes), else the input itself. */
static mx_array host_input(tr_ctx *t, int i) {
  return tr_input_is_constant(t, i) ? t->const_values[t->node->inputs[i]] : tr_in(t, i);
}

int tr_host_ints(tr_ctx *t, int i, int64_t *vals, size_t cap, size_t *count) {
  mx_array a = host_input(t, i);
  if (!a) return tr_fail(t, "input %d is missing", i);
  mx_dtype d = mx_dtype_of(a);
  if (d != MX_INT64 && d != MX_INT32) return tr_fail(t, "input %d must be int32 or int64", i);
  size_t n = mx_size(a);
  if (n > cap) return tr_fail(t, "input %d has %zu values, at most %zu are supported", i, n, cap);
  if (!tr_input_is_constant(t, i)) t->host_reads++;
  const void *data = NULL;
  TR_TRY(mx_host_data(t->mx, a, &data));
  for (size_t k = 0; k < n; k++)
    vals[k] = d == MX_INT64 ? ((const int64_t *)data)[k] : ((const int32_t *)data)[k];
  *count = n;
  return MX_OK;
}

int tr_scalar_value(mx_ctx *ctx, mx_array a, double *value) {
  mx_dtype d = mx_dtype_of(a);
  bool is_float = mx_dtype_is_float(d);
  mx_array c;
  if (d == MX_FLOAT64) /* read as is: float64 exists only on the CPU device */
    return mx_copy_to_host(ctx, a, value, sizeof *value);
  TR_TRY(mx_astype(ctx, &c, a, is_float ? MX_FLOAT32 : MX_INT64));
  if (is_float) {
    float v = 0;
    TR_TRY(mx_copy_to_host(ctx, c, &v, sizeof v));
    *value = v;
  } else {
    int64_t v = 0;
    TR_TRY(mx_copy_to_host(ctx, c, &v, sizeof v));
    *value = (double)v;
  }
  return MX_OK;
}

int tr_host_scalar(tr_ctx *t, int i, double *value) {
  mx_array a = host_input(t, i);
  if (!a) return tr_fail(t, "input %d is missing", i);
  if (mx_size(a) != 1) return tr_fail(t, "input %d must hold one value", i);
  if (!tr_input_is_constant(t, i)) t->host_reads++;
  return tr_scalar_value(t->mx, a, value);
}

mx_dtype tr_out_dtype(tr_ctx *t, int i) {
  const ir_value *v = ir_output(t->g, t->node, i);
  int d = v ? ir_value_mx_dtype(v->elem_type) : -1; /* raw types: their carrier */
  if (d >= 0) return (mx_dtype)d;
  mx_array x = tr_in(t, 0);
  return x ? mx_dtype_of(x) : MX_FLOAT32;
}

int tr_axis(tr_ctx *t, int64_t axis, int rank, int *out) {
  if (axis < -rank || axis >= (rank ? rank : 1))
    return tr_fail(t, "axis %lld is out of range for rank %d", (long long)axis, rank);
  *out = (int)(axis < 0 ? axis + rank : axis);
  return MX_OK;
}

int tr_scalar(tr_ctx *t, mx_array *out, double v, mx_dtype dtype) {
  return mx_scalar(t->mx, out, v, dtype);
}

int tr_check_that(tr_ctx *t, mx_array ok, const char *fmt, ...) {
  tr_checks *c = t->checks;
  if (!c) return tr_fail(t, "run-time checks are not available here");
  if (c->count == c->cap) {
    int cap = c->cap ? c->cap * 2 : 8;
    tr_check *grown = realloc(c->items, sizeof(tr_check) * (size_t)cap);
    if (!grown) return tr_fail(t, "out of memory");
    c->items = grown;
    c->cap = cap;
  }
  /* Flatten first: the bridge reduces over exactly the axes it is given. */
  int flat = -1, axis = 0;
  mx_array all;
  TR_TRY(mx_reshape(t->mx, &ok, ok, &flat, 1));
  TR_TRY(mx_reduce(t->mx, &all, MX_ALL, ok, &axis, 1, false));
  tr_check *k = &c->items[c->count++];
  k->ok = all;
  k->node = t->node;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(k->message, sizeof k->message, fmt, ap);
  va_end(ap);
  return MX_OK;
}

void tr_note_path(tr_ctx *t, tr_path_kind kind, const char *kernel, unsigned folds,
                  const char *note) {
  if (t->path_note) *t->path_note = (tr_node_path){kind, kernel, folds, note};
}

void tr_note_path_of(tr_ctx *t, int node, tr_path_kind kind, const char *kernel, unsigned folds,
                     const char *note) {
  if (t->paths && node >= 0 && node < t->g->n_nodes)
    t->paths[node] = (tr_node_path){kind, kernel, folds, note};
}

const char *tr_path_kind_name(tr_path_kind kind) {
  switch (kind) {
    case TR_PATH_HOST_KERNEL: return "host_kernel";
    case TR_PATH_EPILOGUE: return "epilogue";
    case TR_PATH_INSIDE: return "inside";
    case TR_PATH_MLX_FUSED: return "mlx_fused";
    case TR_PATH_COMPOSED: return "composed";
    case TR_PATH_NONE: break;
  }
  return "none";
}

const char *tr_fold_name(int bit) {
  static const char *const names[TR_FOLD_COUNT] = {"bias", "scale", "mask", "residual",
                                                   "merge_heads"};
  return bit >= 0 && bit < TR_FOLD_COUNT ? names[bit] : "?";
}

mx_array tr_derived(const tr_ctx *t, int slot) {
  return t->derived && slot >= 0 && slot < TR_DERIVED_SLOTS ? t->derived[slot] : NULL;
}

int tr_keep_derived(tr_ctx *t, int slot, mx_array a) {
  if (!t->preparing || !t->derived || slot < 0 || slot >= TR_DERIVED_SLOTS)
    return tr_fail(t, "derived values can only be kept while the plan is built");
  TR_TRY(mx_eval(t->mx, &a, 1));
  t->derived[slot] = a;
  return MX_OK;
}

int tr_slice_axis(tr_ctx *t, mx_array a, int axis, int start, int stop, mx_array *out) {
  int nd = mx_ndim(a), lo[MX_MAX_RANK], hi[MX_MAX_RANK], step[MX_MAX_RANK];
  for (int i = 0; i < nd; i++) lo[i] = 0, hi[i] = mx_dim(a, i), step[i] = 1;
  lo[axis] = start;
  hi[axis] = stop;
  return mx_slice(t->mx, out, a, lo, hi, step, nd);
}

/* --- sequences and optionals -------------------------------------------------------------- */
bool tr_seqs_init(tr_seqs *s, int n_values) {
  s->slots = calloc((size_t)n_values + 1, sizeof *s->slots);
  s->n_values = s->slots ? n_values : 0;
  return s->slots != NULL;
}

void tr_seqs_free(tr_seqs *s) {
  for (int v = 0; s->slots && v < s->n_values; v++) free(s->slots[v].items);
  free(s->slots);
  s->slots = NULL;
  s->n_values = 0;
}

static tr_seq *seq_slot(const tr_ctx *t, int v) {
  return t->seqs && v >= 0 && v < t->seqs->n_values ? &t->seqs->slots[v] : NULL;
}

bool tr_value_ready(const tr_ctx *t, int v) {
  if (t->values[v]) return true;
  tr_seq *s = seq_slot(t, v);
  return s && s->set;
}

int tr_seq_in(tr_ctx *t, int i, const mx_array **items, int *count) {
  tr_seq *s = ir_has_input(t->node, i) ? seq_slot(t, t->node->inputs[i]) : NULL;
  if (!s || !s->set) return tr_fail(t, "input %d holds no sequence here", i);
  *items = s->items;
  *count = s->count;
  return MX_OK;
}

int tr_seq_out(tr_ctx *t, int i, const mx_array *items, int count) {
  if (!tr_has_out(t, i)) return MX_OK;
  tr_seq *s = seq_slot(t, t->node->outputs[i]);
  if (!s) return tr_fail(t, "sequence values are not available here");
  mx_array *copy = malloc(sizeof(mx_array) * ((size_t)count + 1));
  if (!copy) return tr_fail(t, "out of memory");
  for (int k = 0; k < count; k++) copy[k] = items[k];
  free(s->items);
  s->items = copy;
  s->count = count;
  s->set = true;
  return MX_OK;
}

int tr_ints_array(tr_ctx *t, const int64_t *vals, int count, mx_dtype dtype, mx_array *out) {
  TR_TRY(mx_from_data(t->mx, out, vals, &count, 1, MX_INT64));
  return dtype == MX_INT64 ? MX_OK : mx_astype(t->mx, out, *out, dtype);
}
