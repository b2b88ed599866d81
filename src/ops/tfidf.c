/*
 * TfIdfVectorizer (opset 9) over integer input ([C] or [N, C], int32/int64) with an int64 pool
 * (pool_strings is declined: strings cannot cross into MLX). The pool is static, so counting is
 * built from comparisons: for every n-gram length n in [min_gram_length, max_gram_length] and
 * every skip distance d (1 to max_skip_count + 1; unigrams only at d = 1, as they do not depend
 * on d), the n shifted windows x[:, k*d : k*d + C - (n-1)*d] are compared with the pool's k-th
 * items ([N, L, P_n]), the matches ANDed over k and summed over the windows: the count of each
 * pool n-gram per row. Counts are scatter-added (TF, TFIDF: times the pool n-gram's weight) into
 * Y [N, max(ngram_indexes) + 1] at the n-gram's ngram_indexes entry; IDF gives the output
 * coordinate's weight (or 1) where the count is positive. Weights belong to pool n-grams (as in
 * ONNX Runtime and the spec; onnx's reference indexes them by output coordinate). Pools ONNX
 * Runtime rejects (duplicate n-grams, inconsistent ngram_counts or weights) are declined, and so
 * is IDF with weights where several n-grams share an output coordinate.
 */
#include "ops/families.h"
#include "plan/translate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TF_TF, TF_IDF, TF_TFIDF };
enum { TF_MAX_OUTPUT = 1 << 26 }; /* output coordinates; larger vocabularies are declined */

/* The attributes, checked once by both the claim and the translator. */
typedef struct tf_spec {
  int mode;
  int64_t min_len, max_len, max_skip;
  const int64_t *pool, *counts, *indexes;
  size_t pool_len, n_counts, n_indexes;
  const float *weights; /* NULL: all ones */
  int64_t output_size;  /* max(ngram_indexes) + 1 */
} tf_spec;

static const int64_t *ints_attr(const ir_node *n, const char *name, size_t *count) {
  const ir_attr *a = ir_find_attr(n, name);
  *count = a && a->type == IR_ATTR_INTS ? a->count : 0;
  return *count ? a->ints : NULL;
}

/* The pool range [*start, *end) of the n-grams of length len (1-based); false if none. */
static bool tf_range(const tf_spec *s, int64_t len, int64_t *start, int64_t *end) {
  if (len < 1 || (size_t)len > s->n_counts) return false;
  *start = s->counts[len - 1];
  *end = (size_t)len < s->n_counts ? s->counts[len] : (int64_t)s->pool_len;
  return *end > *start;
}

/* The lengths whose n-grams are counted: [min_len, min(max_len, len(ngram_counts))]. */
static int64_t tf_last_len(const tf_spec *s) {
  return s->max_len < (int64_t)s->n_counts ? s->max_len : (int64_t)s->n_counts;
}

/* One n-gram of the pool, for sorting (qsort's comparator sees only its two elements). */
typedef struct tf_gram {
  const int64_t *items;
  int64_t len;
} tf_gram;

static int tf_cmp_gram(const void *a, const void *b) {
  const tf_gram *x = a, *y = b;
  for (int64_t k = 0; k < x->len; k++)
    if (x->items[k] != y->items[k]) return x->items[k] < y->items[k] ? -1 : 1;
  return 0;
}

