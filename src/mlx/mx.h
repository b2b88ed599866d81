/*
 * The MLX bridge: the project's own small C API over MLX's C++ API, and the only place MLX types
 * exist. Every call has the same shape, `int mx_<op>(mx_ctx *ctx, mx_array *out, inputs...)`: it
 * returns MX_OK or an error code, writes its result through `out`, and on failure leaves a message
 * in ctx->error (C++ exceptions are caught inside the bridge and never cross into C). Arrays are
 * handles owned by the arena the context points at when they are created; freeing the arena frees
 * them all at once, so C code never frees an array by hand. A handle's array never changes once
 * made: no call rewrites the handles it is given. The bridge holds no translation logic: ONNX
 * semantics live in src/ops/. It is implemented by the .cpp files beside this header, split by
 * the sections below (mx_internal.hpp is their private header).
 */
#ifndef MX_H
#define MX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mx_array_impl *mx_array; /* owned by an mx_arena */
typedef struct mx_arena mx_arena;
typedef struct mx_compiled mx_compiled;

/* MX_ERR_SHAPELESS: a shapeless trace holds what MLX's shapeless compile mis-runs (see
 * mx_compiled_new); the same graph compiled keyed on shapes is fine. */
enum { MX_OK = 0, MX_ERR_MLX = 1, MX_ERR_NOMEM = 2, MX_ERR_ARG = 3, MX_ERR_SHAPELESS = 4 };
enum { MX_MAX_RANK = 16, MX_ERROR_LEN = 512 };

typedef enum mx_device { MX_DEVICE_CPU = 0, MX_DEVICE_GPU = 1 } mx_device;

typedef enum mx_dtype {
  MX_BOOL, MX_UINT8, MX_UINT16, MX_UINT32, MX_UINT64, MX_INT8, MX_INT16, MX_INT32, MX_INT64,
  MX_FLOAT16, MX_FLOAT32, MX_FLOAT64, MX_BFLOAT16, MX_COMPLEX64
} mx_dtype;

/* Where new arrays go, which device computes, and the last error. One per thread of work. */
typedef struct mx_ctx {
  mx_arena *arena;
  mx_device device;
  /* mx_from_data makes evaluated arrays in MLX's memory of the device, read from a host copy
   * kept for host reads where small (set while a plan loads its constants for a device whose
   * kernels must not read host-written memory: see src/mlx/host_io.cpp) */
  bool resident;
  char error[MX_ERROR_LEN];
} mx_ctx;

typedef enum mx_unary_op {
  MX_ABS, MX_NEG, MX_EXP, MX_LOG, MX_SQRT, MX_RSQRT, MX_RECIPROCAL, MX_SIGMOID, MX_TANH, MX_ERF,
  MX_SIN, MX_COS, MX_TAN, MX_ASIN, MX_ACOS, MX_ATAN, MX_SINH, MX_COSH, MX_ASINH, MX_ACOSH,
  MX_ATANH, MX_FLOOR, MX_CEIL, MX_ROUND, MX_SIGN, MX_LOGICAL_NOT, MX_ISNAN, MX_ISPOSINF,
  MX_ISNEGINF, MX_SQUARE, MX_LOG1P, MX_EXPM1, MX_BITWISE_INVERT, MX_UNARY_OP_COUNT
} mx_unary_op;

typedef enum mx_binary_op {
  MX_ADD, MX_SUBTRACT, MX_MULTIPLY, MX_DIVIDE, MX_POWER, MX_MAXIMUM, MX_MINIMUM, MX_EQUAL,
  MX_NOT_EQUAL, MX_LESS, MX_LESS_EQUAL, MX_GREATER, MX_GREATER_EQUAL, MX_LOGICAL_AND,
  MX_LOGICAL_OR, MX_REMAINDER, MX_FLOOR_DIVIDE, MX_BITWISE_AND, MX_BITWISE_OR, MX_BITWISE_XOR,
  MX_LEFT_SHIFT, MX_RIGHT_SHIFT, MX_ATAN2, MX_LOGADDEXP, MX_BINARY_OP_COUNT
} mx_binary_op;

