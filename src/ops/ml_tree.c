/*
 * TreeEnsembleRegressor and TreeEnsembleClassifier (ai.onnx.ml 1 and 3: thresholds and weights
 * as float attributes or as float/double _as_tensor ones) and TreeEnsemble (ai.onnx.ml 5, with
 * BRANCH_MEMBER sets; its layout is read in ops/ml_tree5.c), evaluated for the whole batch as
 * one array program. At plan build the trees become flat node tables in which the roots come
 * first (tree t's root is node t) and a leaf points at itself: per node its feature, true and
 * false child, mode and missing-value rule (int32 [G + 2, 4], the extra rows holding the depth,
 * the modes used and the features read), its threshold and for BRANCH_MEMBER its set ([G, W],
 * NaN padded), and per leaf its weights and which targets it has weights for ([G, 2K]); each
 * becomes an MLX array of planes, one per field ([4, G + 2], [W, G], [2K, G]). A Run starts
 * every row at every root ([N, T]) and takes depth-many steps of gathers (node fields, then X's
 * feature) and comparisons; then it gathers the leaves' weights and aggregates over the trees
 * (SUM, AVERAGE, MIN, MAX) with ONNX Runtime's base values, two-class rules and post-transforms
 * (ops/ml.c, in float32 as there).
 *
 * Types follow ONNX Runtime's kernels: float32 X is compared with float32 thresholds and the
 * weights summed in float32 (integer X converted to float32 first, as C++ converts it there);
 * float64 X (the CPU device only) with float64 thresholds, summed in float64. Double
 * _as_tensor attributes come with float64 X; with other X ONNX Runtime rejects them, and they
 * are declined. Sums follow MLX's reduction order; ONNX Runtime's order depends on its thread
 * pool (trees split over threads for small batches), so sums agree to rounding, not bit for bit.
 */
#include "ops/families.h"
#include "ops/ml_tree.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const int64_t *ml_tree_ints(const ir_node *n, const char *name, size_t *count) {
  const ir_attr *a = ir_find_attr(n, name);
  *count = a && a->type == IR_ATTR_INTS ? a->count : 0;
  return *count ? a->ints : NULL;
}

/* A float list as an attribute, or a float/double tensor under name_as_tensor. */
static bool reals_of(const ir_node *n, const char *name, const float **f, const double **d,
                     size_t *count, char *err, size_t len) {
  char tn[64];
  snprintf(tn, sizeof tn, "%s_as_tensor", name);
  const ir_attr *a = ir_find_attr(n, name), *t = ir_find_attr(n, tn);
  *f = NULL;
  *d = NULL;
  *count = 0;
  if (t && t->type == IR_ATTR_TENSOR) {
    if (t->tensor_elem_type == IR_FLOAT) *f = t->tensor_data;
    else if (t->tensor_elem_type == IR_DOUBLE) *d = t->tensor_data;
    else {
      snprintf(err, len, "%s is %s (float or double expected)", tn,
               ir_elem_name(t->tensor_elem_type));
      return false;
    }
    *count = t->tensor_bytes / ir_elem_size(t->tensor_elem_type);
  } else if (a && a->type == IR_ATTR_FLOATS) {
    *f = a->floats;
    *count = a->count;
  }
  return true;
}

static double real_at(const float *f, const double *d, size_t i) { return f ? f[i] : d[i]; }

static int mode_code(const char *s) {
  static const char *const names[] = {"BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT",
                                      "BRANCH_EQ", "BRANCH_NEQ", "LEAF"};
  for (int i = 0; i < M_COUNT; i++)
    if (strcmp(s, names[i]) == 0) return i;
  return -1;
}

