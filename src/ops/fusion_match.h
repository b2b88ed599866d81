/*
 * Node chains one host kernel replaces on the CPU device (patterns.c), recognised in the
 * ONNX graph by the translator of the chain's last node: the five-node spelling of Gelu, Swish
 * as x * Sigmoid(x), layer normalisation's nine-node spelling, a
 * Softmax over scores that were scaled and masked, and chains of elementwise steps with
 * constants. The chain's inner values must be read by
 * nothing else, so the last node may compute its output from the chain's input directly; the
 * inner nodes are still translated, but MLX never evaluates what no output needs.
 */
#ifndef OPS_FUSION_MATCH_H
#define OPS_FUSION_MATCH_H

#include "cpu/chain.h"
#include "plan/translate.h"

/* The node that reads value v, when one node reads it once and v is no graph output; else NULL. */
const ir_node *cpu_match_only_reader(const tr_ctx *t, int v);

/* When node n (a Mul) ends x * (1 + erf(x / sqrt 2)) * 0.5, with the three factors in any
 * order and x / sqrt 2 spelled as a Div or as a Mul by 1 / sqrt 2, x's value index; otherwise
 * IR_NONE. */
int cpu_match_gelu_input(tr_ctx *t, const ir_node *n);

/* Whether node n (an Erf) lies inside a chain cpu_match_gelu_input recognises at its end. */
bool cpu_match_erf_in_gelu(tr_ctx *t, const ir_node *n);

/* When node n (a Mul) is x * Sigmoid(x), or x * Sigmoid(x * beta) with beta a one-element float
 * constant (QuickGelu's spelling, beta 1.702), in either order, with every inner value read only
 * inside: x's value index, and beta (1 for the first form); otherwise IR_NONE.
 * cpu_match_sigmoid_in_swish: whether Sigmoid node n is inside one. */
int cpu_match_swish_input(tr_ctx *t, const ir_node *n, float *beta);
bool cpu_match_sigmoid_in_swish(tr_ctx *t, const ir_node *n);

/* When node n (an Add) ends (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * scale + bias,
 * both means over the last axis with dims kept, the square as Pow(d, 2) or d * d, the Mul's and
 * the Add's operands in either order: the value indices of x, scale and bias, and eps. The
 * caller checks that scale and bias are vectors of x's last axis. */
typedef struct cpu_match_layer_norm {
  int x, scale, bias;
  float eps;
} cpu_match_layer_norm;
bool cpu_match_layer_norm_of(tr_ctx *t, const ir_node *n, cpu_match_layer_norm *ln);

/* When value v is a + b, an Add of two float32 values of v's own shape (neither broadcasts) that
 * nothing else reads, and v no graph output: a's and b's value indices. */
bool cpu_match_sum_of(tr_ctx *t, int v, int *a, int *b);

/* What a Softmax's input folds in: the input is scores * scale (a Mul by a one-element constant,
 * or a Div by one), plus mask when mask is not IR_NONE (an Add of a float32 value whose axes align
 * with the scores' trailing ones, each 1 or the scores', the last one whole). Either step may be
 * absent; scores is a value index. */
typedef struct cpu_match_softmax_input {
  int scores, mask;
  float scale;
} cpu_match_softmax_input;
void cpu_match_softmax_input_of(tr_ctx *t, const ir_node *softmax, cpu_match_softmax_input *in);

/* When node n (a MatMul) multiplies Softmax(MatMul(q, kt) [* scale] [+ mask]) over the last axis
 * by v, the softmax's input as cpu_match_softmax_input_of finds it, with every inner value read
 * only inside: the value indices of q, kt and v, mask (or IR_NONE) and the scale. */
typedef struct cpu_match_attention {
  int q, kt, v, mask;
  float scale;
} cpu_match_attention;
bool cpu_match_attention_of(tr_ctx *t, const ir_node *n, cpu_match_attention *a);

/* The elementwise chain that ends at node n: steps with one-element float constants on one
 * float32 value (chain.h), the first applied to `input`. Found when n is such a step (or
 * ends HardSwish's four-node spelling), the chain walks back through values only it reads, it
 * spans at least CPU_MATCH_CHAIN_MIN_NODES nodes, and n's output goes on to no further step (that
 * step's node builds the chain instead). input_private: nothing but the chain reads `input` and it
 * is no graph output (the kernel computing it may then take the chain as its epilogue). */
enum { CPU_MATCH_CHAIN_MIN_NODES = 3 };
typedef struct cpu_match_chain {
  int input, n_steps, n_nodes;
  bool input_private;
  cpu_chain_step steps[CPU_CHAIN_MAX_STEPS];
} cpu_match_chain;
bool cpu_match_chain_ending_at(tr_ctx *t, const ir_node *n, cpu_match_chain *chain);

#endif
