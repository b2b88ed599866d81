/*
 * Reduction entry points: reductions over axes (taken beneath a transposed view when the
 * device's layout policy says so, layout.cpp), arg-reductions, scans, sorting, the max/min that
 * ONNX defines over empty axes, and element counts that stay right under shapeless compile.
 */
#include "mlx/mx_internal.hpp"

#include <mlx/primitives.h> /* mc::Reduce, built directly by mx_reduce_empty_ok */

#include <algorithm>
#include <memory>

using namespace mxb;

/* --- reductions, scans, sorting ---------------------------------------------------------- */
static mc::array reduction(mx_reduce_op op, const mc::array &x, const std::vector<int> &ax,
                           bool keepdims, mc::StreamOrDevice s) {
  switch (op) {
    case MX_SUM: return mc::sum(x, ax, keepdims, s);
    case MX_MEAN: return mc::mean(x, ax, keepdims, s);
    case MX_MAX: return mc::max(x, ax, keepdims, s);
    case MX_MIN: return mc::min(x, ax, keepdims, s);
    case MX_PROD: return mc::prod(x, ax, keepdims, s);
    case MX_ALL: return mc::all(x, ax, keepdims, s);
    case MX_ANY: return mc::any(x, ax, keepdims, s);
    case MX_LOGSUMEXP: return mc::logsumexp(x, ax, keepdims, s);
    case MX_REDUCE_OP_COUNT: break;
  }
  throw std::invalid_argument("unknown reduction");
}

extern "C" {

/* A reduction over a transposed view may run on the array beneath (layout.cpp's rule, when the
 * device's policy turns it on). */
int mx_reduce(mx_ctx *ctx, mx_array *out, mx_reduce_op op, mx_array a, const int *axes,
              int naxes, bool keepdims) {
  MX_GUARD(ctx, out, {
    const mc::array &x = A(a);
    std::vector<int> ax = to_vec(axes, naxes);
    auto s = device_of(ctx);
    auto beneath = reduce_beneath_transpose(
        ctx, x, ax, keepdims, [&](const mc::array &y, const std::vector<int> &yax) {
          return reduction(op, y, yax, true, s);
        });
    return keep(ctx, out, beneath ? std::move(*beneath) : reduction(op, x, ax, keepdims, s));
  });
}

int mx_argmax(mx_ctx *ctx, mx_array *out, mx_array a, int axis, bool keepdims) {
  MX_RESULT(mc::argmax(A(a), axis, keepdims, device_of(ctx)));
}

int mx_argmin(mx_ctx *ctx, mx_array *out, mx_array a, int axis, bool keepdims) {
  MX_RESULT(mc::argmin(A(a), axis, keepdims, device_of(ctx)));
}

int mx_cumsum(mx_ctx *ctx, mx_array *out, mx_array a, int axis, bool reverse, bool inclusive) {
  MX_RESULT(mc::cumsum(A(a), axis, reverse, inclusive, std::nullopt, device_of(ctx)));
}

int mx_cumprod(mx_ctx *ctx, mx_array *out, mx_array a, int axis, bool reverse, bool inclusive) {
  MX_RESULT(mc::cumprod(A(a), axis, reverse, inclusive, std::nullopt, device_of(ctx)));
}

int mx_sort(mx_ctx *ctx, mx_array *out, mx_array a, int axis) {
  MX_RESULT(mc::sort(A(a), axis, device_of(ctx)));
}

int mx_argsort(mx_ctx *ctx, mx_array *out, mx_array a, int axis) {
  MX_RESULT(mc::argsort(A(a), axis, device_of(ctx)));
}

/* --- reductions defined over empty axes (reduce family) ---------------------------------- */
int mx_reduce_empty_ok(mx_ctx *ctx, mx_array *out, mx_reduce_op op, mx_array a, const int *axes,
                       int naxes, bool keepdims) {
  MX_GUARD(ctx, out, {
    const mc::array &x = A(a);
    std::vector<int> ax = to_vec(axes, naxes);
    bool empty = false;
    int rank = static_cast<int>(x.ndim());
    for (auto &v : ax) {
      if (v < 0) v += rank;
      if (v < 0 || v >= rank) throw std::invalid_argument("axis out of range");
      empty = empty || x.shape(v) == 0;
    }
    if (!empty || (op != MX_MAX && op != MX_MIN))
      return mx_reduce(ctx, out, op, a, axes, naxes, keepdims);
    /* The primitive MLX's max/min would build, without their refusal of empty axes. */
    std::sort(ax.begin(), ax.end());
    ax.erase(std::unique(ax.begin(), ax.end()), ax.end());
    mc::Shape shape = x.shape();
    for (int v : ax) shape[v] = 1;
    auto type = op == MX_MAX ? mc::Reduce::Max : mc::Reduce::Min;
    mc::array y(std::move(shape), x.dtype(),
                std::make_shared<mc::Reduce>(mc::to_stream(device_of(ctx)), type, ax), {x});
    if (!keepdims) y = mc::squeeze(y, ax, device_of(ctx));
    return keep(ctx, out, std::move(y));
  });
}

int mx_number_of_elements(mx_ctx *ctx, mx_array *out, mx_array a, const int *axes, int naxes,
                          mx_dtype dtype) {
  MX_GUARD(ctx, out, {
    const mc::array &x = A(a);
    if (naxes == 0) return keep(ctx, out, mc::astype(mc::array(1), to_mlx(dtype), device_of(ctx)));
    return keep(ctx, out, mc::number_of_elements(x, to_vec(axes, naxes), false, to_mlx(dtype),
                                                 device_of(ctx)));
  });
}

}  // extern "C"
