/*
 * Linear algebra, neural-network and the remaining numeric entry points: matrix products,
 * softmax and the fast norms, convolution, einsum, determinants, random numbers, complex values,
 * FFTs and scaled dot-product attention. Each builds the one MLX operation it names (the folds
 * into a matrix product live with the host kernel primitive, host_kernel.cpp).
 */
#include "mlx/mx_internal.hpp"

using namespace mxb;

/* A random call's key, or none: MLX's global key sequence. */
static std::optional<mc::array> opt_key(mx_array key) {
  return key ? std::optional<mc::array>(A(key)) : std::nullopt;
}

extern "C" {

/* --- linear algebra and neural-network kernels ------------------------------------------- */
int mx_matmul(mx_ctx *ctx, mx_array *out, mx_array a, mx_array b) {
  MX_RESULT(mc::matmul(A(a), A(b), device_of(ctx)));
}

int mx_addmm(mx_ctx *ctx, mx_array *out, mx_array c, mx_array a, mx_array b) {
  MX_RESULT(mc::addmm(A(c), A(a), A(b), 1.0f, 1.0f, device_of(ctx)));
}

int mx_softmax(mx_ctx *ctx, mx_array *out, mx_array a, const int *axes, int naxes) {
  MX_RESULT(mc::softmax(A(a), to_vec(axes, naxes), true, device_of(ctx)));
}

int mx_layer_norm(mx_ctx *ctx, mx_array *out, mx_array x, mx_array weight, mx_array bias,
                  float eps) {
  MX_GUARD(ctx, out, {
    std::optional<mc::array> w, b;
    if (weight) w = A(weight);
    if (bias) b = A(bias);
    return keep(ctx, out, mc::fast::layer_norm(A(x), w, b, eps, device_of(ctx)));
  });
}

int mx_rms_norm(mx_ctx *ctx, mx_array *out, mx_array x, mx_array weight, float eps) {
  MX_GUARD(ctx, out, {
    std::optional<mc::array> w;
    if (weight) w = A(weight);
    return keep(ctx, out, mc::fast::rms_norm(A(x), w, eps, device_of(ctx)));
  });
}

int mx_conv(mx_ctx *ctx, mx_array *out, mx_array input, mx_array weight, const int *strides,
            const int *pad_low, const int *pad_high, const int *kernel_dilation,
            const int *input_dilation, int spatial, int groups, bool flip) {
  MX_RESULT(mc::conv_general(A(input), A(weight), to_vec(strides, spatial),
                             to_vec(pad_low, spatial), to_vec(pad_high, spatial),
                             to_vec(kernel_dilation, spatial), to_vec(input_dilation, spatial),
                             groups, flip, device_of(ctx)));
}

/* --- einsum, determinants, random numbers (linalg and random families) ------------------- */

int mx_einsum(mx_ctx *ctx, mx_array *out, const char *subscripts, const mx_array *operands,
              size_t n) {
  MX_GUARD(ctx, out, {
    if (!subscripts) throw std::invalid_argument("missing einsum equation");
    std::vector<mc::array> ops;
    for (size_t i = 0; i < n; i++) ops.push_back(A(operands[i]));
    return keep(ctx, out, mc::einsum(subscripts, ops, device_of(ctx)));
  });
}

int mx_det(mx_ctx *ctx, mx_array *out, mx_array a) {
  MX_RESULT(mc::linalg::det(A(a), mc::Device(mc::Device::cpu)));
}

int mx_random_key(mx_ctx *ctx, mx_array *out, uint64_t seed) {
  MX_RESULT(mc::random::key(seed));
}

int mx_random_uniform(mx_ctx *ctx, mx_array *out, const int *shape, int ndim, double low,
                      double high, mx_dtype dtype, mx_array key) {
  MX_GUARD(ctx, out, {
    mc::Dtype dt = to_mlx(dtype);
    return keep(ctx, out, mc::random::uniform(mc::array(low, dt), mc::array(high, dt),
                                              to_shape(shape, ndim), dt, opt_key(key),
                                              device_of(ctx)));
  });
}

int mx_random_normal(mx_ctx *ctx, mx_array *out, const int *shape, int ndim, double mean,
                     double scale, mx_dtype dtype, mx_array key) {
  MX_GUARD(ctx, out, {
    mc::Dtype dt = to_mlx(dtype);
    return keep(ctx, out, mc::random::normal(to_shape(shape, ndim), dt, mc::array(mean, dt),
                                             mc::array(scale, dt), opt_key(key),
                                             device_of(ctx)));
  });
}

int mx_random_categorical(mx_ctx *ctx, mx_array *out, mx_array logits, int axis,
                          int num_samples, mx_array key) {
  MX_RESULT(mc::random::categorical(A(logits), axis, num_samples, opt_key(key), device_of(ctx)));
}

int mx_complex(mx_ctx *ctx, mx_array *out, mx_array re, mx_array im) {
  MX_GUARD(ctx, out, {
    auto s = device_of(ctx);
    mc::array z = mc::astype(A(re), mc::complex64, s);
    if (im) z = mc::add(z, mc::multiply(mc::astype(A(im), mc::complex64, s),
                                        mc::array(mc::complex64_t{0.0f, 1.0f}), s), s);
    return keep(ctx, out, std::move(z));
  });
}

int mx_real(mx_ctx *ctx, mx_array *out, mx_array a) {
  MX_RESULT(mc::real(A(a), device_of(ctx)));
}

int mx_imag(mx_ctx *ctx, mx_array *out, mx_array a) {
  MX_RESULT(mc::imag(A(a), device_of(ctx)));
}

int mx_fft(mx_ctx *ctx, mx_array *out, mx_array a, int n, int axis, mx_fft_kind kind) {
  MX_GUARD(ctx, out, {
    auto s = device_of(ctx);
    auto norm = mc::fft::FFTNorm::Backward;
    switch (kind) {
      case MX_FFT: return keep(ctx, out, mc::fft::fft(A(a), n, axis, norm, s));
      case MX_IFFT: return keep(ctx, out, mc::fft::ifft(A(a), n, axis, norm, s));
      case MX_RFFT: return keep(ctx, out, mc::fft::rfft(A(a), n, axis, norm, s));
      case MX_IRFFT: return keep(ctx, out, mc::fft::irfft(A(a), n, axis, norm, s));
    }
    throw std::invalid_argument("unknown fft kind");
  });
}

/* --- scaled dot-product attention (attention family) ------------------------------------ */
int mx_sdpa(mx_ctx *ctx, mx_array *out, mx_array q, mx_array k, mx_array v, float scale,
            bool causal, mx_array mask) {
  MX_GUARD(ctx, out, {
    if (causal && mask) throw std::invalid_argument("a causal mask and a mask array together");
    std::optional<mc::array> m;
    if (mask) m = A(mask);
    std::string mode = causal ? "causal" : mask ? "array" : "";
    return keep(ctx, out, mc::fast::scaled_dot_product_attention(A(q), A(k), A(v), scale, mode, m,
                                                                 std::nullopt, false,
                                                                 device_of(ctx)));
  });
}

}  // extern "C"
