/*
 * The convolution helper conv.c shares with other families (quant.c's ConvInteger and
 * QLinearConv): Conv's correlation without bias, so that a caller can convolve operands it has
 * prepared itself (zero points subtracted, digits split) under the node's own window attributes.
 * The CPU device's forms of a convolution are in cpu/conv.h.
 */
#ifndef CONV_H
#define CONV_H

#include "plan/translate.h"

/* Convolves channels-first x [N, C, d...] by w [M, C/group, k...] with node n's kernel_shape,
 * strides, dilations, pads, auto_pad and group (checked against the live shapes), and writes the
 * channels-last result [N, o..., M] plus bias [M] (NULL: none), not cast, through y. */
int conv_forward_channels_last(tr_ctx *t, const ir_node *n, mx_array x, mx_array w,
                               mx_array bias, mx_array *y);


#endif