typedef enum mx_reduce_op {
  MX_SUM, MX_MEAN, MX_MAX, MX_MIN, MX_PROD, MX_ALL, MX_ANY, MX_LOGSUMEXP, MX_REDUCE_OP_COUNT
} mx_reduce_op;

/* --- arenas, devices, errors ------------------------------------------------------------- */
mx_arena *mx_arena_new(void);            /* NULL when out of memory */
void mx_arena_free(mx_arena *arena);     /* frees every array created in it; NULL is fine */
size_t mx_arena_count(const mx_arena *arena);
bool mx_device_available(mx_device device);
const char *mx_version(void);
/* Raises MLX's buffer cache limit (freed buffers kept for reuse) to at least `bytes`; never
 * lowers it. Returns the limit in effect, or 0 on failure. Process-wide. */
size_t mx_cache_limit_at_least(size_t bytes);
/* The folder holding the loaded libmlx ("" when unknown): its headers are in ../include. */
const char *mx_library_dir(void);
/* The folder MLX's run-time compiler keeps a device's kernels in by default: the temporary
 * folder's mlx/<version>/ptx on the GPU (CUDA; MLX_PTX_CACHE_DIR overrides it, read once per
 * process), mlx/<version>/cpu on the CPU (no setting moves it). False when the temporary folder
 * is unknown or the path does not fit. */
bool mx_kernel_cache_default_dir(mx_device device, char *buf, size_t cap);
void mx_set_error(mx_ctx *ctx, const char *fmt, ...);
/* Fault injection (tests): the n-th guarded bridge call from now on fails with MX_ERR_MLX, once,
 * as an exception inside MLX would; n <= 0 disarms. Process-wide. */
void mx_fail_call_arm(long n);
/* Array handles and arenas alive now, process-wide (leak checks at teardown). */
void mx_live_objects(size_t *arrays, size_t *arenas);
const char *mx_dtype_name(mx_dtype dtype);
size_t mx_dtype_size(mx_dtype dtype);
bool mx_dtype_is_float(mx_dtype dtype);
bool mx_dtype_is_signed_int(mx_dtype dtype);
bool mx_dtype_is_unsigned_int(mx_dtype dtype);

/* --- layout policy ----------------------------------------------------------------------- */
/* Rules about memory layout the bridge can apply around MLX's operations, for devices whose
 * kernels run fast only over some layouts; the same values either way. A device's room sets its
 * device's policy once at set-up; a device without one gets none of the rules (each entry point
 * then builds exactly the MLX operation it names). src/mlx/layout.cpp describes each rule. */
typedef struct mx_layout_policy {
  /* Elementwise operations: when an operand stands this many elementwise operations deep, every
   * operand at least half as deep is made contiguous first, a fusion barrier placed by the bridge
   * instead of where MLX's compile depth limit falls; 0: no barriers. */
  int fuse_barrier_at;
  /* Elementwise operations over one transpose of arrays beneath (others broadcasting against it,
   * single values aside) run on the arrays beneath and transpose the result. */
  bool sink_transposes;
  /* Elementwise operands of one element with dimensions become rank 0 where the result's rank
   * allows. */
  bool single_values_as_scalars;
  /* Reductions over a transposed view run on the array beneath. */
  bool reduce_beneath_transposes;
} mx_layout_policy;
/* Replaces `device`'s policy (NULL: none, the default). Process-wide; later calls win. */
void mx_set_layout_policy(mx_device device, const mx_layout_policy *policy);

/* --- array facts (no failure possible) ---------------------------------------------------- */
int mx_ndim(mx_array a);
const int *mx_shape(mx_array a); /* mx_ndim(a) entries */
int mx_dim(mx_array a, int axis); /* axis may be negative */
mx_dtype mx_dtype_of(mx_array a);
size_t mx_size(mx_array a);
size_t mx_nbytes(mx_array a);

/* --- creation ----------------------------------------------------------------------------- */
int mx_from_data(mx_ctx *ctx, mx_array *out, const void *data, const int *shape, int ndim,
                 mx_dtype dtype); /* copies */
