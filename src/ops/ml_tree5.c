/*
 * TreeEnsemble (ai.onnx.ml 5) read into the flat tables of ops/ml_tree.c, which evaluates it as
 * it evaluates TreeEnsembleRegressor. Its layout differs: interior nodes name their children as
 * nodes or leaves (nodes_trueleafs/falseleafs), leaves stand apart with one target and weight
 * each, modes are a uint8 tensor (BRANCH_MEMBER among them, its sets in membership_values split
 * by NaN), and aggregate_function and post_transform are numbers.
 */
#include "ops/ml_tree.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Its own layout: interior nodes with leaf-or-node children, leaves apart (one target and weight
 * each), modes as a uint8 tensor, BRANCH_MEMBER sets in membership_values split by NaN. */
typedef struct tree5_spec {
  size_t n_nodes, n_leaves, n_roots, n_members;
  const int64_t *roots, *feature, *truen, *falsen, *trueleaf, *falseleaf, *missing, *target;
  size_t n_missing;
  const uint8_t *modes;
  const float *splits_f, *weights_f, *members_f; /* float tensors, or */
  const double *splits_d, *weights_d, *members_d; /* double ones (float64 X) */
} tree5_spec;

static const void *tensor_of(const ir_node *n, const char *name, int type, size_t *count) {
  const ir_attr *a = ir_find_attr(n, name);
  *count = 0;
  if (!a || a->type != IR_ATTR_TENSOR || a->tensor_elem_type != type) return NULL;
  *count = a->tensor_bytes / ir_elem_size(type);
  return a->tensor_data;
}

static double member_at(const tree5_spec *v, size_t i) {
  return v->members_f ? v->members_f[i] : v->members_d[i];
}

static bool tree5_read(const ir_node *n, tree_spec *s, tree5_spec *v, char *err, size_t len) {
  memset(s, 0, sizeof *s);
  memset(v, 0, sizeof *v);
  size_t c[7], cm, cs, cw;
  v->roots = ml_tree_ints(n, "tree_roots", &v->n_roots);
  v->feature = ml_tree_ints(n, "nodes_featureids", &c[0]);
  v->truen = ml_tree_ints(n, "nodes_truenodeids", &c[1]);
  v->falsen = ml_tree_ints(n, "nodes_falsenodeids", &c[2]);
  v->trueleaf = ml_tree_ints(n, "nodes_trueleafs", &c[3]);
  v->falseleaf = ml_tree_ints(n, "nodes_falseleafs", &c[4]);
  v->missing = ml_tree_ints(n, "nodes_missing_value_tracks_true", &v->n_missing);
  v->target = ml_tree_ints(n, "leaf_targetids", &v->n_leaves);
  v->modes = tensor_of(n, "nodes_modes", IR_UINT8, &cm);
  v->splits_f = tensor_of(n, "nodes_splits", IR_FLOAT, &cs);
  v->weights_f = tensor_of(n, "leaf_weights", IR_FLOAT, &cw);
  v->members_f = tensor_of(n, "membership_values", IR_FLOAT, &v->n_members);
  if (!v->splits_f) v->splits_d = tensor_of(n, "nodes_splits", IR_DOUBLE, &cs);
  if (!v->weights_f) v->weights_d = tensor_of(n, "leaf_weights", IR_DOUBLE, &cw);
  if (!v->members_f) v->members_d = tensor_of(n, "membership_values", IR_DOUBLE, &v->n_members);
  v->n_nodes = c[0];
  c[5] = cm, c[6] = cs;
  for (int i = 1; i < 7; i++)
    if (c[i] != v->n_nodes) {
      snprintf(err, len, "nodes_* have different lengths (nodes_splits, leaf_weights and "
               "membership_values must be float or double tensors, nodes_modes uint8)");
      return false;
    }
  if (v->n_nodes == 0 || v->n_nodes + v->n_leaves > TREE_MAX_NODES || v->n_roots == 0 ||
      cw != v->n_leaves || (v->n_missing && v->n_missing != v->n_nodes)) {
    snprintf(err, len, "%zu nodes, %zu leaves, %zu weights and %zu roots do not fit together",
             v->n_nodes, v->n_leaves, cw, v->n_roots);
    return false;
  }
  s->k = ir_attr_int(n, "n_targets", 1);
  s->agg = (int)ir_attr_int(n, "aggregate_function", 1);
  int64_t post = ir_attr_int(n, "post_transform", 0);
  /* The spec's numbering: NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO, PROBIT. ONNX Runtime 1.31
   * reads 1 and 2 in its own enum's order (LOGISTIC, SOFTMAX); the spec wins here. */
  static const ml_post posts[] = {ML_POST_NONE, ML_POST_SOFTMAX, ML_POST_LOGISTIC,
                                  ML_POST_SOFTMAX_ZERO, ML_POST_PROBIT};
  static const int aggs[] = {AGG_AVERAGE, AGG_SUM, AGG_MIN, AGG_MAX};
  if (s->agg < 0 || s->agg > 3 || post < 0 || post > 4 || s->k < 1 || s->k > (1 << 16)) {
    snprintf(err, len, "aggregate_function %d, post_transform %lld or n_targets %lld is out of "
             "range", s->agg, (long long)post, (long long)s->k);
    return false;
  }
  s->agg = aggs[s->agg];
  s->post = posts[post];
  s->n_nodes = v->n_nodes + v->n_leaves;
  for (size_t i = 0; i < v->n_leaves; i++)
    if (v->target[i] < 0 || v->target[i] >= s->k) {
      snprintf(err, len, "leaf_targetids[%zu] is outside [0, %lld)", i, (long long)s->k);
      return false;
    }
  return true;
}

