/*
 * The operator families whose rows make up the registry, one file each under src/ops/. Listed
 * here and in registry.c's table, nowhere else.
 */
#ifndef FAMILIES_H
#define FAMILIES_H

#include "ops/registry.h"

extern const op_row ops_elementwise_rows[]; /* arithmetic, comparison, logic, unary math */
extern const op_row ops_activation_rows[];  /* Relu, Sigmoid, Tanh, Gelu, Softmax, ... */
extern const op_row ops_math_rows[];        /* MatMul, Gemm */
extern const op_row ops_shape_rows[];       /* Reshape, Transpose, Concat, Cast, Shape, ... */
extern const op_row ops_index_rows[];       /* Slice, Gather */
extern const op_row ops_reduce_rows[];      /* ReduceSum, ReduceMean, ReduceMax */
extern const op_row ops_norm_rows[];        /* LayerNormalization */
extern const op_row ops_constant_rows[];    /* Constant, ConstantOfShape, Range */

#endif