int mx_wrap_data(mx_ctx *ctx, mx_array *out, void *data, const int *shape, int ndim,
                 mx_dtype dtype); /* no copy: data must outlive every use of the array */
/* A Run's input from a host buffer: an array that copies `data` when evaluated (so data must
 * stay valid and unchanged until then), on the GPU straight into device memory. */
int mx_from_host(mx_ctx *ctx, mx_array *out, const void *data, const int *shape, int ndim,
                 mx_dtype dtype);
int mx_scalar(mx_ctx *ctx, mx_array *out, double value, mx_dtype dtype);
int mx_scalar_int(mx_ctx *ctx, mx_array *out, int64_t value, mx_dtype dtype);
int mx_full(mx_ctx *ctx, mx_array *out, const int *shape, int ndim, mx_array value);
int mx_arange(mx_ctx *ctx, mx_array *out, double start, double stop, double step, mx_dtype dtype);

/* --- evaluation and host access ----------------------------------------------------------- */
int mx_eval(mx_ctx *ctx, const mx_array *arrays, size_t count);
int mx_copy_to_host(mx_ctx *ctx, mx_array a, void *dst, size_t dst_bytes); /* evals, row-major */
/* evals; valid while a lives (a row-major copy, when a is a strided view, is kept with a) */
int mx_host_data(mx_ctx *ctx, mx_array a, const void **data);

/* --- elementwise -------------------------------------------------------------------------- */
int mx_unary(mx_ctx *ctx, mx_array *out, mx_unary_op op, mx_array a);
int mx_binary(mx_ctx *ctx, mx_array *out, mx_binary_op op, mx_array a, mx_array b);
int mx_where(mx_ctx *ctx, mx_array *out, mx_array cond, mx_array x, mx_array y);
int mx_astype(mx_ctx *ctx, mx_array *out, mx_array a, mx_dtype dtype);
int mx_view(mx_ctx *ctx, mx_array *out, mx_array a, mx_dtype dtype); /* reinterpret bits */
int mx_clip(mx_ctx *ctx, mx_array *out, mx_array a, mx_array lo, mx_array hi); /* NULL = none */

/* --- shape and indexing ------------------------------------------------------------------- */
int mx_reshape(mx_ctx *ctx, mx_array *out, mx_array a, const int *shape, int ndim);
int mx_transpose(mx_ctx *ctx, mx_array *out, mx_array a, const int *perm, int ndim);
int mx_broadcast_to(mx_ctx *ctx, mx_array *out, mx_array a, const int *shape, int ndim);
int mx_concatenate(mx_ctx *ctx, mx_array *out, const mx_array *arrays, size_t count, int axis);
int mx_slice(mx_ctx *ctx, mx_array *out, mx_array a, const int *start, const int *stop,
             const int *strides, int ndim);
int mx_slice_update(mx_ctx *ctx, mx_array *out, mx_array a, mx_array update, const int *start,
                    const int *stop, const int *strides, int ndim);
int mx_take(mx_ctx *ctx, mx_array *out, mx_array a, mx_array indices, int axis);
int mx_take_along_axis(mx_ctx *ctx, mx_array *out, mx_array a, mx_array indices, int axis);
int mx_put_along_axis(mx_ctx *ctx, mx_array *out, mx_array a, mx_array indices, mx_array values,
                      int axis);
int mx_pad(mx_ctx *ctx, mx_array *out, mx_array a, const int *low, const int *high, int ndim,
           mx_array value);
int mx_tile(mx_ctx *ctx, mx_array *out, mx_array a, const int *reps, int ndim);
int mx_contiguous(mx_ctx *ctx, mx_array *out, mx_array a);

/* --- reductions, scans, sorting ----------------------------------------------------------- */
/* Reduces over exactly the naxes axes given; naxes == 0 reduces nothing. */
int mx_reduce(mx_ctx *ctx, mx_array *out, mx_reduce_op op, mx_array a, const int *axes,
              int naxes, bool keepdims);