/* Roots first (in tree_roots order), the other nodes after them, then the leaves. */
static bool tables_build5(const tree_spec *s, const tree5_spec *v, tree_tables *tt, char *err,
                          size_t len) {
  memset(tt, 0, sizeof *tt);
  size_t nodes = v->n_nodes, g = nodes + v->n_leaves, k2 = (size_t)s->k * 2, most = 0;
  for (size_t i = 0, run = 0; i <= v->n_members; i++) { /* the largest set */
    if (i == v->n_members || isnan(member_at(v, i))) {
      most = run > most ? run : most;
      run = 0;
    } else {
      run++;
    }
  }
  tt->width = 1 + (int)most;
  int32_t *place = malloc(sizeof *place * (nodes ? nodes : 1)), *level = malloc(sizeof *level * g);
  tt->info = calloc((g + 2) * 4, sizeof *tt->info);
  tt->thr = calloc(g * (size_t)tt->width, sizeof *tt->thr);
  tt->leaf = calloc(g * k2, sizeof *tt->leaf);
  bool ok = false;
  if (!place || !level || !tt->info || !tt->thr || !tt->leaf) {
    snprintf(err, len, "out of memory building the tree tables");
    goto done;
  }
  for (size_t i = 0; i < nodes; i++) place[i] = -1;
  for (size_t r = 0; r < v->n_roots; r++) {
    if (v->roots[r] < 0 || (size_t)v->roots[r] >= nodes || place[v->roots[r]] >= 0) {
      snprintf(err, len, "tree_roots[%zu] = %lld is not a distinct node", r,
               (long long)v->roots[r]);
      goto done;
    }
    place[v->roots[r]] = (int32_t)r;
  }
  size_t next = v->n_roots;
  for (size_t i = 0; i < nodes; i++)
    if (place[i] < 0) place[i] = (int32_t)next++;
  tt->n_trees = (int)v->n_roots;
  size_t member = 0;
  for (size_t i = 0; i < nodes; i++) {
    int32_t *row = tt->info + (size_t)place[i] * 4;
    int mode = v->modes[i] == 6 ? M_MEMBER : v->modes[i];
    if (v->modes[i] > 6) {
      snprintf(err, len, "nodes_modes[%zu] = %d is not a mode", i, v->modes[i]);
      goto done;
    }
    int64_t ids[2] = {v->truen[i], v->falsen[i]}, leafs[2] = {v->trueleaf[i], v->falseleaf[i]};
    for (int c = 0; c < 2; c++) {
      size_t bound = leafs[c] ? v->n_leaves : nodes;
      if (ids[c] < 0 || (size_t)ids[c] >= bound) {
        snprintf(err, len, "node %zu's %s child %lld is out of range", i, c ? "false" : "true",
                 (long long)ids[c]);
        goto done;
      }
      row[1 + c] = leafs[c] ? (int32_t)(nodes + (size_t)ids[c]) : place[ids[c]];
    }
    if (v->feature[i] < 0 || v->feature[i] > INT32_MAX) {
      snprintf(err, len, "nodes_featureids[%zu] is out of range", i);
      goto done;
    }
    bool miss = v->n_missing && v->missing[i];
    row[0] = (int32_t)v->feature[i], row[3] = mode | (miss ? 8 : 0);
    tt->missing |= miss;
    tt->modes |= 1u << mode;
    if (row[0] + 1 > tt->features) tt->features = row[0] + 1;
    double *th = tt->thr + (size_t)place[i] * (size_t)tt->width;
    th[0] = v->splits_f ? v->splits_f[i] : v->splits_d[i];
    for (int m = 1; m < tt->width; m++) th[m] = NAN;
    if (mode == M_MEMBER) { /* this node's set: the next run of membership_values */
      if (member >= v->n_members) {
        snprintf(err, len, "membership_values has fewer sets than BRANCH_MEMBER nodes");
        goto done;
      }
      for (int m = 1; member < v->n_members && !isnan(member_at(v, member)); member++)
        th[m++] = member_at(v, member);
      if (member < v->n_members) member++; /* the NaN delimiter */
    }
  }
  for (size_t l = 0; l < v->n_leaves; l++) {
    size_t at = nodes + l;
    int32_t *row = tt->info + at * 4;
    row[1] = row[2] = (int32_t)at, row[3] = M_LEAF;
    tt->leaf[at * k2 + (size_t)v->target[l]] = v->weights_f ? v->weights_f[l] : v->weights_d[l];
    tt->leaf[at * k2 + (size_t)s->k + (size_t)v->target[l]] = 1.0f;
  }
  if (!ml_tree_depth(tt, g, v->n_roots, level, err, len)) goto done;
  ml_tree_meta(tt, g);
  ok = true;
done:
  free(place);
  free(level);
  if (!ok) ml_tree_tables_free(tt);
  return ok;
}

bool ml_tree5_read(const ir_node *n, tree_spec *s, char *err, size_t len) {
  tree5_spec v;
  return tree5_read(n, s, &v, err, len);
}

bool ml_tree5_build(const ir_node *n, tree_spec *s, tree_tables *tt, char *err, size_t len) {
  tree5_spec v;
  return tree5_read(n, s, &v, err, len) && tables_build5(s, &v, tt, err, len);
}
