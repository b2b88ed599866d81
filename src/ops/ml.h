/*
 * Helpers the ai.onnx.ml families share (ops/ml.c, ml_tree.c, ml_svm.c): the post-transforms ONNX
 * Runtime's CPU provider applies to classifier and regressor scores, and reading the ONNX
 * spelling of a post_transform. Scores are [N, K].
 */
#ifndef OPS_ML_H
#define OPS_ML_H

#include "ir/ir.h"
#include "plan/translate.h"

typedef enum ml_post {
  ML_POST_NONE, ML_POST_LOGISTIC, ML_POST_SOFTMAX, ML_POST_SOFTMAX_ZERO, ML_POST_PROBIT
} ml_post;

/* The node's post_transform; false for a spelling ONNX does not define. */
bool ml_read_post(const ir_node *n, ml_post *out);
/* Applies a post-transform to scores [N, K] as ONNX Runtime does: with K > 1 every transform;
 * with K == 1 only PROBIT (the others leave a lone score as it is); float64 scores are
 * transformed in float32, as there. */
int ml_post_transform(tr_ctx *t, ml_post post, mx_array scores, mx_array *out);
/* ONNX Runtime's probit: sqrt(2) * erfinv(2p - 1), with its closed-form erfinv approximation. */
int ml_probit(tr_ctx *t, mx_array p, mx_array *out);
/* A float32 array of count values from an attribute, shaped [1, count] (or [count] if flat). */
int ml_floats(tr_ctx *t, const float *v, int count, bool flat, mx_array *out);

#endif