int mx_argmax(mx_ctx *ctx, mx_array *out, mx_array a, int axis, bool keepdims);
int mx_argmin(mx_ctx *ctx, mx_array *out, mx_array a, int axis, bool keepdims);
int mx_cumsum(mx_ctx *ctx, mx_array *out, mx_array a, int axis, bool reverse, bool inclusive);
int mx_cumprod(mx_ctx *ctx, mx_array *out, mx_array a, int axis, bool reverse, bool inclusive);
int mx_sort(mx_ctx *ctx, mx_array *out, mx_array a, int axis);
int mx_argsort(mx_ctx *ctx, mx_array *out, mx_array a, int axis);

/* --- reductions defined over empty axes (reduce family) ----------------------------------- */
/* Like mx_reduce, but MX_MAX and MX_MIN over an axis of size 0 give the reduction's identity
 * (max: -inf or the type's lowest value, min: +inf or its highest) instead of an error, in eager
 * and traced graphs alike (MLX's kernels already do; only its graph-building check refuses). */
int mx_reduce_empty_ok(mx_ctx *ctx, mx_array *out, mx_reduce_op op, mx_array a, const int *axes,
                       int naxes, bool keepdims);
/* The number of elements of a over exactly the given axes (1 when naxes == 0), as a scalar of
 * dtype; stays correct under shapeless compile (MLX's NumberOfElements primitive). */
int mx_number_of_elements(mx_ctx *ctx, mx_array *out, mx_array a, const int *axes, int naxes,
                          mx_dtype dtype);

/* --- linear algebra and neural-network kernels -------------------------------------------- */
int mx_matmul(mx_ctx *ctx, mx_array *out, mx_array a, mx_array b);
/* c + a @ b by MLX's addmm: c is broadcast to the product's shape when the graph is built, so a
 * shapeless compiled function must not use it (it would replay that shape for other sizes). */
int mx_addmm(mx_ctx *ctx, mx_array *out, mx_array c, mx_array a, mx_array b);
/* product + c as one addmm when `product` is a 2-D-right-operand matrix product built by
 * mx_matmul (MLX's Matmul, under the unflatten MLX adds for a batched left operand): BLAS then
 * accumulates onto c; or, when product is a host kernel built with MX_HOST_TAKES_BIAS_ROW and c
 * a row of its last dimension, the same kernel with c as its extra input. *out is NULL (and
 * MX_OK returned) when product is neither.
 * The caller must know that nothing else reads `product` (it would be computed twice) and that
 * the graph is not traced shapeless (addmm fixes c's broadcast). */
int mx_fold_into_product(mx_ctx *ctx, mx_array *out, mx_array product, mx_array c);
/* Whether a is the output of a host kernel (mx_host_kernel). */
bool mx_is_host_kernel(mx_array a);
int mx_softmax(mx_ctx *ctx, mx_array *out, mx_array a, const int *axes, int naxes);
int mx_layer_norm(mx_ctx *ctx, mx_array *out, mx_array x, mx_array weight, mx_array bias,
                  float eps); /* last axis; weight/bias may be NULL */
int mx_rms_norm(mx_ctx *ctx, mx_array *out, mx_array x, mx_array weight, float eps);
int mx_conv(mx_ctx *ctx, mx_array *out, mx_array input, mx_array weight, const int *strides,
            const int *pad_low, const int *pad_high, const int *kernel_dilation,
            const int *input_dilation, int spatial, int groups, bool flip);

/* --- quantized matrix products (llm_quant family) ---------------------------------------- */
/* x @ w^T for a weight w [N, K] in MLX's affine format: w packed in uint32 words along K (each
 * word holds 32 / bits values, the first in the lowest bits), and per group of group_size values
 * along K a scale and a bias (scales, biases [N, K / group_size]): value = scale * q + bias.
 * group_size 32, 64 or 128; bits 2, 3, 4, 5, 6 or 8; x's last dimension is K. biases may be NULL
 * only in MLX's non-affine modes, so callers pass them. */
