/*
 * Arrays as wholes: the facts a caller reads from a handle (rank, shape, dtype, sizes), creating
 * arrays from host memory or values, evaluating them, and handing their memory to the host.
 * Host access evaluates an array and, when MLX left it a strided view, reads a row-major copy;
 * the caller's handle keeps its array (mx_host_data keeps the copy beside it, as mx.h promises
 * the pointer lives as long as the handle).
 */
#include "mlx/mx_internal.hpp"

#include <cstdlib>
#include <cstring>
#include <string>

using namespace mxb;

/* `a` evaluated, as row-major contiguous memory for the host: `a` itself when it is (flags are
 * only known after evaluation, so checked after), else a copy. */
static mc::array host_ready(mx_ctx *ctx, const mc::array &a) {
  mc::array x = a; /* shares a's node: evaluating x evaluates a */
  x.eval();
  if (!x.flags().row_contiguous) {
    x = mc::contiguous(x, false, device_of(ctx));
    x.eval();
  }
  if (!x.flags().row_contiguous) {
    x = mc::add(x, mc::zeros_like(x, device_of(ctx)), device_of(ctx)); /* fresh buffer */
    x.eval();
  }
  if (!x.flags().row_contiguous) throw std::runtime_error("array is not row-contiguous");
  return x;
}

extern "C" {

/* --- array facts (read a handle's fields only: nothing here throws) ---------------------- */
int mx_ndim(mx_array a) { return static_cast<int>(a->a.ndim()); }
const int *mx_shape(mx_array a) { return a->a.shape().data(); }
int mx_dim(mx_array a, int axis) {
  int n = mx_ndim(a);
  return a->a.shape()[axis < 0 ? axis + n : axis];
}
mx_dtype mx_dtype_of(mx_array a) { return from_mlx(a->a.dtype()); }
size_t mx_size(mx_array a) { return a->a.size(); }
size_t mx_nbytes(mx_array a) { return a->a.nbytes(); }

/* --- creation ---------------------------------------------------------------------------- */
int mx_from_data(mx_ctx *ctx, mx_array *out, const void *data, const int *shape, int ndim,
                 mx_dtype dtype) {
  MX_GUARD(ctx, out, {
    mc::Shape s = to_shape(shape, ndim);
    mc::Dtype t = to_mlx(dtype);
    size_t nbytes = t.size();
    for (int d : s) nbytes *= static_cast<size_t>(d);
    if (ctx->resident && nbytes) return resident_from_data(ctx, out, data, s, t, nbytes);
    void *copy = std::malloc(nbytes ? nbytes : 1);
    if (!copy) throw std::bad_alloc();
    if (nbytes) std::memcpy(copy, data, nbytes);
    return keep(ctx, out, mc::array(copy, s, t, [](void *p) { std::free(p); }));
  });
}

int mx_wrap_data(mx_ctx *ctx, mx_array *out, void *data, const int *shape, int ndim,
                 mx_dtype dtype) {
  MX_RESULT(mc::array(data, to_shape(shape, ndim), to_mlx(dtype), [](void *) {}));
}

int mx_scalar(mx_ctx *ctx, mx_array *out, double value, mx_dtype dtype) {
  MX_RESULT(mc::array(value, to_mlx(dtype)));
}

int mx_scalar_int(mx_ctx *ctx, mx_array *out, int64_t value, mx_dtype dtype) {
  MX_RESULT(mc::array(value, to_mlx(dtype)));
}

int mx_full(mx_ctx *ctx, mx_array *out, const int *shape, int ndim, mx_array value) {
  MX_RESULT(mc::full(to_shape(shape, ndim), A(value), device_of(ctx)));
}

int mx_arange(mx_ctx *ctx, mx_array *out, double start, double stop, double step,
              mx_dtype dtype) {
  MX_RESULT(mc::arange(start, stop, step, to_mlx(dtype), device_of(ctx)));
}

/* --- evaluation and host access ---------------------------------------------------------- */
int mx_eval(mx_ctx *ctx, const mx_array *arrays, size_t count) {
  mx_array *out = nullptr;
  MX_GUARD(ctx, out, {
    std::vector<mc::array> v;
    v.reserve(count);
    for (size_t i = 0; i < count; i++) v.push_back(A(arrays[i]));
    mc::eval(v);
    return MX_OK;
  });
}

int mx_copy_to_host(mx_ctx *ctx, mx_array a, void *dst, size_t dst_bytes) {
  mx_array *out = nullptr;
  MX_GUARD(ctx, out, {
    if (a && a->host_bytes) { /* a resident constant: the host's own copy */
      if (a->host_bytes->size() != dst_bytes)
        throw std::invalid_argument("destination holds " + std::to_string(dst_bytes) +
                                    " bytes, the constant has " +
                                    std::to_string(a->host_bytes->size()));
      std::memcpy(dst, a->host_bytes->data(), dst_bytes);
      return MX_OK;
    }
    const mc::array &h = a && a->host_copy ? *a->host_copy : A(a);
    mc::array x = host_ready(ctx, h);
    if (x.nbytes() != dst_bytes)
      throw std::invalid_argument("destination holds " + std::to_string(dst_bytes) +
                                  " bytes, result has " + std::to_string(x.nbytes()));
    if (dst_bytes && !device_copy_to_host(x, dst, dst_bytes))
      std::memcpy(dst, x.data<void>(), dst_bytes);
    return MX_OK;
  });
}

int mx_host_data(mx_ctx *ctx, mx_array a, const void **data) {
  mx_array *out = nullptr;
  *data = nullptr;
  MX_GUARD(ctx, out, {
    const mc::array &h = A(a);
    if (a->host_bytes) {
      *data = a->host_bytes->data();
      return MX_OK;
    }
    if (!a->host_copy) {
      mc::array x = host_ready(ctx, h);
      if (x.id() == h.id()) {
        *data = h.data<void>();
        return MX_OK;
      }
      a->host_copy = std::move(x);
    }
    *data = a->host_copy->data<void>();
    return MX_OK;
  });
}

}  // extern "C"