static bool tree_read(const ir_node *n, tree_spec *s, char *err, size_t len) {
  memset(s, 0, sizeof *s);
  s->classifier = strcmp(n->op_type, "TreeEnsembleClassifier") == 0;
  size_t c[6];
  s->tree = ml_tree_ints(n, "nodes_treeids", &c[0]);
  s->node = ml_tree_ints(n, "nodes_nodeids", &c[1]);
  s->feature = ml_tree_ints(n, "nodes_featureids", &c[2]);
  s->truen = ml_tree_ints(n, "nodes_truenodeids", &c[3]);
  s->falsen = ml_tree_ints(n, "nodes_falsenodeids", &c[4]);
  s->missing = ml_tree_ints(n, "nodes_missing_value_tracks_true", &s->n_missing);
  s->n_nodes = c[0];
  for (int i = 1; i < 5; i++)
    if (c[i] != s->n_nodes) {
      snprintf(err, len, "the nodes_* attributes have different lengths");
      return false;
    }
  if (s->n_nodes == 0 || s->n_nodes > TREE_MAX_NODES) {
    snprintf(err, len, "%zu nodes (1 to %d are translated)", s->n_nodes, TREE_MAX_NODES);
    return false;
  }
  if (s->n_missing && s->n_missing != s->n_nodes) {
    snprintf(err, len, "nodes_missing_value_tracks_true has %zu entries for %zu nodes",
             s->n_missing, s->n_nodes);
    return false;
  }
  const ir_attr *m = ir_find_attr(n, "nodes_modes");
  if (!m || m->type != IR_ATTR_STRINGS || m->count != s->n_nodes) {
    snprintf(err, len, "nodes_modes must hold one mode per node");
    return false;
  }
  s->modes = m->s;
  size_t nt;
  if (!reals_of(n, "nodes_values", &s->thr_f, &s->thr_d, &nt, err, len)) return false;
  if (nt != s->n_nodes) {
    snprintf(err, len, "nodes_values has %zu entries for %zu nodes", nt, s->n_nodes);
    return false;
  }
  const char *p = s->classifier ? "class" : "target";
  char name[40];
  size_t cw[4];
  snprintf(name, sizeof name, "%s_treeids", p);
  s->w_tree = ml_tree_ints(n, name, &cw[0]);
  snprintf(name, sizeof name, "%s_nodeids", p);
  s->w_node = ml_tree_ints(n, name, &cw[1]);
  snprintf(name, sizeof name, "%s_ids", p);
  s->w_id = ml_tree_ints(n, name, &cw[2]);
  snprintf(name, sizeof name, "%s_weights", p);
  if (!reals_of(n, name, &s->w_f, &s->w_d, &cw[3], err, len)) return false;
  s->n_weights = cw[0];
  if (cw[1] != cw[0] || cw[2] != cw[0] || cw[3] != cw[0]) {
    snprintf(err, len, "the %s_* attributes have different lengths", p);
    return false;
  }
  if (!reals_of(n, "base_values", &s->base_f, &s->base_d, &s->n_base, err, len)) return false;
  if (s->classifier) {
    const ir_attr *ls = ir_find_attr(n, "classlabels_strings");
    if (ls && ls->type == IR_ATTR_STRINGS && ls->count) {
      snprintf(err, len, "classlabels_strings: string labels stay with ONNX Runtime (only "
               "classlabels_int64s is translated)");
      return false;
    }
    size_t nl;
    s->labels = ml_tree_ints(n, "classlabels_int64s", &nl);
    s->k = (int64_t)nl;
    s->agg = AGG_SUM;
    if (nl < 2) {
      snprintf(err, len, "%zu class labels (2 or more are translated)", nl);
      return false;
    }
  } else {
    s->k = ir_attr_int(n, "n_targets", 1);
    const char *agg = ir_attr_string(n, "aggregate_function", "SUM");
    static const char *const aggs[] = {"SUM", "AVERAGE", "MIN", "MAX"};
    s->agg = -1;
    for (int i = 0; i < 4; i++)
      if (strcmp(agg, aggs[i]) == 0) s->agg = i;
    if (s->agg < 0) {
      snprintf(err, len, "aggregate_function '%s' is not SUM, AVERAGE, MIN or MAX", agg);
      return false;
    }
  }
  if (s->k < 1 || s->k > (1 << 16)) {
    snprintf(err, len, "%lld targets or classes are out of range", (long long)s->k);
    return false;
  }
  if (s->n_base && (int64_t)s->n_base != s->k && !(s->classifier && s->k == 2 && s->n_base == 1)) {
    snprintf(err, len, "base_values has %zu entries for %lld targets", s->n_base,
             (long long)s->k);
    return false;
  }
  for (size_t i = 0; i < s->n_weights; i++)
    if (s->w_id[i] < 0 || s->w_id[i] >= s->k) {
      snprintf(err, len, "%s_ids[%zu] = %lld is outside [0, %lld)", p, i, (long long)s->w_id[i],
               (long long)s->k);
      return false;
    }
  if (!ml_read_post(n, &s->post)) {
    snprintf(err, len, "post_transform '%s' is not defined",
             ir_attr_string(n, "post_transform", ""));
    return false;
  }
  return true;
}

/* The flat tables (see the top of the file). */

void ml_tree_tables_free(tree_tables *tt) {
  free(tt->info);
  free(tt->thr);
  free(tt->leaf);
  memset(tt, 0, sizeof *tt);
}

typedef struct key_at {
  int64_t tree, node;
  int32_t at;
} key_at;

static int cmp_key(const void *a, const void *b) {
  const key_at *x = a, *y = b;
  if (x->tree != y->tree) return x->tree < y->tree ? -1 : 1;
  return x->node < y->node ? -1 : x->node > y->node;
}

static int32_t find_node(const key_at *keys, size_t count, int64_t tree, int64_t node) {
  key_at k = {tree, node, 0};
  const key_at *hit = bsearch(&k, keys, count, sizeof k, cmp_key);
  return hit ? hit->at : -1;
}

/* The depth of the deepest leaf, by levels from the roots (nodes 0 .. roots - 1); a node met
 * twice means the nodes do not form trees. level: scratch of g entries. */
