/*
 * The host-kernel primitive: a C function (mx_host_kernel) as one operation of an MLX graph on
 * the CPU device, and the rewrites that extend a host kernel already built (a bias row as one
 * more input, an elementwise epilogue), with the fold of a bias into MLX's own matrix product
 * beside them. A host kernel is an MLX primitive of the bridge's own (HostKernel), so it is told
 * apart by dynamic_cast; MLX's nodes are told by name (names.cpp).
 *
 * This is the only file that includes an MLX backend header, <mlx/backend/cpu/encoder.h>: a
 * primitive's eval_cpu must queue its work on the CPU stream's command encoder
 * (mc::cpu::get_command_encoder(stream).dispatch), as MLX's own CPU primitives do, so the task
 * runs in stream order once the inputs are computed. That header is not part of MLX's public
 * API and may change between MLX versions.
 */
#include "mlx/mx_internal.hpp"

#include <mlx/allocator.h>
#include <mlx/backend/cpu/encoder.h>
#include <mlx/primitives.h>

#include <cstring>
#include <memory>
#include <string>
#include <utility>

using namespace mxb;

namespace {

/* dst (row-major, same shape and dtype) = src as it lies: rows along the last axis, copied
 * whole when they are contiguous, element by element otherwise (any strides, negative and zero
 * included). For a host kernel's strided inputs (HostKernel::eval_cpu). */
void copy_row_major(const mc::array &src, mc::array &dst) {
  if (src.size() == 0) return;
  const size_t item = src.itemsize();
  const int nd = static_cast<int>(src.ndim());
  const char *from = src.data<char>();
  char *to = dst.data<char>();
  if (nd == 0) {
    std::memcpy(to, from, item);
    return;
  }
  const int64_t inner = src.shape(nd - 1), step = src.strides()[nd - 1];
  std::vector<int> index(static_cast<size_t>(nd), 0);
  for (size_t row = 0, rows = src.size() / static_cast<size_t>(inner); row < rows; row++) {
    int64_t at = 0;
    for (int i = 0; i + 1 < nd; i++) at += index[i] * src.strides()[i];
    const char *p = from + at * static_cast<int64_t>(item);
    if (step == 1) {
      std::memcpy(to, p, static_cast<size_t>(inner) * item);
    } else {
      for (int64_t j = 0; j < inner; j++)
        std::memcpy(to + j * static_cast<int64_t>(item), p + j * step * static_cast<int64_t>(item),
                    item);
    }
    to += static_cast<size_t>(inner) * item;
    for (int i = nd - 2; i >= 0 && ++index[i] == src.shape(i); i--) index[i] = 0;
  }
}

/* A host kernel (mx_host_kernel) as an MLX primitive: on evaluation it allocates the output and
 * queues the C function on the CPU stream, holding the inputs until it has run. The output shape
 * is the one given at construction, so output_shapes (asked only by shapeless compile) refuses. */
class HostKernel : public mc::UnaryPrimitive {
 public:
  HostKernel(mc::Stream s, std::string name, mx_host_fn fn, std::vector<char> params,
             unsigned flags, mx_host_epilogue_fn epilogue = nullptr,
             std::vector<char> epilogue_params = {})
      : mc::UnaryPrimitive(s), name_(std::move(name)), fn_(fn),
        params_(std::make_shared<const std::vector<char>>(std::move(params))), flags_(flags),
        epilogue_(epilogue),
        epilogue_params_(std::make_shared<const std::vector<char>>(std::move(epilogue_params))) {}

  /* The same kernel with one more input (it takes no further one). */
  std::shared_ptr<HostKernel> with_extra_input() {
    return std::make_shared<HostKernel>(stream(), name_, fn_, *params_,
                                        flags_ & ~unsigned(MX_HOST_TAKES_BIAS_ROW), epilogue_,
                                        *epilogue_params_);
  }
  /* The same kernel applying `epilogue` to its output (no bias row after it, no second one). */
  std::shared_ptr<HostKernel> with_epilogue(mx_host_epilogue_fn epilogue,
                                            std::vector<char> params) {
    return std::make_shared<HostKernel>(
        stream(), name_, fn_, *params_,
        flags_ & ~unsigned(MX_HOST_TAKES_BIAS_ROW | MX_HOST_TAKES_EPILOGUE), epilogue,
        std::move(params));
  }
  unsigned flags() const { return flags_; }

