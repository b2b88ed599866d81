/*
 * Quantized matrix products: MLX's affine quantized matmul over weights already packed in its
 * format (the callers re-pack once, when a plan is built). Each entry point builds the one MLX
 * operation it names.
 */
#include "mlx/mx_internal.hpp"

using namespace mxb;

extern "C" {

int mx_quantized_matmul(mx_ctx *ctx, mx_array *out, mx_array x, mx_array w, mx_array scales,
                        mx_array biases, int group_size, int bits) {
  MX_GUARD(ctx, out, {
    std::optional<mc::array> b;
    if (biases) b = A(biases);
    return keep(ctx, out, mc::quantized_matmul(A(x), A(w), A(scales), b, true, group_size, bits,
                                               "affine", device_of(ctx)));
  });
}

}  // extern "C"
