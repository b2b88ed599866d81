/*
 * The graph matchers behind the fusion table (ops/fusions.c): they recognise, at plan build,
 * the node chains one kernel replaces: the five-node spelling of Gelu, Swish as x * Sigmoid(x),
 * layer normalisation's nine-node spelling, a Softmax over scores that were scaled and masked,
 * attention spelled in nodes, and chains of elementwise steps with constants. They read only
 * the graph snapshot (ranks where the snapshot knows them) and the plan's constants, never a
 * Run's arrays: whatever depends on live dtypes and shapes is left to the row's build, which
 * checks it and may decline. A chain's inner values must be read by nothing else, so its last
 * node may compute its output from the chain's input directly; the inner nodes are still
 * translated, but MLX never evaluates what no output needs.
 */
#ifndef OPS_FUSION_MATCH_H
#define OPS_FUSION_MATCH_H

#include "cpu/chain.h"
#include "ir/ir.h"
#include "mlx/mx.h"

#include <stdbool.h>

/* What a matcher sees: the graph, its constants (per value, NULL unless constant; the
 * initializers and the values constant folding computed), a bridge context to read them, and
 * which values are computed from input shapes and constants alone (per value, or NULL): a keyed
 * variant knows those before its trace, so a softmax's scale may be one of them. */
typedef struct fz_graph {
  const ir_graph *g;
  const mx_array *consts;
  mx_ctx *mx;
  const bool *from_shapes;
} fz_graph;

/* The node that reads value v, when one node reads it once and v is no graph output; else NULL. */
const ir_node *fz_only_reader(const ir_graph *g, int v);

/* When node n (a Mul) ends x * (1 + erf(x / sqrt 2)) * 0.5, with the three factors in any
 * order and x / sqrt 2 spelled as a Div or as a Mul by 1 / sqrt 2: x's value index, the Erf's
 * node index and the widest rank of the constants (the build checks it does not exceed x's);
 * otherwise false. */
typedef struct fz_gelu {
  int x, erf_node, const_rank;
} fz_gelu;
bool fz_match_gelu(const fz_graph *f, const ir_node *n, fz_gelu *m);

/* When node n (a Mul) is x * Sigmoid(x), or x * Sigmoid(x * beta) with beta a one-element float
 * constant (QuickGelu's spelling, beta 1.702), in either order, with every inner value read only
 * inside: x's value index, beta (1 for the first form), beta's rank (0 without one) and the
 * Sigmoid's node index. */
typedef struct fz_swish {
  int x, sigmoid_node, const_rank;
  float beta;
} fz_swish;
bool fz_match_swish(const fz_graph *f, const ir_node *n, fz_swish *m);

/* When node n (an Add) ends (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * scale + bias,
 * both means over the last axis with dims kept, the square as Pow(d, 2) or d * d, the Mul's and
 * the Add's operands in either order: the value indices of x, scale and bias, and eps. A mean
 * over a positive axis is the last one only for x of rank axis + 1: need_rank (-1 when the
 * axes were -1). The build checks that scale and bias are vectors of x's last axis. */
typedef struct fz_layer_norm {
  int x, scale, bias, need_rank;
  float eps;
} fz_layer_norm;
bool fz_match_layer_norm(const fz_graph *f, const ir_node *n, fz_layer_norm *m);

/* When value v is a + b, an Add that nothing else reads, and v no graph output: a's and b's
 * value indices (the build checks both are float32 of v's own shape). */
bool fz_match_sum(const fz_graph *f, int v, int *a, int *b);

/* What a Softmax's input may fold in, as far as the graph tells: the input, an Add of two values
 * (one of them the mask) that only the Softmax reads, and for each candidate scores value (the
 * input, the Add's first or second operand) the scaling it may undo: a Mul by a one-element
 * constant, or a Div by one, read only there. Which operand is the mask and whether the scale
 * folds depend on live dtypes and shapes: fz_softmax_input_live decides. A scale computed from
 * shapes is read there too, from the values the translation knows. */
typedef struct fz_scaled {
  int n;          /* candidates: 0, 1 (a Div) or 2 (a Mul's operands) */
  int base[2];    /* the value scaled */
  int rank[2];    /* the constant's rank */
  double c[2];    /* the constant */
  int from_shapes[2]; /* the scale's value index when computed from shapes, else IR_NONE */
  bool div;
} fz_scaled;
typedef struct fz_softmax {
  int input;
  int add[2]; /* the Add's operands, or IR_NONE */
  fz_scaled scaled[3]; /* for input, add[0], add[1] */
} fz_softmax;
void fz_match_softmax(const fz_graph *f, const ir_node *softmax, fz_softmax *m);

