/*
 * The operator families whose rows make up the registry, one file each under src/ops/. Listed
 * here and in registry.c's table, nowhere else.
 */
#ifndef FAMILIES_H
#define FAMILIES_H

#include "mlx/mx.h"
#include "ops/registry.h"

extern const op_row ops_elementwise_rows[]; /* arithmetic, comparison, logic, bitwise, math */
extern const op_row ops_activation_rows[];  /* Relu, Sigmoid, Tanh, Gelu, Softmax, ... */
extern const op_row ops_math_rows[];        /* MatMul, Gemm */
extern const op_row ops_shape_rows[];       /* Reshape, Transpose, Concat, Cast, Shape, ... */
extern const op_row ops_pad_rows[];         /* Pad, CenterCropPad */
extern const op_row ops_index_rows[];       /* Slice, Gather, Scatter*, OneHot */
extern const op_row ops_value_shaped_rows[]; /* Compress, NonZero, Unique */
extern const op_row ops_reduce_rows[];      /* Reduce*, ArgMax/ArgMin, CumSum/CumProd, TopK */
extern const op_row ops_norm_rows[];        /* Layer/RMS/Group/Instance/MVN/Lp norms */
extern const op_row ops_norm_channel_rows[]; /* BatchNormalization, LRN */
extern const op_row ops_resize_rows[];      /* Resize, Upsample */
extern const op_row ops_constant_rows[];    /* Constant, ConstantOfShape, Range */
extern const op_row ops_conv_rows[];        /* Conv, ConvTranspose */
extern const op_row ops_pool_rows[];        /* MaxPool, AveragePool, LpPool, Global*Pool */
extern const op_row ops_ssm_scatter_rows[];   /* TensorScatter (KV caches) */
extern const op_row ops_ssm_conv_rows[];      /* CausalConvWithState */
extern const op_row ops_ssm_attention_rows[]; /* LinearAttention */
extern const op_row ops_ssm_gates_rows[];     /* LinearAttentionGate, GatedAdd, GatedRMSNorm */
extern const op_row ops_quant_rows[];       /* Quantize/DequantizeLinear, integer products */
extern const op_row ops_attention_rows[];   /* Attention (ai.onnx 23, 24) */
extern const op_row ops_signal_rows[]; /* DFT, STFT, Hann/Hamming/BlackmanWindow, MelWeightMatrix */
/* GridSample, AffineGrid, RoiAlign, MaxUnpool, Col2Im, NMS */
extern const op_row ops_vision_rows[];
extern const op_row ops_linalg_rows[]; /* Einsum, Det */
extern const op_row ops_random_rows[]; /* RandomNormal/Uniform(Like), Bernoulli, Multinomial */
extern const op_row ops_rnn_rows[]; /* RNN, GRU, LSTM */
/* Sequence*, SplitToSequence, ConcatFromSequence, Optional* */
extern const op_row ops_sequence_rows[];
extern const op_row ops_control_rows[]; /* If, Loop, Scan (subgraphs unrolled) */
/* RotaryEmbedding, NLL/SoftmaxCrossEntropy losses, MaxRoiPool */
extern const op_row ops_misc_nn_rows[];
extern const op_row ops_deform_conv_rows[]; /* DeformConv (2-D) */
extern const op_row ops_tfidf_rows[];       /* TfIdfVectorizer (integer pools) */
extern const op_row ops_ml_rows[];      /* ai.onnx.ml: Scaler, Linear*, LabelEncoder, ... */
extern const op_row ops_ml_tree_rows[]; /* ai.onnx.ml: TreeEnsemble* */
extern const op_row ops_ml_svm_rows[];  /* ai.onnx.ml: SVMRegressor, SVMClassifier */
extern const op_row ops_llm_quant_rows[];   /* MatMulNBits (com.microsoft) */
extern const op_row ops_llm_rotary_rows[]; /* RotaryEmbedding (com.microsoft) */
extern const op_row ops_llm_attention_rows[]; /* GroupQueryAttention (com.microsoft) */
extern const op_row ops_llm_gather_rows[]; /* GatherBlockQuantized (com.microsoft) */
/* FastGelu, BiasGelu, QuickGelu, FusedMatMul (com.microsoft) */
extern const op_row ops_llm_fused_rows[];
extern const op_row ops_llm_mha_rows[]; /* MultiHeadAttention (com.microsoft) */
/* SimplifiedLayerNormalization, Skip(Simplified)LayerNormalization */
extern const op_row ops_llm_norm_rows[];

/* Translators shared by several families (ops/common.c): one bridge op named by row->code,
 * its result cast to the declared output type. */
int op_translate_unary(struct tr_ctx *t, const ir_node *n, const op_row *r);
int op_translate_binary(struct tr_ctx *t, const ir_node *n, const op_row *r);

/* Claim helpers shared by several families (ops/common.c): a known rank MLX arrays can hold; a
 * shape-valued input (constant, or of known length) of at most cap values. Both decline with
 * a reason naming `what`. */
bool op_rank_fits(const ir_value *v, const char *what, op_why why);
bool op_ints_fit(const ir_graph *g, const ir_node *n, int i, size_t cap, const char *what,
                 op_why why);

/* Gelu of x in x's type (ops/activation.c; also com.microsoft's FastGelu and BiasGelu):
 * 0.5 x (1 + erf(x / sqrt 2)), or with `tanh_form`
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
int op_gelu(struct tr_ctx *t, mx_array x, bool tanh_form, mx_array *y);

#endif