int mx_quantized_matmul(mx_ctx *ctx, mx_array *out, mx_array x, mx_array w, mx_array scales,
                        mx_array biases, int group_size, int bits);

/* --- axis insertion and removal (shape family) -------------------------------------------- */
/* Rank-only reshapes with their own MLX primitives, so they stay valid under shapeless compile.
 * Axes are non-negative and distinct; expand_dims' axes index the output. */
int mx_squeeze(mx_ctx *ctx, mx_array *out, mx_array a, const int *axes, int naxes);
int mx_expand_dims(mx_ctx *ctx, mx_array *out, mx_array a, const int *axes, int naxes);
int mx_flatten(mx_ctx *ctx, mx_array *out, mx_array a, int start_axis, int end_axis);

/* --- gather and scatter over several axes (index family) ---------------------------------- */
/* MLX's general gather/scatter: indices[i] (n arrays, broadcast together, integer) index axes[i].
 * gather's result has the broadcast index shape followed by slice_sizes (a.ndim entries); scatter's
 * updates have the broadcast index shape followed by a.ndim dims. No bounds checks: callers clamp.
 * 64-bit integer data scatters on the CPU stream (MLX's CUDA scatter has no int64/uint64). */
typedef enum mx_scatter_op {
  MX_SCATTER_SET, MX_SCATTER_ADD, MX_SCATTER_PROD, MX_SCATTER_MAX, MX_SCATTER_MIN
} mx_scatter_op;
int mx_gather(mx_ctx *ctx, mx_array *out, mx_array a, const mx_array *indices, int n,
              const int *axes, const int *slice_sizes);
int mx_scatter(mx_ctx *ctx, mx_array *out, mx_scatter_op op, mx_array a, const mx_array *indices,
               int n, mx_array updates, const int *axes);

/* --- einsum, determinants, random numbers (linalg and random families) -------------------- */
/* MLX's einsum (numpy's equation grammar: implicit output, "..." broadcasting). */
int mx_einsum(mx_ctx *ctx, mx_array *out, const char *subscripts, const mx_array *operands,
              size_t n);
/* Determinant over the last two axes. MLX's LU-based linear algebra runs on the CPU only, so this
 * always uses the CPU stream (whatever ctx->device is); results travel to the GPU as needed. */
int mx_det(mx_ctx *ctx, mx_array *out, mx_array a);
/* A PRNG key from a seed. Random calls take a key, or NULL for MLX's global key sequence (which
 * advances on every call, so each call draws fresh values). */
int mx_random_key(mx_ctx *ctx, mx_array *out, uint64_t seed);
int mx_random_uniform(mx_ctx *ctx, mx_array *out, const int *shape, int ndim, double low,
                      double high, mx_dtype dtype, mx_array key); /* [low, high) */
int mx_random_normal(mx_ctx *ctx, mx_array *out, const int *shape, int ndim, double mean,
                     double scale, mx_dtype dtype, mx_array key);
/* num_samples draws per row of unnormalised log-probabilities along axis (uint32 indices). */
int mx_random_categorical(mx_ctx *ctx, mx_array *out, mx_array logits, int axis,
                          int num_samples, mx_array key);
/* Complex64 values from real and imaginary parts (im NULL: zero), and back. */
int mx_complex(mx_ctx *ctx, mx_array *out, mx_array re, mx_array im);
int mx_real(mx_ctx *ctx, mx_array *out, mx_array a);
int mx_imag(mx_ctx *ctx, mx_array *out, mx_array a);
/* One-dimensional FFTs over `axis` with n points (the axis is zero-padded or truncated to n;
 * for MX_IRFFT to n/2+1 input bins): numpy's conventions, the inverses scaled by 1/n. MX_RFFT
 * takes a real array and gives the n/2+1 non-negative frequencies. */
typedef enum mx_fft_kind { MX_FFT, MX_IFFT, MX_RFFT, MX_IRFFT } mx_fft_kind;
int mx_fft(mx_ctx *ctx, mx_array *out, mx_array a, int n, int axis, mx_fft_kind kind);

