/*
 * Custom GPU kernels: a thin pass-through to MLX's fast::cuda_kernel (mx.h describes the
 * contract). Creation fails with MLX's own message where MLX has no CUDA backend.
 */
#include "mlx/mx_internal.hpp"

#include <mlx/fast.h>

#include <string>
#include <tuple>
#include <utility>

using namespace mxb;

struct mx_kernel {
  mc::fast::CustomKernelFunction fn;
  size_t n_in, n_out;
};

extern "C" {

int mx_kernel_new(mx_ctx *ctx, mx_kernel **out, const char *name, const char *const *input_names,
                  size_t n_in, const char *const *output_names, size_t n_out, const char *source,
                  const char *header) {
  *out = nullptr;
  mx_array *none = nullptr;
  MX_GUARD(ctx, none, {
    if (!name || !source || (n_in && !input_names) || !n_out || !output_names)
      throw std::invalid_argument("a kernel needs a name, a source and at least one output");
    std::vector<std::string> ins, outs;
    for (size_t i = 0; i < n_in; i++) ins.emplace_back(input_names[i]);
    for (size_t i = 0; i < n_out; i++) outs.emplace_back(output_names[i]);
    /* throws on builds without CUDA ("[cuda_kernel] No CUDA back-end.") */
    auto fn = mc::fast::cuda_kernel(name, ins, outs, source, header ? header : "",
                                    /* ensure_row_contiguous */ true, /* shared_memory */ 0);
    *out = new mx_kernel{std::move(fn), n_in, n_out};
    return MX_OK;
  });
}

void mx_kernel_free(mx_kernel *kernel) {
  try {
    delete kernel;
  } catch (...) {
  }
}

int mx_kernel_call(mx_ctx *ctx, mx_kernel *kernel, const mx_array *inputs, size_t n_in,
                   const mx_kernel_output *outs, size_t n_out, const int grid[3],
                   const int threadgroup[3], const mx_template_arg *targs, size_t n_targs,
                   mx_array *results) {
  mx_array *none = nullptr;
  for (size_t i = 0; i < n_out; i++) results[i] = nullptr;
  MX_GUARD(ctx, none, {
    if (!kernel) throw std::invalid_argument("missing kernel");
    if (n_in != kernel->n_in || n_out != kernel->n_out)
      throw std::invalid_argument("kernel called with " + std::to_string(n_in) + " inputs and " +
                                  std::to_string(n_out) + " outputs, made for " +
                                  std::to_string(kernel->n_in) + " and " +
                                  std::to_string(kernel->n_out));
    std::vector<mc::array> in;
    for (size_t i = 0; i < n_in; i++) in.push_back(A(inputs[i]));
    std::vector<mc::Shape> shapes;
    std::vector<mc::Dtype> dtypes;
    for (size_t i = 0; i < n_out; i++) {
      shapes.push_back(to_shape(outs[i].shape, outs[i].ndim));
      dtypes.push_back(to_mlx(outs[i].dtype));
    }
    std::vector<std::pair<std::string, mc::fast::TemplateArg>> ta;
    for (size_t i = 0; i < n_targs; i++) {
      const mx_template_arg &a = targs[i];
      if (!a.name) throw std::invalid_argument("template argument without a name");
      switch (a.kind) {
        case MX_TEMPLATE_INT: ta.emplace_back(a.name, mc::fast::TemplateArg(a.value)); break;
        case MX_TEMPLATE_BOOL: ta.emplace_back(a.name, mc::fast::TemplateArg(a.value != 0)); break;
        case MX_TEMPLATE_DTYPE:
          ta.emplace_back(a.name, mc::fast::TemplateArg(to_mlx(static_cast<mx_dtype>(a.value))));
          break;
        default: throw std::invalid_argument("unknown template argument kind");
      }
    }
    std::vector<mc::array> res =
        kernel->fn(in, shapes, dtypes, std::make_tuple(grid[0], grid[1], grid[2]),
                   std::make_tuple(threadgroup[0], threadgroup[1], threadgroup[2]), ta,
                   std::nullopt, /* verbose */ false, device_of(ctx));
    if (res.size() != n_out) throw std::runtime_error("kernel output count");
    for (size_t i = 0; i < n_out; i++) keep(ctx, &results[i], std::move(res[i]));
    return MX_OK;
  });
}

}  // extern "C"