bool ml_tree_depth(tree_tables *tt, size_t g, size_t roots, int32_t *level, char *err,
                         size_t len) {
  for (size_t i = 0; i < g; i++) level[i] = i < roots ? 0 : -1;
  for (int d = 0, changed = 1; changed; d++) {
    changed = 0;
    if (d > TREE_MAX_DEPTH) {
      snprintf(err, len, "a tree is deeper than %d levels", TREE_MAX_DEPTH);
      return false;
    }
    for (size_t i = 0; i < g; i++) {
      const int32_t *row = tt->info + i * 4;
      if (level[i] != d || (row[3] & 7) == M_LEAF) continue;
      for (int c = 1; c <= 2; c++) {
        if (level[row[c]] >= 0 && !(c == 2 && row[2] == row[1])) {
          snprintf(err, len, "a node is reached twice: the nodes do not form trees");
          return false;
        }
        level[row[c]] = d + 1;
        changed = 1;
        if (d + 1 > tt->depth) tt->depth = d + 1;
      }
    }
  }
  return true;
}

/* The two rows after the nodes: what the translator needs before it walks. */
void ml_tree_meta(tree_tables *tt, size_t g) {
  int32_t *meta = tt->info + g * 4;
  meta[0] = tt->depth, meta[1] = tt->n_trees, meta[2] = (int32_t)tt->modes, meta[3] = tt->missing;
  meta[4] = tt->features;
}

static bool tables_build(const tree_spec *s, tree_tables *tt, char *err, size_t len) {
  memset(tt, 0, sizeof *tt);
  size_t g = s->n_nodes, k2 = (size_t)s->k * 2;
  key_at *keys = malloc(sizeof *keys * g);
  int32_t *place = malloc(sizeof *place * g);
  int32_t *level = malloc(sizeof *level * g);
  tt->info = calloc((g + 2) * 4, sizeof *tt->info);
  tt->thr = calloc(g, sizeof *tt->thr);
  tt->width = 1;
  tt->leaf = calloc(g * k2, sizeof *tt->leaf);
  bool ok = false;
  if (!keys || !place || !level || !tt->info || !tt->thr || !tt->leaf) {
    snprintf(err, len, "out of memory building the tree tables");
    goto done;
  }
  /* roots first: the first node of each run of one tree id, in attribute order */
  size_t roots = 0;
  for (size_t i = 0; i < g; i++)
    if (i == 0 || s->tree[i] != s->tree[i - 1]) roots++;
  size_t r = 0, rest = roots;
  for (size_t i = 0; i < g; i++) {
    bool root = i == 0 || s->tree[i] != s->tree[i - 1];
    place[i] = (int32_t)(root ? r++ : rest++);
    keys[i] = (key_at){s->tree[i], s->node[i], place[i]};
  }
  qsort(keys, g, sizeof *keys, cmp_key);
  for (size_t i = 1; i < g; i++)
    if (keys[i].tree == keys[i - 1].tree && keys[i].node == keys[i - 1].node) {
      snprintf(err, len, "node %lld of tree %lld appears twice (or the nodes of a tree are not "
               "contiguous)", (long long)keys[i].node, (long long)keys[i].tree);
      goto done;
    }
  tt->n_trees = (int)roots;
  const char *m = s->modes;
  for (size_t i = 0; i < g; i++, m += strlen(m) + 1) {
    int mode = mode_code(m), at = place[i];
    if (mode < 0) {
      snprintf(err, len, "node mode '%s' is not translated", m);
      goto done;
    }
    int32_t *row = tt->info + (size_t)at * 4;
    tt->modes |= 1u << mode;
    if (mode == M_LEAF) {
      row[0] = 0, row[1] = row[2] = at, row[3] = M_LEAF;
      continue;
    }
    int32_t t = find_node(keys, g, s->tree[i], s->truen[i]);
    int32_t f = find_node(keys, g, s->tree[i], s->falsen[i]);
    if (t < 0 || f < 0) {
      snprintf(err, len, "node %lld of tree %lld names a child that tree lacks",
               (long long)s->node[i], (long long)s->tree[i]);
      goto done;
    }
    if (s->feature[i] < 0 || s->feature[i] > INT32_MAX) {
      snprintf(err, len, "nodes_featureids[%zu] = %lld is out of range", i,
               (long long)s->feature[i]);
      goto done;
    }
    bool miss = s->n_missing && s->missing[i];
    tt->missing |= miss;
    row[0] = (int32_t)s->feature[i], row[1] = t, row[2] = f, row[3] = mode | (miss ? 8 : 0);
    if (row[0] + 1 > tt->features) tt->features = row[0] + 1;
    double th = real_at(s->thr_f, s->thr_d, i);
    tt->thr[at] = th;
  }
  if (!ml_tree_depth(tt, g, roots, level, err, len)) goto done;
  /* leaf weights, per target: summed (SUM, AVERAGE) or kept at their min or max */
  for (size_t i = 0; i < s->n_weights; i++) {
    int32_t at = find_node(keys, g, s->w_tree[i], s->w_node[i]);
    if (at < 0 || (tt->info[(size_t)at * 4 + 3] & 7) != M_LEAF) {
      snprintf(err, len, "weight %zu names node %lld of tree %lld, which is not a leaf", i,
               (long long)s->w_node[i], (long long)s->w_tree[i]);
      goto done;
    }
    double *w = tt->leaf + (size_t)at * k2, *has = w + s->k;
    int64_t id = s->w_id[i];
    double v = real_at(s->w_f, s->w_d, i);
    if (!has[id] || s->agg == AGG_SUM || s->agg == AGG_AVERAGE) w[id] = has[id] ? w[id] + v : v;
    else if (s->agg == AGG_MIN) w[id] = v < w[id] ? v : w[id];
    else w[id] = v > w[id] ? v : w[id];
    has[id] = 1.0f;
  }
  ml_tree_meta(tt, g);
  ok = true;
done:
  free(keys);
  free(place);
  free(level);
  if (!ok) ml_tree_tables_free(tt);
  return ok;
}