/* --- scaled dot-product attention (attention family) ------------------------------------- */
/* MLX's fast::scaled_dot_product_attention: softmax(scale * q @ k^T + mask) @ v over 4-D
 * [B, H, L, D] operands (v's last dimension may differ from D). k and v may have fewer heads than
 * q when they divide its count (grouped-query: q head h reads kv head h / (H / H_kv)). causal:
 * MLX's causal mask, aligned bottom-right (query i sees keys j <= i + Lk - Lq); else mask (NULL
 * for none) is an additive bias of q's dtype broadcastable to [B, H, Lq, Lk]. A row whose bias is
 * -inf everywhere comes out NaN. The softmax accumulates in float32; on the CPU MLX composes
 * matmuls, on GPUs it has fused kernels for common head sizes. */
int mx_sdpa(mx_ctx *ctx, mx_array *out, mx_array q, mx_array k, mx_array v, float scale,
            bool causal, mx_array mask);

/* --- compiled functions ------------------------------------------------------------------- */
/* A graph function builds outputs from inputs with bridge calls; it returns MX_OK or an error
 * (message in ctx->error). Compiled with MLX `compile`, it is traced once per cache key. */
typedef int (*mx_graph_fn)(void *user, mx_ctx *ctx, const mx_array *inputs, size_t n_inputs,
                           mx_array *outputs, size_t n_outputs);
/* Each trace is checked before MLX compiles it: a graph deeper than the calling thread's stack
 * can take through MLX's recursive compile fails with MX_ERR_MLX (the caller runs it eagerly;
 * MLX's eval is iterative), and a shapeless trace holding a reduction over only size-1 axes fails
 * with MX_ERR_SHAPELESS (the caller compiles keyed on shapes instead). */
int mx_compiled_new(mx_ctx *ctx, mx_compiled **out, mx_graph_fn fn, void *user, size_t n_outputs,
                    bool shapeless);
void mx_compiled_free(mx_compiled *compiled);
int mx_compiled_call(mx_ctx *ctx, mx_compiled *compiled, const mx_array *inputs, size_t n_inputs,
                     mx_array *outputs, size_t n_outputs);

/* --- custom GPU kernels (CUDA) ------------------------------------------------------------ */
/* A thin pass-through to MLX's fast::cuda_kernel: `source` is the body of a CUDA __global__
 * function whose signature MLX writes from the names (inputs as `const T* name`, each typed by
 * the array given at call time; outputs as `T* name`); `header` goes before it (helpers,
 * templates). `<name>_shape`, `_strides` and `_ndim` are passed for an input whose name followed
 * by that suffix appears in the source. Inputs are made row-contiguous by MLX before the launch.
 * Creation fails (message in ctx->error) where MLX has no CUDA backend (CPU and Metal builds);
 * a call fails unless ctx->device is the GPU. NVRTC compiles the kernel at the first evaluation
 * of each distinct (source, input dtypes, template args) and caches it: compile errors surface
 * from mx_eval, not here. `grid` counts threads (not blocks), as in metal_kernel. A handle is
 * plain data (no arrays); it may be shared, but MLX calls are serialised by the caller's lock. */
typedef struct mx_kernel mx_kernel;
typedef struct mx_kernel_output {
  const int *shape;
  int ndim;
  mx_dtype dtype;
} mx_kernel_output;
typedef enum mx_template_kind {
  MX_TEMPLATE_INT, MX_TEMPLATE_BOOL, MX_TEMPLATE_DTYPE
} mx_template_kind;
/* `constexpr int name = value;`, `constexpr bool name = value != 0;` or `using name = <the CUDA
 * type of dtype value>;` at the top of the kernel body. */
typedef struct mx_template_arg {
  const char *name;
  mx_template_kind kind;
  int value; /* the int, the bool (0/1), or an mx_dtype */
} mx_template_arg;
int mx_kernel_new(mx_ctx *ctx, mx_kernel **out, const char *name, const char *const *input_names,
                  size_t n_in, const char *const *output_names, size_t n_out, const char *source,
                  const char *header);