  void eval_cpu(const std::vector<mc::array> &inputs, mc::array &out) override {
    out.set_data(mc::allocator::malloc(out.nbytes()));
    /* An input MLX left strided (a transposed or broadcast view) is copied row-major inside
     * the task, unless the kernel reads views. A Contiguous operation in the graph instead
     * would be replayed and dispatched on every Run, for inputs that are almost always
     * contiguous already. Layouts are known here, before the task runs: MLX fixes them when it
     * allocates. */
    std::vector<std::pair<size_t, mc::array>> dense; /* input index, its row-major copy */
    for (size_t i = 0; i < inputs.size(); i++) {
      if (flags_ & MX_HOST_STRIDED_INPUTS || inputs[i].flags().row_contiguous) continue;
      mc::array d(inputs[i].shape(), inputs[i].dtype(), nullptr, {});
      d.set_data(mc::allocator::malloc(d.nbytes()));
      dense.emplace_back(i, std::move(d));
    }
    auto &encoder = mc::cpu::get_command_encoder(stream());
    encoder.dispatch([ins = inputs, dense = std::move(dense), out, fn = fn_, params = params_,
                      epilogue = epilogue_, epilogue_params = epilogue_params_]() mutable {
      std::vector<const mc::array *> use;
      use.reserve(ins.size());
      for (const auto &a : ins) use.push_back(&a);
      for (auto &[i, copy] : dense) {
        copy_row_major(ins[i], copy);
        use[i] = &copy;
      }
      std::vector<mx_host_tensor> views;
      views.reserve(use.size());
      for (const mc::array *a : use)
        views.push_back({a->data<void>(), from_mlx(a->dtype()), static_cast<int>(a->ndim()),
                         a->shape().data(), a->strides().data(), nullptr, nullptr});
      mx_host_tensor o = {out.data<void>(), from_mlx(out.dtype()), static_cast<int>(out.ndim()),
                          out.shape().data(), out.strides().data(), epilogue,
                          epilogue ? epilogue_params->data() : nullptr};
      fn(views.data(), static_cast<int>(views.size()), &o, params->data());
    });
  }
  void eval_gpu(const std::vector<mc::array> &, mc::array &) override {
    throw std::runtime_error("host kernel " + name_ + " runs on the CPU device only");
  }
  std::vector<mc::Shape> output_shapes(const std::vector<mc::array> &) override {
    throw std::invalid_argument("host kernel " + name_ + " has a fixed output shape");
  }
  const char *name() const override { return name_.c_str(); }

 private:
  std::string name_;
  mx_host_fn fn_;
  /* shared with the tasks in flight: MLX may release the primitive before they run */
  std::shared_ptr<const std::vector<char>> params_;
  unsigned flags_;
  mx_host_epilogue_fn epilogue_;
  std::shared_ptr<const std::vector<char>> epilogue_params_;
};
}  // namespace