static bool is_v5(const ir_node *n) { return strcmp(n->op_type, "TreeEnsemble") == 0; }

/* Reads either layout and builds the tables. */
static bool tree_any(const ir_node *n, tree_spec *s, tree_tables *tt, char *err, size_t len) {
  if (is_v5(n)) return ml_tree5_build(n, s, tt, err, len);
  return tree_read(n, s, err, len) && tables_build(s, tt, err, len);
}

/* Whether every leaf carries a weight for class 1 (two-class classifiers). */
static bool every_leaf_scores_class1(const tree_spec *s, bool *oom) {
  key_at *ones = malloc(sizeof *ones * (s->n_weights ? s->n_weights : 1));
  *oom = !ones;
  if (!ones) return false;
  size_t count = 0;
  for (size_t i = 0; i < s->n_weights; i++)
    if (s->w_id[i] == 1) ones[count++] = (key_at){s->w_tree[i], s->w_node[i], 0};
  qsort(ones, count, sizeof *ones, cmp_key);
  bool all = true;
  const char *m = s->modes;
  for (size_t i = 0; i < s->n_nodes && all; i++, m += strlen(m) + 1)
    if (strcmp(m, "LEAF") == 0) all = find_node(ones, count, s->tree[i], s->node[i]) >= 0;
  free(ones);
  return all;
}

static bool claim_tree(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *x = ir_input(g, n, 0);
  if (x->rank == 1)
    return op_decline(why, "X of rank 1: ONNX Runtime reads it as one row of one feature");
  if (x->rank == 0 || x->rank > 2) return op_decline(why, "X must be [N, C]");
  char err[240];
  tree_spec s;
  tree_tables tt;
  if (is_v5(n)) {
    if (!tree_any(n, &s, &tt, err, sizeof err)) return op_decline(why, "%s", err);
    ml_tree_tables_free(&tt);
    return true;
  }
  if (!tree_read(n, &s, err, sizeof err)) return op_decline(why, "%s", err);
  if ((s.thr_d || s.w_d || s.base_d) && x->elem_type != IR_DOUBLE)
    return op_decline(why, "double _as_tensor attributes with %s X: ONNX Runtime runs them "
                      "only for float64 X", ir_elem_name(x->elem_type));
  if (s.classifier && s.k == 2) { /* the two-class forms ONNX Runtime 1.31 was seen to run */
    bool one_class = true;
    for (size_t i = 0; i < s.n_weights; i++) one_class &= s.w_id[i] == s.w_id[0];
    if (s.post == ML_POST_PROBIT)
      return op_decline(why, "PROBIT with two classes: ONNX Runtime writes one probit per row "
                        "into a two-column Z");
    if (one_class && s.n_weights && s.w_id[0] != 0)
      return op_decline(why, "two classes with weights for class 1 only: ONNX Runtime drops "
                        "the base values and scores class 0 as zero");
    if (one_class && s.n_base == 2)
      return op_decline(why, "two classes, weights for one class and two base values: ONNX "
                        "Runtime leaves the second score at zero");
    bool oom = false;
    if (!one_class && s.n_base && !every_leaf_scores_class1(&s, &oom))
      return op_decline(why, "%s", oom ? "out of memory checking the leaves" :
                        "two classes with base values where some leaf has no class-1 weight: "
                        "ONNX Runtime's scores for rows reaching none follow no per-row rule "
                        "(not translated)");
  }
  if (!tables_build(&s, &tt, err, sizeof err)) return op_decline(why, "%s", err);
  ml_tree_tables_free(&tt);
  return true;
}

/* A [rows, cols] host table as a [cols, rows] MLX array: each field a contiguous plane, so that
 * one gather along axis 1 fetches every field and each plane is a view, not a copy. Doubles
 * become float32 on the host unless the array is float64 (the CPU device, float64 X). */
static int planes(tr_ctx *t, const void *data, int rows, int cols, mx_dtype dt, mx_array *out) {
  int shape[2] = {rows, cols}, perm[2] = {1, 0};
  float *narrow = NULL;
  if (dt == MX_FLOAT32) {
    size_t count = (size_t)rows * (size_t)cols;
    narrow = malloc(sizeof(float) * (count ? count : 1));
    if (!narrow) return tr_fail(t, "out of memory");
    for (size_t i = 0; i < count; i++) narrow[i] = (float)((const double *)data)[i];
  }
  int rc = mx_from_data(t->mx, out, narrow ? (const void *)narrow : data, shape, 2, dt);
  free(narrow);
  TR_TRY(rc);
  TR_TRY(mx_transpose(t->mx, out, *out, perm, 2));
  return mx_contiguous(t->mx, out, *out);
}