void mx_kernel_free(mx_kernel *kernel); /* NULL is fine */
/* results: n_out handles in the context's arena. */
int mx_kernel_call(mx_ctx *ctx, mx_kernel *kernel, const mx_array *inputs, size_t n_in,
                   const mx_kernel_output *outs, size_t n_out, const int grid[3],
                   const int threadgroup[3], const mx_template_arg *targs, size_t n_targs,
                   mx_array *results);

/* --- host kernels (CPU device) ------------------------------------------------------------ */
/* An elementwise pass a kernel may make over its float32 output as it finishes it, instead of a
 * pass of its own: rewrites count floats in place, each from itself alone (so any split of the
 * output into runs gives the same values). */
typedef void (*mx_host_epilogue_fn)(const void *params, float *data, long count);
/* A C function as one operation of an MLX graph on the CPU device, for loops MLX's CPU backend
 * runs slowly. The bridge makes every input row-contiguous, allocates the output (shape, dtype)
 * and calls fn on MLX's CPU stream once the inputs are computed, as MLX's own operations do; it
 * can take part in a compiled function keyed on shapes (not a shapeless one: the output shape is
 * fixed when the operation is built). fn must not fail: check what could fail when building.
 * params (params_size bytes) are copied and handed to fn. Fails unless ctx->device is the CPU. */
typedef struct mx_host_tensor {
  const void *data; /* for the output: where to write (cast away const) */
  mx_dtype dtype;
  int ndim;
  const int *shape;
  const int64_t *strides; /* in elements; row-contiguous unless MX_HOST_STRIDED_INPUTS */
  /* for the output of a kernel built with MX_HOST_TAKES_EPILOGUE: applied to every element
   * once, after its final value is written, when not NULL (mx_fold_epilogue) */
  mx_host_epilogue_fn epilogue;
  const void *epilogue_params;
} mx_host_tensor;
typedef void (*mx_host_fn)(const mx_host_tensor *inputs, int n_inputs, const mx_host_tensor *out,
                           const void *params);
/* flags: MX_HOST_TAKES_BIAS_ROW: fn also accepts one more input, a row of the output's last
 * dimension to add to every row (mx_fold_into_product appends it). MX_HOST_STRIDED_INPUTS: the
 * inputs are handed over as they lie (views such as transposes included, any strides, a
 * broadcast axis's stride 0) instead of copied row-contiguous first. MX_HOST_ELEMENTWISE: fn
 * computes each output element from the same element of its inputs (which have the output's
 * shape, or one element), so when they are one transpose of arrays beneath (a convolution's
 * channels-first view of its channels-last result) it runs on those, in memory order, and the
 * result is transposed back: no copy either way. MX_HOST_TAKES_EPILOGUE: fn applies its output's
 * epilogue, when set, as described there (mx_fold_epilogue sets one). */
enum {
  MX_HOST_TAKES_BIAS_ROW = 1,
  MX_HOST_STRIDED_INPUTS = 2,
  MX_HOST_ELEMENTWISE = 4,
  MX_HOST_TAKES_EPILOGUE = 8
};
int mx_host_kernel(mx_ctx *ctx, mx_array *out, const char *name, mx_host_fn fn,
                   const void *params, size_t params_size, const mx_array *inputs, int n_inputs,
                   const int *shape, int ndim, mx_dtype dtype, unsigned flags);
/* `value` with fn (params, params_size bytes, copied) applied to every element, as the host
 * kernel computing it finishes them: value must be the float32 result of a kernel built with
 * MX_HOST_TAKES_EPILOGUE and holding no epilogue yet, or a transpose or reshape of one (a
 * convolution's channels-first view); the views are rebuilt over the new kernel's result. *out
 * is NULL (and MX_OK returned) when value is none of these. The caller must know that nothing
 * else reads the kernel's result (it would be computed twice). A bias row is not folded in
 * after an epilogue. */
int mx_fold_epilogue(mx_ctx *ctx, mx_array *out, mx_array value, mx_host_epilogue_fn fn,
                     const void *params, size_t params_size);

#ifdef __cplusplus
}
#endif
#endif
