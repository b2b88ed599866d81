/*
 * What the tree-ensemble files share (ops/ml_tree.c: TreeEnsembleRegressor/Classifier and the
 * array program; ops/ml_tree5.c: TreeEnsemble 5's layout): the model as read from the
 * attributes, the flat node tables both layouts are turned into, and the steps that finish them.
 */
#ifndef OPS_ML_TREE_H
#define OPS_ML_TREE_H

#include "ir/ir.h"
#include "ops/ml.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { M_LEQ, M_LT, M_GTE, M_GT, M_EQ, M_NEQ, M_LEAF, M_COUNT, M_MEMBER = M_COUNT };
enum { AGG_SUM, AGG_AVERAGE, AGG_MIN, AGG_MAX };
enum { TREE_MAX_DEPTH = 4096, TREE_MAX_NODES = 1 << 24 };

typedef struct tree_spec {
  bool classifier;
  size_t n_nodes, n_weights;
  const int64_t *tree, *node, *feature, *truen, *falsen, *missing, *w_tree, *w_node, *w_id;
  size_t n_missing;
  const char *modes; /* back to back, NUL-terminated */
  const float *thr_f;
  const double *thr_d;
  const float *w_f;
  const double *w_d;
  const float *base_f;
  const double *base_d;
  size_t n_base;
  int64_t k; /* targets or classes */
  const int64_t *labels;
  int agg;
  ml_post post;
} tree_spec;

typedef struct tree_tables {
  int32_t *info; /* [G + 2, 4]: per node feature, true, false, mode | 8 (NaN goes true); then
                  * (depth, trees, modes met, any NaN rule) and (features read, 0, 0, 0) */
  double *thr;   /* [G, W]: the threshold, then a BRANCH_MEMBER node's set (NaN padded) */
  double *leaf;  /* [G, 2K] (float32 on the device unless X is float64) */
  int n_trees, depth, width;
  unsigned modes; /* bit per mode met */
  bool missing;   /* some node sends NaN to its true child */
  int32_t features; /* 1 + the largest feature a branch reads */
} tree_tables;

/* An ints attribute (NULL and 0 when absent). */
const int64_t *ml_tree_ints(const ir_node *n, const char *name, size_t *count);
void ml_tree_tables_free(tree_tables *tt);
/* The depth of the deepest leaf from the roots (nodes 0 .. roots - 1); false (with a reason)
 * when a node is reached twice or the trees are too deep. level: scratch of g entries. */
bool ml_tree_depth(tree_tables *tt, size_t g, size_t roots, int32_t *level, char *err,
                   size_t len);
/* Writes the two rows after the g nodes (depth, trees, modes met, NaN rule; features read). */
void ml_tree_meta(tree_tables *tt, size_t g);
/* TreeEnsemble (ai.onnx.ml 5): its spec (targets, aggregate, post-transform), and the tables. */
bool ml_tree5_read(const ir_node *n, tree_spec *s, char *err, size_t len);
bool ml_tree5_build(const ir_node *n, tree_spec *s, tree_tables *tt, char *err, size_t len);

#endif