/* The three tables as MLX arrays: info [4, G + 2], thr [W, G], leaf [2K, G]. */
static int tree_arrays(tr_ctx *t, const ir_node *n, mx_array *info, mx_array *thr,
                       mx_array *leaf) {
  char err[240];
  tree_spec s;
  tree_tables tt;
  if (!tree_any(n, &s, &tt, err, sizeof err)) return tr_fail(t, "%s", err);
  int g = (int)s.n_nodes;
  mx_dtype real = ir_input(t->g, n, 0)->elem_type == IR_DOUBLE ? MX_FLOAT64 : MX_FLOAT32;
  int rc = planes(t, tt.info, g + 2, 4, MX_INT32, info);
  if (rc == MX_OK) rc = planes(t, tt.thr, g, tt.width, real, thr);
  if (rc == MX_OK) rc = planes(t, tt.leaf, g, (int)s.k * 2, real, leaf);
  ml_tree_tables_free(&tt);
  return rc;
}

static int prepare_tree(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array info, thr, leaf;
  TR_TRY(tree_arrays(t, n, &info, &thr, &leaf));
  TR_TRY(tr_keep_derived(t, 0, info));
  TR_TRY(tr_keep_derived(t, 1, thr));
  return tr_keep_derived(t, 2, leaf);
}

static int plane(tr_ctx *t, mx_array a, int c, mx_array *out) { /* a[c : c + 1], [1, G] */
  return tr_slice_axis(t, a, 0, c, c + 1, out);
}

/* table[idx] for a [1, G] table and [N, T] indices, or [P, N, T] for a [P, G] table. A gather
 * along the last axis of a broadcast table: MLX's CPU take_along_axis ran 5-7x faster here than
 * its take of the same elements. */
static int lookup(tr_ctx *t, mx_array table, mx_array idx, mx_array *out) {
  if (mx_dim(table, 0) == 1) return mx_take_along_axis(t->mx, out, table, idx, 1);
  int ts[3] = {mx_dim(table, 0), 1, mx_dim(table, 1)}, ax = 0;
  mx_array tab, ix;
  TR_TRY(mx_reshape(t->mx, &tab, table, ts, 3));
  TR_TRY(mx_expand_dims(t->mx, &ix, idx, &ax, 1));
  return mx_take_along_axis(t->mx, out, tab, ix, 2);
}

/* The leaf node index each row reaches in each tree: int32 [N, T]. meta: depth, trees, modes
 * met, whether any node sends NaN to its true child. */
static int walk(tr_ctx *t, mx_array x, mx_array info, mx_array thr, const int32_t *meta,
                mx_array *out) {
  int rows = mx_dim(x, 0), trees = meta[1], shape[2] = {rows, trees};
  unsigned modes = (unsigned)meta[2];
  int branch_modes = (modes >> M_MEMBER) & 1;
  for (int m = 0; m < M_LEAF; m++) branch_modes += (modes >> m) & 1;
  mx_array idx, seven, eight;
  TR_TRY(mx_arange(t->mx, &idx, 0, trees, 1, MX_INT32));
  TR_TRY(mx_broadcast_to(t->mx, &idx, idx, shape, 2));
  TR_TRY(mx_scalar_int(t->mx, &seven, 7, MX_INT32));
  TR_TRY(mx_scalar_int(t->mx, &eight, 8, MX_INT32));
  static const mx_binary_op cmp[] = {MX_LESS_EQUAL, MX_LESS, MX_GREATER_EQUAL, MX_GREATER,
                                     MX_EQUAL, MX_NOT_EQUAL};
  mx_array field[4], threshold;
  for (int c = 0; c < 4; c++) TR_TRY(plane(t, info, c, &field[c]));
  TR_TRY(plane(t, thr, 0, &threshold));
  for (int d = 0; d < meta[0] && branch_modes; d++) {
    mx_array ths = NULL, feat, th, xv, flags, mode = NULL, go = NULL, tc, fc;
    TR_TRY(lookup(t, field[0], idx, &feat)); /* [N, T] each */
    TR_TRY(lookup(t, field[1], idx, &tc));
    TR_TRY(lookup(t, field[2], idx, &fc));
    TR_TRY(lookup(t, field[3], idx, &flags));
    TR_TRY(lookup(t, threshold, idx, &th));
    if ((modes >> M_MEMBER) & 1) TR_TRY(lookup(t, thr, idx, &ths)); /* [W, N, T] */
    TR_TRY(mx_take_along_axis(t->mx, &xv, x, feat, 1));
    if (branch_modes > 1) TR_TRY(mx_binary(t->mx, &mode, MX_BITWISE_AND, flags, seven));
    for (int m = 0; m < M_LEAF; m++) {
      if (!((modes >> m) & 1)) continue;
      mx_array c;
      TR_TRY(mx_binary(t->mx, &c, cmp[m], xv, th));
      if (mode) {
        mx_array is, code;
        TR_TRY(mx_scalar_int(t->mx, &code, m, MX_INT32));
        TR_TRY(mx_binary(t->mx, &is, MX_EQUAL, mode, code));
        TR_TRY(mx_binary(t->mx, &c, MX_LOGICAL_AND, c, is));
      }
      if (go) TR_TRY(mx_binary(t->mx, &go, MX_LOGICAL_OR, go, c));
      else go = c;
    }
    if ((modes >> M_MEMBER) & 1) { /* x among the node's set (NaN padding never matches) */
      mx_array set, in, xe;
      int ax = 0;
      TR_TRY(tr_slice_axis(t, ths, 0, 1, mx_dim(ths, 0), &set));
      TR_TRY(mx_expand_dims(t->mx, &xe, xv, &ax, 1));
      TR_TRY(mx_binary(t->mx, &in, MX_EQUAL, xe, set));
      TR_TRY(mx_reduce(t->mx, &in, MX_ANY, in, &ax, 1, false));
      if (mode) {
        mx_array is, code;
        TR_TRY(mx_scalar_int(t->mx, &code, M_MEMBER, MX_INT32));
        TR_TRY(mx_binary(t->mx, &is, MX_EQUAL, mode, code));
        TR_TRY(mx_binary(t->mx, &in, MX_LOGICAL_AND, in, is));
      }
      if (go) TR_TRY(mx_binary(t->mx, &go, MX_LOGICAL_OR, go, in));
      else go = in;
    }
    if (meta[3]) { /* NaN goes to the true child where the node says so (flags >= 8) */
      mx_array isn, tracks;
      TR_TRY(mx_unary(t->mx, &isn, MX_ISNAN, xv));
      TR_TRY(mx_binary(t->mx, &tracks, MX_GREATER_EQUAL, flags, eight));
      TR_TRY(mx_binary(t->mx, &isn, MX_LOGICAL_AND, isn, tracks));
      TR_TRY(mx_binary(t->mx, &go, MX_LOGICAL_OR, go, isn));
    }
    TR_TRY(mx_where(t->mx, &idx, go, tc, fc));
  }
  *out = idx;
  return MX_OK;
}