static int tf_cmp_int(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* True (with a reason in err) when two n-grams of one counted length are equal. */
static bool tf_has_duplicates(const tf_spec *s, char *err, size_t len) {
  for (int64_t g = s->min_len; g <= tf_last_len(s); g++) {
    int64_t start, end;
    if (!tf_range(s, g, &start, &end)) continue;
    int64_t grams = (end - start) / g;
    tf_gram *order = malloc(sizeof(tf_gram) * (size_t)(grams ? grams : 1));
    if (!order) {
      snprintf(err, len, "out of memory checking the pool");
      return true;
    }
    for (int64_t i = 0; i < grams; i++) order[i] = (tf_gram){s->pool + start + i * g, g};
    qsort(order, (size_t)grams, sizeof *order, tf_cmp_gram);
    bool dup = false;
    for (int64_t i = 1; i < grams && !dup; i++) dup = tf_cmp_gram(&order[i - 1], &order[i]) == 0;
    free(order);
    if (dup) {
      snprintf(err, len, "pool_int64s holds the same %lld-gram twice (ONNX Runtime rejects "
               "duplicate n-grams)", (long long)g);
      return true;
    }
  }
  return false;
}

/* The global number (in pool order, over all lengths) of the first n-gram of length len. */
static int64_t tf_first_id(const tf_spec *s, int64_t len) {
  int64_t id = 0;
  for (int64_t g = 1; g < len; g++) {
    int64_t start, end;
    if (tf_range(s, g, &start, &end)) id += (end - start) / g;
  }
  return id;
}

/* True when two counted n-grams map to one output coordinate. */
static bool tf_shared_outputs(const tf_spec *s, bool *oom) {
  int64_t first = tf_first_id(s, s->min_len), last = tf_first_id(s, tf_last_len(s) + 1);
  *oom = false;
  if (last - first < 2) return false;
  int64_t *idx = malloc(sizeof(int64_t) * (size_t)(last - first));
  if (!idx) return *oom = true;
  memcpy(idx, s->indexes + first, sizeof(int64_t) * (size_t)(last - first));
  qsort(idx, (size_t)(last - first), sizeof *idx, tf_cmp_int);
  bool shared = false;
  for (int64_t i = 1; i < last - first && !shared; i++) shared = idx[i] == idx[i - 1];
  free(idx);
  return shared;
}

static bool tf_read(const ir_node *n, tf_spec *s, char *err, size_t len) {
  memset(s, 0, sizeof *s);
  const char *mode = ir_attr_string(n, "mode", "");
  if (strcmp(mode, "TF") == 0) s->mode = TF_TF;
  else if (strcmp(mode, "IDF") == 0) s->mode = TF_IDF;
  else if (strcmp(mode, "TFIDF") == 0) s->mode = TF_TFIDF;
  else {
    snprintf(err, len, "mode '%s' is not TF, IDF or TFIDF", mode);
    return false;
  }
  const ir_attr *strings = ir_find_attr(n, "pool_strings");
  if (strings && strings->count > 0) {
    snprintf(err, len, "pool_strings: string n-grams cannot cross into MLX (only pool_int64s "
             "with int32/int64 input is translated)");
    return false;
  }
  s->min_len = ir_attr_int(n, "min_gram_length", 0);
  s->max_len = ir_attr_int(n, "max_gram_length", 0);
  s->max_skip = ir_attr_int(n, "max_skip_count", 0);
  s->pool = ints_attr(n, "pool_int64s", &s->pool_len);
  s->counts = ints_attr(n, "ngram_counts", &s->n_counts);
  s->indexes = ints_attr(n, "ngram_indexes", &s->n_indexes);
  if (s->min_len < 1 || s->max_len < s->min_len) {
    snprintf(err, len, "min_gram_length (%lld) must be >= 1 and <= max_gram_length (%lld)",
             (long long)s->min_len, (long long)s->max_len);
    return false;
  }
  if (s->max_skip < 0 || s->max_skip > (1 << 20)) {
    snprintf(err, len, "max_skip_count %lld is out of range", (long long)s->max_skip);
    return false;
  }
  if (!s->pool || !s->counts || !s->indexes) {
    snprintf(err, len, "pool_int64s, ngram_counts and ngram_indexes must be non-empty");
    return false;
  }
  int64_t grams = 0;
  for (size_t i = 0; i < s->n_counts; i++) {
    int64_t start = s->counts[i];
    int64_t end = i + 1 < s->n_counts ? s->counts[i + 1] : (int64_t)s->pool_len;
    if (start < 0 || end < start || end > (int64_t)s->pool_len ||
        (end - start) % (int64_t)(i + 1) != 0) {
      snprintf(err, len, "ngram_counts[%zu] = %lld does not delimit whole %zu-grams in a pool "
               "of %zu items", i, (long long)start, i + 1, s->pool_len);
      return false;
    }
    grams += (end - start) / (int64_t)(i + 1);
  }
  if ((int64_t)s->n_indexes < grams) {
    snprintf(err, len, "ngram_indexes has %zu entries for %lld pool n-grams", s->n_indexes,
             (long long)grams);
    return false;
  }
  for (size_t i = 0; i < s->n_indexes; i++) {
    if (s->indexes[i] < 0 || s->indexes[i] >= TF_MAX_OUTPUT) {
      snprintf(err, len, "ngram_indexes[%zu] = %lld is outside [0, %d)", i,
               (long long)s->indexes[i], TF_MAX_OUTPUT);
      return false;
    }
    if (s->indexes[i] + 1 > s->output_size) s->output_size = s->indexes[i] + 1;
  }
  const ir_attr *w = ir_find_attr(n, "weights");
  if (w && w->count > 0) {
    if (w->count != s->n_indexes) {
      snprintf(err, len, "weights has %zu entries; ngram_indexes has %zu", w->count,
               s->n_indexes);
      return false;
    }
    s->weights = w->floats;
  }
  return true;
}

static bool claim_tfidf(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *x = ir_input(g, n, 0);
  if (x->rank >= 0 && x->rank != 1 && x->rank != 2)
    return op_decline(why, "X has rank %d; it must be [C] or [N, C]", x->rank);
  char err[240];
  tf_spec s;
  if (!tf_read(n, &s, err, sizeof err)) return op_decline(why, "%s", err);
  if (tf_has_duplicates(&s, err, sizeof err)) return op_decline(why, "%s", err);
  bool oom = false;
  if (s.mode == TF_IDF && s.weights && tf_shared_outputs(&s, &oom))
    return op_decline(why, "IDF with weights where several n-grams share an output "
                      "coordinate: ONNX Runtime keeps the weight of whichever matched last");
  if (oom) return op_decline(why, "out of memory checking ngram_indexes");
  return true;
}

/* The count of every pool n-gram of length len per row: [N, P] float32. */
static int tf_count(tr_ctx *t, const tf_spec *s, mx_array x, int64_t len, int64_t start,
                    int64_t end, mx_array *out) {
  int rows = mx_dim(x, 0), c = mx_dim(x, 1), grams = (int)((end - start) / len);
  int64_t *col = malloc(sizeof(int64_t) * (size_t)grams);
  if (!col) return tr_fail(t, "out of memory");
  mx_array items[64], *item = len <= 64 ? items : malloc(sizeof(mx_array) * (size_t)len);
  if (!item) {
    free(col);
    return tr_fail(t, "out of memory");
  }
  int rc = MX_OK, pshape[3] = {1, 1, grams};
  for (int64_t k = 0; k < len && rc == MX_OK; k++) { /* the pool's k-th items: [1, 1, P] */
    for (int j = 0; j < grams; j++) col[j] = s->pool[start + (int64_t)j * len + k];
    rc = mx_from_data(t->mx, &item[k], col, pshape, 3, MX_INT64);
  }
  free(col);
  mx_array total = NULL;
  int64_t last_skip = len == 1 ? 1 : s->max_skip + 1;
  for (int64_t d = 1; d <= last_skip && rc == MX_OK; d++) {
    int64_t windows = c - (len - 1) * d;
    if (windows <= 0) break;
    mx_array match = NULL;
    for (int64_t k = 0; k < len && rc == MX_OK; k++) {
      int wstart[2] = {0, (int)(k * d)}, wstop[2] = {rows, (int)(k * d + windows)};
      int step[2] = {1, 1}, wshape[3] = {rows, (int)windows, 1};
      mx_array w, eq;
      rc = mx_slice(t->mx, &w, x, wstart, wstop, step, 2);
      if (rc == MX_OK) rc = mx_reshape(t->mx, &w, w, wshape, 3);
      if (rc == MX_OK) rc = mx_binary(t->mx, &eq, MX_EQUAL, w, item[k]);
      if (rc == MX_OK) {
        if (match) rc = mx_binary(t->mx, &match, MX_LOGICAL_AND, match, eq);
        else match = eq;
      }
    }
    int axis = 1;
    mx_array cnt;
    if (rc == MX_OK) rc = mx_astype(t->mx, &cnt, match, MX_FLOAT32);
    if (rc == MX_OK) rc = mx_reduce(t->mx, &cnt, MX_SUM, cnt, &axis, 1, false);
    if (rc == MX_OK) {
      if (total) rc = mx_binary(t->mx, &total, MX_ADD, total, cnt);
      else total = cnt;
    }
  }
  if (item != items) free(item);
  TR_TRY(rc);
  if (!total) { /* no window fits: zero counts */
    mx_array zero;
    int zshape[2] = {rows, grams};
    TR_TRY(mx_scalar(t->mx, &zero, 0, MX_FLOAT32));
    TR_TRY(mx_full(t->mx, &total, zshape, 2, zero));
  }
  *out = total;
  return MX_OK;
}

static int translate_tfidf(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  char err[240];
  tf_spec s;
  if (!tf_read(n, &s, err, sizeof err)) return tr_fail(t, "%s", err);
  mx_array x = tr_in(t, 0);
  int rank = mx_ndim(x);
  if (rank != 1 && rank != 2) return tr_fail(t, "X must be [C] or [N, C]");
  int rows = rank == 2 ? mx_dim(x, 0) : 1, c = mx_dim(x, rank - 1);
  if (rows < 1) return tr_fail(t, "X must be [C] or [N, C] with N > 0");
  if ((int64_t)rows * s.output_size > INT32_MAX) return tr_fail(t, "the output is too large");
  int xshape[2] = {rows, c}, yshape[2] = {rows, (int)s.output_size};
  mx_array zero, y;
  TR_TRY(mx_scalar(t->mx, &zero, 0, MX_FLOAT32));
  TR_TRY(mx_full(t->mx, &y, yshape, 2, zero));
  TR_TRY(mx_reshape(t->mx, &x, x, xshape, 2));
  TR_TRY(mx_astype(t->mx, &x, x, MX_INT64));
  for (int64_t len = s.min_len; c > 0 && len <= tf_last_len(&s); len++) {
    int64_t start, end;
    if (!tf_range(&s, len, &start, &end)) continue;
    int64_t first = tf_first_id(&s, len), grams = (end - start) / len;
    mx_array cnt, idx, upd;
    TR_TRY(tf_count(t, &s, x, len, start, end, &cnt)); /* [N, P] */
    if (s.mode == TF_TFIDF && s.weights) {
      mx_array w;
      int wshape[2] = {1, (int)grams};
      TR_TRY(mx_from_data(t->mx, &w, s.weights + first, wshape, 2, MX_FLOAT32));
      TR_TRY(mx_binary(t->mx, &cnt, MX_MULTIPLY, cnt, w));
    }
    int32_t *at = malloc(sizeof(int32_t) * (size_t)grams);
    if (!at) return tr_fail(t, "out of memory");
    for (int64_t j = 0; j < grams; j++) at[j] = (int32_t)s.indexes[first + j];
    int ishape = (int)grams, perm[2] = {1, 0}, ushape[3] = {(int)grams, rows, 1}, axis = 1;
    int rc = mx_from_data(t->mx, &idx, at, &ishape, 1, MX_INT32);
    free(at);
    TR_TRY(rc);
    TR_TRY(mx_transpose(t->mx, &upd, cnt, perm, 2));
    TR_TRY(mx_reshape(t->mx, &upd, upd, ushape, 3));
    TR_TRY(mx_scatter(t->mx, &y, MX_SCATTER_ADD, y, &idx, 1, upd, &axis));
  }
  if (s.mode == TF_IDF) { /* weight of the coordinate's n-gram (or 1) where counted */
    mx_array hit, w;
    TR_TRY(mx_binary(t->mx, &hit, MX_GREATER, y, zero));
    TR_TRY(mx_astype(t->mx, &y, hit, MX_FLOAT32));
    if (s.weights) {
      float *wo = calloc((size_t)s.output_size, sizeof(float));
      if (!wo) return tr_fail(t, "out of memory");
      int64_t first = tf_first_id(&s, s.min_len), last = tf_first_id(&s, tf_last_len(&s) + 1);
      for (int64_t i = first; i < last; i++) wo[s.indexes[i]] = s.weights[i];
      int wshape[2] = {1, (int)s.output_size};
      int rc = mx_from_data(t->mx, &w, wo, wshape, 2, MX_FLOAT32);
      free(wo);
      TR_TRY(rc);
      TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, y, w));
    }
  }
  if (rank == 1) {
    int oshape = (int)s.output_size;
    TR_TRY(mx_reshape(t->mx, &y, y, &oshape, 1));
  }
  return tr_out_cast(t, 0, y);
}

const op_row ops_tfidf_rows[] = {
    {"", "TfIdfVectorizer", 9, 25, claim_tfidf, translate_tfidf, OP_SHAPE_KEYED,
     OP_T(IR_INT32) | OP_T(IR_INT64), 0,
     "int32/int64 input with pool_int64s (strings stay on ONNX Runtime); TF/IDF/TFIDF, skips; "
     "counts from comparisons of shifted windows with the static pool, scatter-added"},
    OP_ROWS_END,
};
