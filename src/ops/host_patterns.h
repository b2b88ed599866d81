/*
 * Node chains one host kernel replaces on the CPU device (host_patterns.c), recognised in the
 * ONNX graph by the translator of the chain's last node: the five-node spelling of Gelu, Swish
 * as x * Sigmoid(x), layer normalisation's nine-node spelling, a
 * Softmax over scores that were scaled and masked, and chains of elementwise steps with
 * constants. The chain's inner values must be read by
 * nothing else, so the last node may compute its output from the chain's input directly; the
 * inner nodes are still translated, but MLX never evaluates what no output needs.
 */
#ifndef OPS_HOST_PATTERNS_H
#define OPS_HOST_PATTERNS_H

#include "ops/host_chain.h"
#include "plan/translate.h"

/* The node that reads value v, when one node reads it once and v is no graph output; else NULL. */
const ir_node *hp_only_reader(const tr_ctx *t, int v);

/* When node n (a Mul) ends x * (1 + erf(x / sqrt 2)) * 0.5, with the three factors in any
 * order and x / sqrt 2 spelled as a Div or as a Mul by 1 / sqrt 2, x's value index; otherwise
 * IR_NONE. */
int hp_gelu_input(tr_ctx *t, const ir_node *n);

/* Whether node n (an Erf) lies inside a chain hp_gelu_input recognises at its end. */
bool hp_erf_in_gelu(tr_ctx *t, const ir_node *n);

/* When node n (a Mul) is x * Sigmoid(x), or x * Sigmoid(x * beta) with beta a one-element float
 * constant (QuickGelu's spelling, beta 1.702), in either order, with every inner value read only
 * inside: x's value index, and beta (1 for the first form); otherwise IR_NONE.
 * hp_sigmoid_in_swish: whether Sigmoid node n is inside one. */
int hp_swish_input(tr_ctx *t, const ir_node *n, float *beta);
bool hp_sigmoid_in_swish(tr_ctx *t, const ir_node *n);

/* When node n (an Add) ends (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * scale + bias,
 * both means over the last axis with dims kept, the square as Pow(d, 2) or d * d, the Mul's and
 * the Add's operands in either order: the value indices of x, scale and bias, and eps. The
 * caller checks that scale and bias are vectors of x's last axis. */
typedef struct hp_layer_norm {
  int x, scale, bias;
  float eps;
} hp_layer_norm;
bool hp_layer_norm_of(tr_ctx *t, const ir_node *n, hp_layer_norm *ln);

/* When value v is a + b, an Add of two float32 values of v's own shape (neither broadcasts) that
 * nothing else reads, and v no graph output: a's and b's value indices. */
bool hp_sum_of(tr_ctx *t, int v, int *a, int *b);

/* What a Softmax's input folds in: the input is scores * scale (a Mul by a one-element constant,
 * or a Div by one), plus mask when mask is not IR_NONE (an Add of a float32 value whose axes align
 * with the scores' trailing ones, each 1 or the scores', the last one whole). Either step may be
 * absent; scores is a value index. */
typedef struct hp_softmax_input {
  int scores, mask;
  float scale;
} hp_softmax_input;
void hp_softmax_input_of(tr_ctx *t, const ir_node *softmax, hp_softmax_input *in);

/* When node n (a MatMul) multiplies Softmax(MatMul(q, kt) [* scale] [+ mask]) over the last axis
 * by v, the softmax's input as hp_softmax_input_of finds it, with every inner value read only
 * inside: the value indices of q, kt and v, mask (or IR_NONE) and the scale. */
typedef struct hp_attention {
  int q, kt, v, mask;
  float scale;
} hp_attention;
bool hp_attention_of(tr_ctx *t, const ir_node *n, hp_attention *a);

/* The elementwise chain that ends at node n: steps with one-element float constants on one
 * float32 value (host_chain.h), the first applied to `input`. Found when n is such a step (or
 * ends HardSwish's four-node spelling), the chain walks back through values only it reads, it
 * spans at least HP_CHAIN_MIN_NODES nodes, and n's output goes on to no further step (that step's
 * node builds the chain instead). input_private: nothing but the chain reads `input` and it is
 * no graph output (the kernel computing it may then take the chain as its epilogue). */
enum { HP_CHAIN_MIN_NODES = 3 };
typedef struct hp_chain {
  int input, n_steps, n_nodes;
  bool input_private;
  hc_step steps[HC_MAX_STEPS];
} hp_chain;
bool hp_chain_ending_at(tr_ctx *t, const ir_node *n, hp_chain *chain);

#endif