/* Aggregated leaf weights over the trees: scores [N, K] and whether any tree had a weight for
 * the target (bool [N, K]). */
static int aggregate(tr_ctx *t, const tree_spec *s, mx_array leaf, mx_array idx, int trees,
                     mx_array *score, mx_array *has) {
  int k = (int)s->k, axis = 2, perm[2] = {1, 0};
  mx_array all, w, hit, zero;
  TR_TRY(lookup(t, leaf, idx, &all)); /* [2K, N, T] */
  TR_TRY(tr_slice_axis(t, all, 0, 0, k, &w));
  TR_TRY(tr_slice_axis(t, all, 0, k, 2 * k, &hit));
  TR_TRY(tr_scalar(t, &zero, 0.0, MX_FLOAT32));
  TR_TRY(mx_binary(t->mx, &hit, MX_GREATER, hit, zero));
  TR_TRY(mx_reduce(t->mx, has, MX_ANY, hit, &axis, 1, false));
  TR_TRY(mx_transpose(t->mx, has, *has, perm, 2));
  if (s->agg == AGG_MIN || s->agg == AGG_MAX) {
    mx_array fill;
    TR_TRY(tr_scalar(t, &fill, s->agg == AGG_MIN ? INFINITY : -INFINITY, MX_FLOAT32));
    TR_TRY(mx_where(t->mx, &w, hit, w, fill));
    TR_TRY(mx_reduce(t->mx, &w, s->agg == AGG_MIN ? MX_MIN : MX_MAX, w, &axis, 1, false));
    TR_TRY(mx_transpose(t->mx, &w, w, perm, 2));
    return mx_where(t->mx, score, *has, w, zero);
  }
  TR_TRY(mx_reduce(t->mx, &w, MX_SUM, w, &axis, 1, false));
  TR_TRY(mx_transpose(t->mx, &w, w, perm, 2));
  if (s->agg == AGG_AVERAGE) {
    mx_array nt;
    TR_TRY(tr_scalar(t, &nt, trees, MX_FLOAT32));
    TR_TRY(mx_binary(t->mx, &w, MX_DIVIDE, w, nt));
  }
  *score = w;
  return MX_OK;
}

static int base_array(tr_ctx *t, const tree_spec *s, mx_array *out) {
  float b[2048] = {0}, *v = s->n_base <= 2048 ? b : malloc(sizeof(float) * s->n_base);
  if (!v) return tr_fail(t, "out of memory");
  for (size_t i = 0; i < s->n_base; i++) v[i] = (float)real_at(s->base_f, s->base_d, i);
  int rc = ml_floats(t, v, (int)s->n_base, false, out);
  if (v != b) free(v);
  return rc;
}

