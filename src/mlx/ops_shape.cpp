/*
 * Shape and indexing entry points: reshape, transpose, broadcast, concatenation, slices, takes
 * and puts, padding, tiling, axis insertion and removal, and the general gather and scatter. One
 * rewrite of MLX's graph lives here, for every device: a transpose of a transpose becomes one
 * transpose (or none) of the array beneath.
 */
#include "mlx/mx_internal.hpp"

using namespace mxb;

extern "C" {

/* --- shape and indexing ------------------------------------------------------------------ */
int mx_reshape(mx_ctx *ctx, mx_array *out, mx_array a, const int *shape, int ndim) {
  MX_RESULT(mc::reshape(A(a), to_shape(shape, ndim), device_of(ctx)));
}

/* A transpose of a transpose is one transpose of the array beneath, or that array itself: a
 * convolution's channels-first view taken back to channels-last by the next convolution then
 * adds no operation to the graph, where MLX would replay and evaluate two views per Run. */
int mx_transpose(mx_ctx *ctx, mx_array *out, mx_array a, const int *perm, int ndim) {
  MX_GUARD(ctx, out, {
    const mc::array &x = A(a);
    std::vector<int> p = to_vec(perm, ndim), inner = transpose_of(x);
    if (inner.empty() || p.size() != inner.size())
      return keep(ctx, out, mc::transpose(x, p, device_of(ctx)));
    std::vector<int> both(p.size());
    bool identity = true;
    for (size_t i = 0; i < p.size(); i++) {
      int axis = p[i] < 0 ? p[i] + ndim : p[i];
      if (axis < 0 || axis >= ndim) return keep(ctx, out, mc::transpose(x, p, device_of(ctx)));
      both[i] = inner[axis];
      identity = identity && both[i] == static_cast<int>(i);
    }
    const mc::array &beneath = x.inputs().at(0);
    return keep(ctx, out, identity ? beneath : mc::transpose(beneath, both, device_of(ctx)));
  });
}

int mx_broadcast_to(mx_ctx *ctx, mx_array *out, mx_array a, const int *shape, int ndim) {
  MX_GUARD(ctx, out, {
    auto s = device_of(ctx);
    Elementwise ops(ctx, {a}, false, /* layout */ false); /* the shape changes */
    return ops.wrap(ctx, out, mc::broadcast_to(ops[0], to_shape(shape, ndim), s));
  });
}

int mx_concatenate(mx_ctx *ctx, mx_array *out, const mx_array *arrays, size_t count, int axis) {
  MX_GUARD(ctx, out, {
    std::vector<mc::array> v;
    for (size_t i = 0; i < count; i++) v.push_back(A(arrays[i]));
    return keep(ctx, out, mc::concatenate(std::move(v), axis, device_of(ctx)));
  });
}

int mx_slice(mx_ctx *ctx, mx_array *out, mx_array a, const int *start, const int *stop,
             const int *strides, int ndim) {
  MX_RESULT(mc::slice(A(a), to_shape(start, ndim), to_shape(stop, ndim), to_shape(strides, ndim),
                      device_of(ctx)));
}

int mx_slice_update(mx_ctx *ctx, mx_array *out, mx_array a, mx_array update, const int *start,
                    const int *stop, const int *strides, int ndim) {
  MX_RESULT(mc::slice_update(A(a), A(update), to_shape(start, ndim), to_shape(stop, ndim),
                             to_shape(strides, ndim), device_of(ctx)));
}

int mx_take(mx_ctx *ctx, mx_array *out, mx_array a, mx_array indices, int axis) {
  MX_RESULT(mc::take(A(a), A(indices), axis, device_of(ctx)));
}

int mx_take_along_axis(mx_ctx *ctx, mx_array *out, mx_array a, mx_array indices, int axis) {
  MX_RESULT(mc::take_along_axis(A(a), A(indices), axis, device_of(ctx)));
}

int mx_put_along_axis(mx_ctx *ctx, mx_array *out, mx_array a, mx_array indices, mx_array values,
                      int axis) {
  MX_RESULT(mc::put_along_axis(A(a), A(indices), A(values), axis, device_of(ctx)));
}

int mx_pad(mx_ctx *ctx, mx_array *out, mx_array a, const int *low, const int *high, int ndim,
           mx_array value) {
  MX_GUARD(ctx, out, {
    std::vector<int> axes(ndim);
    for (int i = 0; i < ndim; i++) axes[i] = i;
    return keep(ctx, out, mc::pad(A(a), axes, to_shape(low, ndim), to_shape(high, ndim), A(value),
                                  "constant", device_of(ctx)));
  });
}

int mx_tile(mx_ctx *ctx, mx_array *out, mx_array a, const int *reps, int ndim) {
  MX_RESULT(mc::tile(A(a), to_vec(reps, ndim), device_of(ctx)));
}

int mx_contiguous(mx_ctx *ctx, mx_array *out, mx_array a) {
  MX_RESULT(mc::contiguous(A(a), false, device_of(ctx)));
}

/* --- axis insertion and removal (shape family) ------------------------------------------- */
int mx_squeeze(mx_ctx *ctx, mx_array *out, mx_array a, const int *axes, int naxes) {
  MX_RESULT(mc::squeeze(A(a), to_vec(axes, naxes), device_of(ctx)));
}

int mx_expand_dims(mx_ctx *ctx, mx_array *out, mx_array a, const int *axes, int naxes) {
  MX_RESULT(mc::expand_dims(A(a), to_vec(axes, naxes), device_of(ctx)));
}

int mx_flatten(mx_ctx *ctx, mx_array *out, mx_array a, int start_axis, int end_axis) {
  MX_RESULT(mc::flatten(A(a), start_axis, end_axis, device_of(ctx)));
}

/* --- gather and scatter over several axes (index family) --------------------------------- */
int mx_gather(mx_ctx *ctx, mx_array *out, mx_array a, const mx_array *indices, int n,
              const int *axes, const int *slice_sizes) {
  MX_GUARD(ctx, out, {
    std::vector<mc::array> idx;
    for (int i = 0; i < n; i++) idx.push_back(A(indices[i]));
    const mc::array &x = A(a);
    return keep(ctx, out, mc::gather(x, idx, to_vec(axes, n),
                                     to_shape(slice_sizes, static_cast<int>(x.ndim())),
                                     device_of(ctx)));
  });
}

int mx_scatter(mx_ctx *ctx, mx_array *out, mx_scatter_op op, mx_array a, const mx_array *indices,
               int n, mx_array updates, const int *axes) {
  MX_GUARD(ctx, out, {
    std::vector<mc::array> idx;
    for (int i = 0; i < n; i++) idx.push_back(A(indices[i]));
    const mc::array &x = A(a), &u = A(updates);
    std::vector<int> ax = to_vec(axes, n);
    /* MLX's CUDA scatter takes no 64-bit integers ("does not yet support int64"): those run on
     * the CPU stream, whose result the GPU reads like any other array. */
    bool wide = x.dtype() == mc::int64 || x.dtype() == mc::uint64;
    auto s = wide ? mc::Device(mc::Device::cpu) : device_of(ctx);
    switch (op) {
      case MX_SCATTER_SET: return keep(ctx, out, mc::scatter(x, idx, u, ax, s));
      case MX_SCATTER_ADD: return keep(ctx, out, mc::scatter_add(x, idx, u, ax, s));
      case MX_SCATTER_PROD: return keep(ctx, out, mc::scatter_prod(x, idx, u, ax, s));
      case MX_SCATTER_MAX: return keep(ctx, out, mc::scatter_max(x, idx, u, ax, s));
      case MX_SCATTER_MIN: return keep(ctx, out, mc::scatter_min(x, idx, u, ax, s));
    }
    throw std::invalid_argument("unknown scatter op");
  });
}

}  // extern "C"
