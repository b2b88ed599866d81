/*
 * The attributes shared by the sliding-window operators (Conv, ConvTranspose and the pools):
 * kernel_shape, strides, dilations, pads and auto_pad, read once with ONNX's defaults and checked
 * for the counts and signs ONNX requires, plus the SAME padding rule. Used by both a row's claim
 * (to decline with the message) and its translator (to build the MLX ops), so the two agree.
 */
#ifndef WINDOW_H
#define WINDOW_H

#include "ir/ir.h"
#include "mlx/mx.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { WIN_MAX_DIMS = MX_MAX_RANK - 2 };

typedef enum win_auto_pad { WIN_NOTSET, WIN_SAME_UPPER, WIN_SAME_LOWER, WIN_VALID } win_auto_pad;

typedef struct win_attrs {
  int nd;          /* spatial dimensions */
  bool has_kernel; /* kernel_shape was given (else kernel[] is zero until the caller fills it) */
  int64_t kernel[WIN_MAX_DIMS], stride[WIN_MAX_DIMS], dilation[WIN_MAX_DIMS];
  int64_t pad_lo[WIN_MAX_DIMS], pad_hi[WIN_MAX_DIMS]; /* explicit pads; zero unless NOTSET */
  win_auto_pad auto_pad;
} win_attrs;

/* Reads the attributes of a node with nd spatial dimensions. Returns false with a reason in err
 * when an attribute has the wrong count or an invalid value. */
bool win_read(const ir_node *n, int nd, win_attrs *w, char *err, size_t len);

/* The dilated kernel extent of dimension i: (kernel - 1) * dilation + 1. */
int64_t win_extent(const win_attrs *w, int i);

/* SAME padding of one dimension: pad so that the output has ceil(in / stride) elements; the
 * total, (out - 1) * stride + extent - in, is split evenly with the odd element at the end
 * (SAME_UPPER) or the start (SAME_LOWER). Returns the total, which is negative when the extent is
 * smaller than the stride and the input leaves more than the last window needs (callers decline
 * that: ONNX Runtime's kernels disagree with each other there); lo and hi are then 0. */
int64_t win_same_pads(int64_t in, int64_t stride, int64_t extent, bool upper, int64_t *lo,
                      int64_t *hi);

/* Whether SAME padding of this node could come out negative for input dims `in` (NULL or a
 * negative entry: unknown), i.e. some extent is smaller than its stride and the dims do not rule
 * it out. */
bool win_same_may_go_negative(const win_attrs *w, const int64_t *in);

/* Formats a list of nd integers as "[a, b, c]" into buf. */
const char *win_fmt(const int64_t *v, int nd, char *buf, size_t len);

#endif