/* ONNX Runtime's two-class rules (TreeAggregatorClassifier::FinalizeScores), per row. */
static int binary_classes(tr_ctx *t, const tree_spec *s, mx_array score, mx_array has,
                          mx_array *labels, mx_array *z) {
  mx_array s0, s1, h0, h1, zero, one, two_cols, pos, lab1, lab0, half, wide, pair[2];
  TR_TRY(tr_slice_axis(t, score, 1, 0, 1, &s0));
  TR_TRY(tr_slice_axis(t, score, 1, 1, 2, &s1));
  TR_TRY(tr_slice_axis(t, has, 1, 0, 1, &h0));
  TR_TRY(tr_slice_axis(t, has, 1, 1, 2, &h1));
  TR_TRY(tr_scalar(t, &zero, 0.0, MX_FLOAT32));
  TR_TRY(tr_scalar(t, &one, 1.0, MX_FLOAT32));
  bool positive = true;
  bool one_class = true;
  for (size_t i = 0; i < s->n_weights; i++) {
    if (real_at(s->w_f, s->w_d, i) < 0) positive = false;
    if (s->w_id[i] != s->w_id[0]) one_class = false;
  }
  if (s->n_base == 2) { /* with a class-1 score: s1 = base1 + s0, s0 = -s1 */
    mx_array b, b0, b1, t1, t0;
    TR_TRY(base_array(t, s, &b));
    TR_TRY(tr_slice_axis(t, b, 1, 0, 1, &b0));
    TR_TRY(tr_slice_axis(t, b, 1, 1, 2, &b1));
    TR_TRY(mx_binary(t->mx, &t1, MX_ADD, b1, s0));
    TR_TRY(mx_unary(t->mx, &t0, MX_NEG, t1));
    TR_TRY(mx_binary(t->mx, &b1, MX_ADD, s1, b1));
    TR_TRY(mx_binary(t->mx, &b0, MX_ADD, s0, b0));
    TR_TRY(mx_where(t->mx, &s1, h1, t1, b1));
    TR_TRY(mx_where(t->mx, &s0, h1, t0, b0));
    h1 = NULL; /* both classes count from here on */
  } else if (s->n_base == 1) {
    mx_array b;
    TR_TRY(base_array(t, s, &b));
    TR_TRY(mx_binary(t->mx, &s0, MX_ADD, s0, b));
  }
  /* two_cols: the row keeps both scores (else only s0, widened below) */
  if (h1) two_cols = h1;
  else TR_TRY(mx_binary(t->mx, &two_cols, MX_EQUAL, zero, zero));
  /* pos_weight: s1 when present, else s0 when present, else 0 */
  mx_array s0h;
  TR_TRY(mx_where(t->mx, &s0h, h0, s0, zero));
  TR_TRY(mx_where(t->mx, &pos, two_cols, s1, s0h));
  TR_TRY(mx_scalar_int(t->mx, &lab1, one_class ? s->labels[1] : 1, MX_INT64));
  TR_TRY(mx_scalar_int(t->mx, &lab0, one_class ? s->labels[0] : 0, MX_INT64));
  mx_array cut, above;
  TR_TRY(tr_scalar(t, &half, 0.5, MX_FLOAT32));
  cut = one_class && positive ? half : zero;
  TR_TRY(mx_binary(t->mx, &above, MX_GREATER, pos, cut));
  TR_TRY(mx_where(t->mx, labels, above, lab1, lab0));
  /* both scores: the post-transform over the pair */
  pair[0] = s0, pair[1] = s1;
  TR_TRY(mx_concatenate(t->mx, &wide, pair, 2, 1));
  TR_TRY(ml_post_transform(t, s->post, wide, &wide));
  /* one score: PROBIT alone; else widened by the rule ONNX Runtime picked */
  mx_array narrow;
  if (s->post == ML_POST_PROBIT) {
    mx_array p;
    TR_TRY(ml_probit(t, s0, &p));
    pair[0] = p, pair[1] = zero;
    TR_TRY(mx_broadcast_to(t->mx, &pair[1], zero, (int[]){mx_dim(p, 0), 1}, 2));
  } else if (one_class && positive) { /* rules 0 and 1: [1 - p, p], p = s or sigmoid(s) */
    mx_array p = s0;
    if (s->post == ML_POST_LOGISTIC) TR_TRY(mx_unary(t->mx, &p, MX_SIGMOID, s0));
    TR_TRY(mx_binary(t->mx, &pair[0], MX_SUBTRACT, one, p));
    pair[1] = p;
  } else if (one_class || s->n_base == 0) { /* rules 2 and 3 */
    if (s->post == ML_POST_LOGISTIC) {
      mx_array neg;
      TR_TRY(mx_unary(t->mx, &neg, MX_NEG, s0));
      TR_TRY(mx_unary(t->mx, &pair[0], MX_SIGMOID, neg));
      TR_TRY(mx_unary(t->mx, &pair[1], MX_SIGMOID, s0));
    } else {
      TR_TRY(mx_unary(t->mx, &pair[0], MX_NEG, s0));
      pair[1] = s0;
    }
  } else { /* ONNX Runtime writes s0 only; the second column is left as zero here */
    pair[0] = s0;
    TR_TRY(mx_broadcast_to(t->mx, &pair[1], zero, (int[]){mx_dim(s0, 0), 1}, 2));
  }
  TR_TRY(mx_concatenate(t->mx, &narrow, pair, 2, 1));
  return mx_where(t->mx, z, two_cols, wide, narrow);
}