extern "C" {

/* --- host kernels (CPU device) ------------------------------------------------------------ */
int mx_host_kernel(mx_ctx *ctx, mx_array *out, const char *name, mx_host_fn fn,
                   const void *params, size_t params_size, const mx_array *inputs, int n_inputs,
                   const int *shape, int ndim, mx_dtype dtype, unsigned flags) {
  MX_GUARD(ctx, out, {
    if (!name || !fn) throw std::invalid_argument("a host kernel needs a name and a function");
    if (ctx->device != MX_DEVICE_CPU)
      throw std::invalid_argument(std::string("host kernel ") + name + " needs the CPU device");
    auto s = mc::default_stream(device_of(ctx));
    /* an elementwise kernel over operands that are one transpose of arrays beneath runs on
     * those and transposes its result back (as Elementwise does for MLX's operations) */
    std::vector<int> sunk;
    if (flags & MX_HOST_ELEMENTWISE) {
      std::vector<mc::array> operands;
      for (int i = 0; i < n_inputs; i++) operands.push_back(A(inputs[i]));
      sunk = shared_transpose(operands, false);
    }
    mc::Shape out_shape = to_shape(shape, ndim);
    std::vector<mc::array> ins;
    for (int i = 0; i < n_inputs; i++) {
      mc::array a = A(inputs[i]);
      if (!sunk.empty() && a.size() != 1) a = a.inputs().at(0), out_shape = a.shape();
      ins.push_back(std::move(a));
    }
    const char *p = static_cast<const char *>(params);
    auto prim = std::make_shared<HostKernel>(s, name, fn, std::vector<char>(p, p + params_size),
                                             flags);
    mc::array result(out_shape, to_mlx(dtype), prim, std::move(ins));
    if (!sunk.empty()) result = mc::transpose(result, sunk, s);
    return keep(ctx, out, std::move(result));
  });
}

int mx_fold_into_product(mx_ctx *ctx, mx_array *out, mx_array product, mx_array c) {
  MX_GUARD(ctx, out, {
    const mc::array &p = A(product);
    if (!p.has_primitive()) return MX_OK;
    if (auto *host = dynamic_cast<HostKernel *>(&p.primitive())) {
      const mc::array &row = A(c);
      if (!(host->flags() & MX_HOST_TAKES_BIAS_ROW) || row.ndim() != 1 || p.ndim() < 1 ||
          row.shape(0) != p.shape(-1) || row.dtype() != p.dtype())
        return MX_OK;
      std::vector<mc::array> ins = p.inputs();
      /* A bias is nearly always a constant, evaluated and contiguous already: taken as it is,
       * since a Contiguous node would be replayed and visited on every Run (MiniLM: 36 a Run). */
      bool ready = row.is_available() && row.flags().row_contiguous;
      ins.push_back(ready ? row : mc::contiguous(row, false, p.primitive().stream()));
      return keep(ctx, out, mc::array(p.shape(), p.dtype(), host->with_extra_input(),
                                      std::move(ins)));
    }
    mc::array m = p;
    Node top = node_of(p);
    bool reshaped = top == Node::Reshape || top == Node::Unflatten;
    if (reshaped) m = p.inputs().at(0);
    if (!is_node(m, Node::Matmul)) return MX_OK;
    const auto &ins = m.inputs();
    if (ins.size() != 2 || ins[0].ndim() != 2 || ins[1].ndim() != 2) return MX_OK;
    mc::array sum = mc::addmm(A(c), ins[0], ins[1], 1.0f, 1.0f, device_of(ctx));
    if (reshaped) sum = mc::reshape(sum, p.shape(), device_of(ctx));
    return keep(ctx, out, std::move(sum));
  });
}

int mx_fold_epilogue(mx_ctx *ctx, mx_array *out, mx_array value, mx_host_epilogue_fn fn,
                     const void *params, size_t params_size) {
  MX_GUARD(ctx, out, {
    /* down through the views to the kernel, each view's shape or permutation kept */
    std::vector<const mc::array *> views;
    const mc::array *at = &A(value);
    for (;;) {
      if (!at->has_primitive() || at->dtype() != mc::float32) return MX_OK;
      Node node = node_of(*at);
      if (node != Node::Transpose && node != Node::Reshape) break;
      views.push_back(at);
      at = &at->inputs().at(0);
    }
    auto *host = dynamic_cast<HostKernel *>(&at->primitive());
    if (!host || !(host->flags() & MX_HOST_TAKES_EPILOGUE) || !fn) return MX_OK;
    const char *p = static_cast<const char *>(params);
    mc::array y(at->shape(), at->dtype(),
                host->with_epilogue(fn, std::vector<char>(p, p + params_size)), at->inputs());
    auto s = at->primitive().stream();
    for (auto v = views.rbegin(); v != views.rend(); ++v) {
      y = is_node(**v, Node::Transpose) ? mc::transpose(y, transpose_perm(**v), s)
                                         : mc::reshape(y, (*v)->shape(), s);
    }
    return keep(ctx, out, std::move(y));
  });
}

bool mx_is_host_kernel(mx_array a) {
  MX_GUARD_OR(false, {
    const mc::array &x = A(a);
    return x.has_primitive() && dynamic_cast<HostKernel *>(&x.primitive()) != nullptr;
  });
}

}  // extern "C"