/* The softmax's input as it folds for the arrays of this translation (values and known, the
 * values fixed for it, per value index): scores * scale, plus mask when mask is not IR_NONE (a
 * float32 value whose axes align with the scores' trailing ones, each 1 or the scores', the
 * last one whole). */
typedef struct fz_softmax_input {
  int scores, mask;
  float scale;
} fz_softmax_input;
void fz_softmax_input_live(const fz_softmax *m, const mx_array *values, const mx_array *known,
                           mx_ctx *mx, fz_softmax_input *in);

/* When node n (a MatMul) multiplies Softmax(MatMul(q, kt) [* scale] [+ mask]) by v, with every
 * inner value read only inside: the Softmax's input as fz_match_softmax finds it, and the value
 * index of v. The Softmax must run over the last axis: when its axis is a positive one, x's rank
 * must be axis + 1 (need_rank, -1 when the axis was -1). The build confirms the live choice of
 * scores with fz_attention_product. */
typedef struct fz_attention {
  fz_softmax softmax;
  int v, need_rank;
} fz_attention;
bool fz_match_attention(const fz_graph *f, const ir_node *n, fz_attention *m);
/* The inner MatMul whose product is the attention's scores value, or NULL. */
const ir_node *fz_attention_product(const ir_graph *g, int scores);

/* The elementwise chain that ends at node n: steps with one-element float constants on one
 * value (cpu/chain.h), the first applied to `input`. Found when n is such a step (or ends
 * HardSwish's four-node spelling), the chain walks back through values only it reads, it spans
 * at least FZ_CHAIN_MIN_NODES nodes, and n's output goes on to no further step (that step's node
 * builds the chain instead). input_private: nothing but the chain reads `input` and it is no
 * graph output (the kernel computing it may then take the chain as its epilogue). const_rank:
 * the widest rank of the constants, which must not exceed the input's (the build checks it,
 * with the input's dtype, float32). */
enum { FZ_CHAIN_MIN_NODES = 3 };
typedef struct fz_chain {
  int input, n_steps, n_nodes, const_rank;
  bool input_private;
  cpu_chain_step steps[CPU_CHAIN_MAX_STEPS];
} fz_chain;
bool fz_match_chain(const fz_graph *f, const ir_node *n, fz_chain *m);

struct tr_ctx;
struct op_fusion;

/* One match of a row at its anchor: what the row's build needs. */
typedef struct op_fusion_match {
  const struct op_fusion *row;
  union {
    fz_layer_norm layer_norm;
    fz_gelu gelu;
    fz_swish swish;
    fz_chain chain;
    fz_softmax softmax;
    fz_attention attention;
    struct { int a, b; } sum;     /* the residual Add's operands */
    unsigned product_inputs;      /* bias: bit i when the anchor's input i is a MatMul's */
  } u;
} op_fusion_match;

/* The builds, beside their anchors' translators. */
int op_build_layer_norm_nodes(struct tr_ctx *t, const ir_node *n, const op_fusion_match *m,
                              bool *done);                               /* elementwise.c */
int op_build_bias_into_product(struct tr_ctx *t, const ir_node *n, const op_fusion_match *m,
                               bool *done);                              /* elementwise.c */
int op_build_gelu_nodes(struct tr_ctx *t, const ir_node *n, const op_fusion_match *m,
                        bool *done);                                     /* elementwise.c */
int op_build_swish_nodes(struct tr_ctx *t, const ir_node *n, const op_fusion_match *m,
                         bool *done);                                    /* elementwise.c */
int op_build_chain(struct tr_ctx *t, const ir_node *n, const op_fusion_match *m,
                   bool *done);                                          /* common.c */
int op_build_softmax_folds(struct tr_ctx *t, const ir_node *n, const op_fusion_match *m,
                           bool *done);                                  /* activation.c */
int op_build_attention_nodes(struct tr_ctx *t, const ir_node *n, const op_fusion_match *m,
                             bool *done);                                /* math.c */
int op_build_residual_layer_norm(struct tr_ctx *t, const ir_node *n, const op_fusion_match *m,
                                 bool *done);                            /* norm.c */
int op_build_hard_sigmoid_epilogue(struct tr_ctx *t, const ir_node *n, const op_fusion_match *m,
                                   bool *done);                          /* activation.c */
int op_build_concat_channels_last(struct tr_ctx *t, const ir_node *n, const op_fusion_match *m,
                                  bool *done);                           /* shape.c */

#endif
