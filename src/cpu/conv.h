/*
 * The CPU device's forms of a convolution, which ops/conv.c hands a node to when one applies:
 * depthwise and im2col host loops (conv_depthwise.c, conv_im2col.c), and matrix-product forms
 * (conv.c), with the weight operands conv.c's prepare hook makes once from constant weights.
 */
#ifndef CPU_CONV_H
#define CPU_CONV_H

#include "plan/translate.h"

#include <stdint.h>

/* true when a channels-last depthwise convolution (x [N, s..., C], w [C, k..., 1])
 * is better run by conv_depthwise.c's host loop on the CPU device than by MLX's CPU loops. bias:
 * [C] or NULL, added by the loop when it is float32 [C], after it otherwise. */
bool cpu_conv_depthwise_applies(const tr_ctx *t, mx_array x, mx_array w, int nd, int groups,
                                const int *lo, const int *hi, const int *idil, bool flip);
int cpu_conv_depthwise(tr_ctx *t, mx_array x, mx_array w, mx_array rows, mx_array bias, int nd,
                       const int *stride, const int *lo, const int *hi, const int *kdil,
                       mx_array *y);

/* The geometry the CPU host loops (conv_depthwise.c, conv_im2col.c) read: 1-D and 2-D
 * convolutions as 3-D with leading extents 1; c: the input's channels. */
typedef struct conv_window {
  int n, c;
  int in[3], out[3], k[3], stride[3], lo[3], dil[3];
} conv_window;
/* x [N, s..., C] and rows [taps, C] float32, bias float32 [C] or NULL; y [N, out..., C]. */
int cpu_conv_depthwise_loop(tr_ctx *t, mx_array x, mx_array rows, mx_array bias,
                         const conv_window *g, mx_array *y);
/* x [N, s..., C] float32, any strides, to the columns [N * positions, taps * C] of an im2col
 * product: row p holds output position p's window, tap-major, zeros where it leaves the input. */
int cpu_conv_im2col_loop(tr_ctx *t, mx_array x, const conv_window *g, mx_array *cols);
/* whether a grouped convolution is better run group by group (MLX's CPU backend
 * takes its BLAS path only for one group; up to CPU_CONV_MAX_SPLIT groups). */
enum { CPU_CONV_MAX_SPLIT = 64 };
bool cpu_conv_split_groups(const tr_ctx *t, int groups);
/* a 1x..x1 convolution (groups 1, no padding) as one matrix product, plus bias [O]
 * (NULL: none). Only where the graph compiles keyed on shapes (addmm). packed: the weight packed
 * at plan build for the plugin's product (matmul.c), or NULL. */
bool cpu_conv_pointwise_applies(const tr_ctx *t, mx_array x, mx_array w, int nd, int groups,
                                const int *lo, const int *hi, const int *idil, bool flip);
int cpu_conv_pointwise(tr_ctx *t, mx_array x, mx_array w, mx_array wm, mx_array packed,
                       mx_array bias, int nd, const int *stride, mx_array *y);
/* an ungrouped stride-1 convolution with more than one tap as one matrix product per
 * tap over shifted row blocks of the padded input, plus bias [O] (NULL: none). mats: the weight's
 * prepared [taps, C, O] matrices, or NULL. Only where the graph compiles keyed on shapes. */
bool cpu_conv_taps_gemm_applies(const tr_ctx *t, mx_array x, mx_array w, int nd, int groups,
                                const int *stride, const int *lo, const int *hi, const int *idil,
                                bool flip);
int cpu_conv_taps_gemm(tr_ctx *t, mx_array x, mx_array w, mx_array mats, mx_array bias, int nd,
                       const int *lo, const int *hi, const int *kdil, mx_array *y);
/* any other ungrouped float32 convolution as an im2col copy and one product over
 * the packed [taps * C, O] weight matrix (packed: packed at plan build from a constant weight,
 * or NULL), plus bias [O] (NULL: none). Where the graph compiles keyed on shapes. */
bool cpu_conv_im2col_applies(const tr_ctx *t, mx_array x, mx_array w, int nd, int groups,
                             const int *lo, const int *hi, const int *idil, bool flip);
int cpu_conv_im2col(tr_ctx *t, mx_array x, mx_array w, mx_array packed, mx_array bias, int nd,
                    const int *stride, const int *lo, const int *hi, const int *kdil,
                    mx_array *y);
/* ConvTranspose whose kernel equals its stride (groups 1, no dilation) as one matrix
 * product; head/out: where each output axis starts in the full output, and its length. */
bool cpu_conv_transpose_applies(const tr_ctx *t, mx_array x, mx_array w, int nd, int groups,
                                const int64_t *stride, const int64_t *dilation);
int cpu_conv_transpose(tr_ctx *t, mx_array x, mx_array w, mx_array wm, int nd,
                       const int *head, const int *out, mx_array *y);
/* the weight operand of the form above that node n's constant weight w (MLX's layout)
 * can take, made once at plan build and passed back as rows / wm; NULL when none applies. The
 * forms rebuild it themselves when given NULL (a weight computed in the graph). For a pointwise
 * convolution, or another ungrouped one (its im2col matrix), also *packed, the operand packed for
 * the plugin's product (else NULL). */
int cpu_conv_prepare(tr_ctx *t, const ir_node *n, mx_array w, bool transposed, mx_array *form,
                     mx_array *packed);

#endif