static int translate_tree(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  char err[240];
  tree_spec s;
  if (!(is_v5(n) ? ml_tree5_read(n, &s, err, sizeof err) : tree_read(n, &s, err, sizeof err)))
    return tr_fail(t, "%s", err);
  mx_array info = tr_derived(t, 0), thr = tr_derived(t, 1), leaf = tr_derived(t, 2);
  if (!info || !thr || !leaf) /* folding a constant X runs before the prepare hooks */
    TR_TRY(tree_arrays(t, n, &info, &thr, &leaf));
  const void *host;
  TR_TRY(mx_host_data(t->mx, info, &host));
  /* the two rows after the nodes, read from their planes */
  int32_t meta[5];
  size_t g2 = (size_t)mx_dim(info, 1);
  for (int j = 0; j < 4; j++) meta[j] = ((const int32_t *)host)[(size_t)j * g2 + g2 - 2];
  meta[4] = ((const int32_t *)host)[g2 - 1];
  mx_array x = tr_in(t, 0), idx, score, has;
  if (mx_ndim(x) != 2) return tr_fail(t, "X must be [N, C]");
  if (mx_dtype_of(x) != MX_FLOAT32 && mx_dtype_of(x) != MX_FLOAT64)
    TR_TRY(mx_astype(t->mx, &x, x, MX_FLOAT32));
  int rows = mx_dim(x, 0), features = mx_dim(x, 1);
  if (meta[4] > features)
    return tr_fail(t, "a node reads feature %d; X has %d", meta[4] - 1, features);
  TR_TRY(walk(t, x, info, thr, meta, &idx));
  TR_TRY(aggregate(t, &s, leaf, idx, meta[1], &score, &has));
  if (!s.classifier) {
    if (s.n_base) {
      mx_array b;
      TR_TRY(base_array(t, &s, &b));
      TR_TRY(mx_binary(t->mx, &score, MX_ADD, score, b));
    }
    TR_TRY(ml_post_transform(t, s.post, score, &score));
    return tr_out_cast(t, 0, score);
  }
  mx_array labels, z;
  if (s.k == 2) {
    TR_TRY(binary_classes(t, &s, score, has, &labels, &z));
  } else {
    mx_array lab, masked, low;
    if (s.n_base) {
      mx_array b, yes;
      TR_TRY(base_array(t, &s, &b));
      TR_TRY(mx_binary(t->mx, &score, MX_ADD, score, b));
      TR_TRY(mx_binary(t->mx, &yes, MX_EQUAL, b, b));
      TR_TRY(mx_binary(t->mx, &has, MX_LOGICAL_OR, has, yes));
    }
    TR_TRY(tr_scalar(t, &low, -INFINITY, MX_FLOAT32));
    TR_TRY(mx_where(t->mx, &masked, has, score, low));
    TR_TRY(mx_argmax(t->mx, &labels, masked, 1, false));
    TR_TRY(tr_ints_array(t, s.labels, (int)s.k, MX_INT64, &lab));
    TR_TRY(mx_take(t->mx, &labels, lab, labels, 0));
    TR_TRY(ml_post_transform(t, s.post, score, &z));
  }
  TR_TRY(mx_reshape(t->mx, &labels, labels, &rows, 1));
  TR_TRY(tr_out_cast(t, 0, labels));
  return tr_has_out(t, 1) ? tr_out_cast(t, 1, z) : MX_OK;
}

/* ONNX Runtime has regressor kernels for float and double X, classifier kernels for int32 and
 * int64 X as well. */
#define TREE_IN (OP_T(IR_FLOAT) | OP_F64 | OP_T(IR_INT64) | OP_T(IR_INT32))

const op_row ops_ml_tree_rows[] = {
    {"ai.onnx.ml", "TreeEnsembleRegressor", 1, 4, claim_tree, translate_tree, OP_SHAPE_KEYED,
     OP_T(IR_FLOAT) | OP_F64, 0,
     "depth-many gather steps over [N, trees]; SUM/AVERAGE/MIN/MAX; float attributes or "
     "_as_tensor ones; compared and summed in X's type (float64 on the CPU device)",
     NULL, prepare_tree, 0, NULL},
    {"ai.onnx.ml", "TreeEnsemble", 5, 5, claim_tree, translate_tree, OP_SHAPE_KEYED,
     OP_T(IR_FLOAT) | OP_F64, 0,
     "as TreeEnsembleRegressor; post_transform numbered as the spec says and "
     "BRANCH_MEMBER tested as x == a member (ONNX Runtime 1.31 departs from both)", NULL,
     prepare_tree, 0, NULL},
    {"ai.onnx.ml", "TreeEnsembleClassifier", 1, 4, claim_tree, translate_tree, OP_SHAPE_KEYED,
     TREE_IN, 0,
     "as TreeEnsembleRegressor; classlabels_int64s (strings stay with ONNX Runtime), ONNX "
     "Runtime's two-class rules (PROBIT, class-1-only weights, one class with two base values "
     "declined)", NULL, prepare_tree, 0, NULL},
    OP_ROWS_END,
};
