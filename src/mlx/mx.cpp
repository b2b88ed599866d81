/*
 * The MLX bridge's implementation: each function unwraps handles, calls one MLX C++ operation on
 * the context's device, and wraps the result into the context's arena. Every entry point runs its
 * body inside MX_GUARD, whose catch chain ends in `catch (...)`, so no C++ exception leaves this
 * file; the message lands in ctx->error prefixed with the bridge call's name. No ONNX knowledge
 * lives here.
 */
#include "mx.h"

#include <mlx/compile.h>
#include <mlx/fast.h>
#include <mlx/mlx.h>
#include <mlx/primitives.h>
#include <mlx/memory.h>
#include <mlx/version.h>
#include <mlx/allocator.h>
#include <mlx/backend/cpu/encoder.h>

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <dlfcn.h>

namespace mc = mlx::core;

/* Live handles and arenas, process-wide (mx_live_objects): a session that ends must give back
 * every one it made. */
static std::atomic<size_t> live_arrays{0}, live_arenas{0};

struct mx_array_impl {
  mc::array a;
  int fused_depth = 0; /* elementwise operations stacked on the nearest non-elementwise values */
  std::optional<mc::array> rank0; /* an evaluated one-element `a` as a rank-0 copy (Elementwise) */
  explicit mx_array_impl(mc::array x) : a(std::move(x)) { live_arrays++; }
  ~mx_array_impl() { live_arrays--; }
  mx_array_impl(const mx_array_impl &) = delete;
  mx_array_impl &operator=(const mx_array_impl &) = delete;
};

struct mx_arena {
  std::vector<mx_array_impl *> arrays;
  mx_arena() { live_arenas++; }
  ~mx_arena() {
    for (auto *p : arrays) delete p;
    live_arenas--;
  }
  mx_arena(const mx_arena &) = delete;
  mx_arena &operator=(const mx_arena &) = delete;
};

namespace {

void set_error_text(mx_ctx *ctx, const char *where, const char *what) {
  if (ctx) std::snprintf(ctx->error, sizeof ctx->error, "[%s] %s", where, what);
}

mc::Device device_of(const mx_ctx *ctx) {
  return ctx->device == MX_DEVICE_GPU ? mc::Device(mc::Device::gpu) : mc::Device(mc::Device::cpu);
}

mc::Dtype to_mlx(mx_dtype t) {
  switch (t) {
    case MX_BOOL: return mc::bool_;
    case MX_UINT8: return mc::uint8;
    case MX_UINT16: return mc::uint16;
    case MX_UINT32: return mc::uint32;
    case MX_UINT64: return mc::uint64;
    case MX_INT8: return mc::int8;
    case MX_INT16: return mc::int16;
    case MX_INT32: return mc::int32;
    case MX_INT64: return mc::int64;
    case MX_FLOAT16: return mc::float16;
    case MX_FLOAT32: return mc::float32;
    case MX_FLOAT64: return mc::float64;
    case MX_BFLOAT16: return mc::bfloat16;
    case MX_COMPLEX64: return mc::complex64;
  }
  throw std::invalid_argument("unknown bridge dtype");
}

mx_dtype from_mlx(mc::Dtype t) {
  switch (t.val()) {
    case mc::Dtype::Val::bool_: return MX_BOOL;
    case mc::Dtype::Val::uint8: return MX_UINT8;
    case mc::Dtype::Val::uint16: return MX_UINT16;
    case mc::Dtype::Val::uint32: return MX_UINT32;
    case mc::Dtype::Val::uint64: return MX_UINT64;
    case mc::Dtype::Val::int8: return MX_INT8;
    case mc::Dtype::Val::int16: return MX_INT16;
    case mc::Dtype::Val::int32: return MX_INT32;
    case mc::Dtype::Val::int64: return MX_INT64;
    case mc::Dtype::Val::float16: return MX_FLOAT16;
    case mc::Dtype::Val::float32: return MX_FLOAT32;
    case mc::Dtype::Val::float64: return MX_FLOAT64;
    case mc::Dtype::Val::bfloat16: return MX_BFLOAT16;
    case mc::Dtype::Val::complex64: return MX_COMPLEX64;
  }
  return MX_FLOAT32; /* unreachable: every MLX dtype is listed above */
}

mc::Shape to_shape(const int *shape, int ndim) {
  if (ndim < 0 || ndim > MX_MAX_RANK) throw std::invalid_argument("rank out of range");
  return mc::Shape(shape, shape + ndim);
}

std::vector<int> to_vec(const int *v, int n) {
  return n > 0 ? std::vector<int>(v, v + n) : std::vector<int>();
}

/* Fault injection (mx_fail_call_arm): guarded calls left before the one that fails; 0: off.
 * Bridge calls run under the EP's MLX lock, but the count is atomic all the same. */
std::atomic<long> calls_before_failure{0};

void fault_point() {
  if (calls_before_failure.load(std::memory_order_relaxed) <= 0) return;
  if (calls_before_failure.fetch_sub(1) == 1) throw std::runtime_error("injected failure");
}

/* An array too large to be allocated: MX_GUARD maps it to MX_ERR_NOMEM with its message. */
struct TooLarge : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/* The largest array the bridge lets MLX build: MLX's memory limit (by default a share of the
 * machine's memory on the CPU device, of the GPU's on the GPU), read once. */
size_t array_byte_limit() {
  static const size_t limit = [] {
    size_t l = mc::get_memory_limit();
    return l ? l : SIZE_MAX;
  }();
  return limit;
}

/* Refuses an array whose bytes exceed array_byte_limit(). MLX's CPU allocator returns a null
 * buffer when malloc fails and its kernels then write through it (SIGSEGV: a broadcast Add of
 * [2^17, 1] and [1, 2^17], 64 GiB, though every dimension fits int32), so the size is checked
 * when the lazy array is made, before anything is allocated. */
void check_size(const mc::array &a) {
  size_t bytes = a.itemsize();
  bool overflow = false;
  for (auto d : a.shape()) {
    size_t n = static_cast<size_t>(d);
    if (n && bytes > SIZE_MAX / n) overflow = true;
    else bytes *= n;
  }
  if (overflow || bytes > array_byte_limit()) {
    std::string shape;
    for (auto d : a.shape()) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    throw TooLarge("an array of shape [" + shape + "] (" +
                   (overflow ? std::string("more than 2^64") : std::to_string(bytes)) +
                   " bytes) exceeds MLX's memory limit of " + std::to_string(array_byte_limit()) +
                   " bytes");
  }
}

/* Puts a new array into the context's arena and hands back its handle. */
int keep(mx_ctx *ctx, mx_array *out, mc::array a) {
  check_size(a);
  auto *impl = new mx_array_impl(std::move(a));
  try {
    ctx->arena->arrays.push_back(impl);
  } catch (...) {
    delete impl;
    throw;
  }
  *out = impl;
  return MX_OK;
}

const mc::array &A(mx_array h) {
  if (!h) throw std::invalid_argument("missing array");
  return h->a;
}

/* The permutation `a` is a transpose (a view) by, when it is one and not the identity; else
 * empty. By the primitive's name: libmlx does not export its primitives' type information. */
std::vector<int> transpose_of(const mc::array &a) {
  if (!a.has_primitive() || std::strcmp(a.primitive().name(), "Transpose") != 0) return {};
  auto perm = static_cast<const mc::Transpose &>(a.primitive()).state();
  for (size_t i = 0; i < perm.size(); i++)
    if (perm[i] != static_cast<int>(i)) return perm;
  return {};
}

/* Fusion depth. MLX's compile fuses a chain of elementwise operations at most 11 deep
 * (max_compile_depth in mlx/compile.cpp) and cuts deeper chains. Where a cut falls on the
 * Broadcast that MLX puts under a scalar operand, that broadcast (strides 0) becomes an input of
 * the kernel above, and MLX then runs the whole kernel through its strided loop, which g++ does
 * not vectorise (measured in docs/BENCHMARKS.md). So every elementwise result records how many
 * elementwise operations stand on the nearest other values, and an operand already
 * FUSE_BARRIER_AT deep goes through contiguous() first: MLX does not fuse across it, costs
 * nothing for an array that is contiguous (a fused kernel's output is), and so makes the cut
 * itself, at a value rather than at a broadcast. */
constexpr int FUSE_BARRIER_AT = 8;

/* Layout. A convolution computes channels-last and hands ONNX a transposed view (channels
 * first) of its result. MLX's fused CPU kernels take their contiguous (vectorised) loop only
 * when every operand that is not a single value is row-contiguous, so an activation applied to
 * that view ran MLX's strided loop (scalar code) and wrote a channels-first copy, which the next
 * convolution copied back to channels-last. On the CPU device an elementwise operation whose
 * operands are the same transpose of same-shaped arrays (single values aside) therefore runs on
 * the arrays beneath and transposes its result instead: the same values, computed in memory
 * order, and still a view for whatever reads it next. So does one whose other operands
 * broadcast against such a transpose (a squeeze-and-excitation scale [1, C, 1, 1], a
 * per-channel constant), each taken through the inverse permutation, a view: MLX's loop for the
 * broadcast is strided either way, but the result is channels-last, which the convolution after
 * it would otherwise copy it into (PP-OCRv4 rec's squeeze-and-excitation blocks). */
struct Elementwise {
  std::vector<mc::array> arrays; /* the operands, behind barriers where deep */
  std::vector<int> depths;
  std::vector<int> sunk; /* the transpose applied to the result; empty when none */

  /* Missing handles are skipped where `optional` (Clip's bounds), refused otherwise. Cuts are
   * made on the CPU device only, whose strided loop is the one measured slow; `layout` allows
   * the transpose to be sunk (operations that keep their operands' shape). */
  Elementwise(const mx_ctx *ctx, std::initializer_list<mx_array> handles, bool optional = false,
              bool layout = true) {
    bool cpu = ctx->device == MX_DEVICE_CPU;
    std::vector<mx_array> hs;
    for (mx_array h : handles) {
      if (!h && optional) continue;
      A(h); /* refuses a missing handle */
      hs.push_back(h);
    }
    if (cpu && layout) sunk = shared_transpose(hs, true);
    std::vector<int> inverse(sunk.size());
    for (size_t i = 0; i < sunk.size(); i++) inverse[sunk[i]] = static_cast<int>(i);
    int deepest = 0;
    for (mx_array h : hs) deepest = std::max(deepest, depth(h));
    for (mx_array h : hs) {
      /* Cut every fairly deep operand, not only the deepest: a value shared by a long chain
       * (a polynomial's variable) would otherwise force a cut at every step. The handle keeps
       * the cut (beneath its transpose when sunk), so later operations reuse it. */
      bool transposed = !sunk.empty() && h->a.size() != 1;
      mc::array x = !transposed                  ? h->a
                    : transpose_of(h->a) == sunk ? h->a.inputs().at(0)
                                                 : mc::transpose(h->a, inverse, device_of(ctx));
      if (cpu && deepest >= FUSE_BARRIER_AT && depth(h) >= FUSE_BARRIER_AT / 2) {
        x = mc::contiguous(x, false, device_of(ctx));
        h->a = transposed ? mc::transpose(x, sunk, device_of(ctx)) : x;
        h->fused_depth = 0;
      }
      arrays.push_back(x);
      depths.push_back(depth(h));
    }
    if (cpu) single_values_as_scalars(ctx, hs);
  }

  /* MLX's fused CPU kernel counts an operand of one element as a scalar only when it has no
   * dimensions; a [1] constant (common in exported models: Mul by a [1] weight) makes it take
   * the strided loop for the whole kernel. Such operands become rank 0 where that cannot change
   * the result's rank (another operand has at least as many dimensions). An evaluated one (a
   * plan's constant, whose handle lives as long as the plan) gets a rank-0 copy once, kept on
   * its handle, so eager runs build no extra operation for it; others are reshaped. */
  void single_values_as_scalars(const mx_ctx *ctx, const std::vector<mx_array> &hs) {
    size_t widest = 0;
    for (const auto &a : arrays)
      if (a.size() != 1) widest = std::max(widest, a.ndim());
    for (size_t i = 0; i < arrays.size(); i++) {
      mc::array &a = arrays[i];
      if (a.size() != 1 || a.ndim() == 0 || a.ndim() > widest) continue;
      mx_array h = hs[i];
      if (h->a.id() == a.id() && !a.has_primitive() && a.is_available()) {
        if (!h->rank0) {
          void *copy = std::malloc(a.itemsize());
          if (!copy) throw std::bad_alloc();
          std::memcpy(copy, a.data<char>(), a.itemsize());
          h->rank0 = mc::array(copy, mc::Shape{}, a.dtype(), [](void *p) { std::free(p); });
        }
        a = *h->rank0;
      } else {
        a = mc::reshape(a, {}, device_of(ctx));
      }
    }
  }

  /* The permutation every operand that is not a single value is a transpose by, with the same
   * shape, when there is one and it is not the identity; else empty. Single values must not
   * have more dimensions than the transposed operands (they would add leading axes). With
   * `broadcast`, operands may instead have the rank of the largest such transpose and broadcast
   * against its shape (those not transposed by the permutation are taken through its inverse). */
  static std::vector<int> shared_transpose(const std::vector<mx_array> &hs,
                                           bool broadcast = false) {
    std::vector<int> perm;
    const mc::array *first = nullptr;
    for (mx_array h : hs) { /* the largest transposed operand fixes the permutation */
      const mc::array &a = h->a;
      std::vector<int> p = a.size() == 1 ? std::vector<int>() : transpose_of(a);
      if (!p.empty() && (!first || a.size() > first->size())) first = &a, perm = p;
    }
    if (!first) return {};
    for (mx_array h : hs) {
      const mc::array &a = h->a;
      if (a.size() == 1) {
        if (a.ndim() > first->ndim()) return {};
        continue;
      }
      if (!broadcast) {
        if (transpose_of(a) != perm || a.shape() != first->shape()) return {};
        continue;
      }
      if (a.ndim() != first->ndim()) return {};
      for (size_t i = 0; i < a.ndim(); i++)
        if (a.shape(i) != first->shape(i) && a.shape(i) != 1) return {};
    }
    return perm;
  }

  /* An evaluated array (a plan's constant, which concurrent runs share and which is never cut
   * here) stands on nothing. */
  static int depth(mx_array h) { return A(h).has_primitive() ? h->fused_depth : 0; }
  const mc::array &operator[](size_t i) const { return arrays.at(i); }

  /* Depth of a result built from these operands; MLX's own nodes in between (the broadcasts
   * and casts it inserts) count one each. */
  int depth_of(const mc::array &x, int hops = 0) const {
    for (size_t i = 0; i < arrays.size(); i++)
      if (x.id() == arrays[i].id()) return depths[i];
    if (!x.has_primitive()) return 0;
    if (hops == 4) return FUSE_BARRIER_AT; /* not built as expected: barrier next time */
    int d = 0;
    for (const auto &in : x.inputs()) d = std::max(d, depth_of(in, hops + 1));
    return d + 1;
  }

  /* The result's depth counts the operation, not the transpose put back over it. */
  int wrap(mx_ctx *ctx, mx_array *out, mc::array result) const {
    int depth = depth_of(result);
    if (!sunk.empty()) result = mc::transpose(result, sunk, device_of(ctx));
    keep(ctx, out, std::move(result));
    (*out)->fused_depth = depth;
    return MX_OK;
  }
};

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

#define MX_GUARD(ctx, out, ...)                                           \
  do {                                                                    \
    if (out) *(out) = nullptr;                                            \
    try {                                                                 \
      fault_point();                                                      \
      __VA_ARGS__;                                                        \
    } catch (const std::bad_alloc &) {                                    \
      set_error_text(ctx, __func__, "out of memory");                     \
      return MX_ERR_NOMEM;                                                \
    } catch (const TooLarge &e) {                                         \
      set_error_text(ctx, __func__, e.what());                            \
      return MX_ERR_NOMEM;                                                \
    } catch (const std::invalid_argument &e) {                            \
      set_error_text(ctx, __func__, e.what());                            \
      return MX_ERR_ARG;                                                  \
    } catch (const std::exception &e) {                                   \
      set_error_text(ctx, __func__, e.what());                            \
      return MX_ERR_MLX;                                                  \
    } catch (...) {                                                       \
      set_error_text(ctx, __func__, "unknown C++ exception");             \
      return MX_ERR_MLX;                                                  \
    }                                                                     \
  } while (0)

#define MX_RESULT(...) MX_GUARD(ctx, out, return keep(ctx, out, (__VA_ARGS__)))

extern "C" {

/* --- arenas, devices, errors ------------------------------------------------------------- */
mx_arena *mx_arena_new(void) { return new (std::nothrow) mx_arena(); }

void mx_arena_free(mx_arena *arena) { delete arena; }
size_t mx_arena_count(const mx_arena *arena) { return arena ? arena->arrays.size() : 0; }

void mx_live_objects(size_t *arrays, size_t *arenas) {
  *arrays = live_arrays.load();
  *arenas = live_arenas.load();
}

void mx_fail_call_arm(long n) { calls_before_failure.store(n > 0 ? n : 0); }

bool mx_device_available(mx_device device) {
  try {
    return mc::is_available(device == MX_DEVICE_GPU ? mc::Device(mc::Device::gpu)
                                                    : mc::Device(mc::Device::cpu));
  } catch (...) {
    return false;
  }
}

const char *mx_version(void) {
  static std::string v;
  try {
    if (v.empty()) v = mc::version();
  } catch (...) {
    return "unknown";
  }
  return v.c_str();
}

size_t mx_cache_limit_at_least(size_t bytes) {
  try {
    size_t previous = mc::set_cache_limit(bytes);
    if (previous > bytes) mc::set_cache_limit(previous);
    return std::max(previous, bytes);
  } catch (...) {
    return 0;
  }
}

const char *mx_library_dir(void) {
  static std::string dir;
  try {
    Dl_info info;
    if (dir.empty() && dladdr(reinterpret_cast<void *>(&mc::version), &info) && info.dli_fname) {
      dir = info.dli_fname;
      dir.erase(dir.find_last_of('/') == std::string::npos ? 0 : dir.find_last_of('/'));
    }
  } catch (...) {
    return "";
  }
  return dir.c_str();
}

void mx_set_error(mx_ctx *ctx, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(ctx->error, sizeof ctx->error, fmt, ap);
  va_end(ap);
}

const char *mx_dtype_name(mx_dtype t) {
  static const char *names[] = {"bool",    "uint8",   "uint16",  "uint32", "uint64",
                                "int8",    "int16",   "int32",   "int64",  "float16",
                                "float32", "float64", "bfloat16", "complex64"};
  return (unsigned)t < sizeof names / sizeof *names ? names[t] : "unknown";
}

size_t mx_dtype_size(mx_dtype t) {
  try {
    return to_mlx(t).size();
  } catch (...) {
    return 0;
  }
}

bool mx_dtype_is_float(mx_dtype t) {
  return t == MX_FLOAT16 || t == MX_FLOAT32 || t == MX_FLOAT64 || t == MX_BFLOAT16;
}
bool mx_dtype_is_signed_int(mx_dtype t) { return t >= MX_INT8 && t <= MX_INT64; }
bool mx_dtype_is_unsigned_int(mx_dtype t) { return t >= MX_UINT8 && t <= MX_UINT64; }

/* --- array facts ------------------------------------------------------------------------- */
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

/* Evaluates an array and makes its memory row-major contiguous for the host (flags are only
 * known after evaluation, so check after, and copy when the result is a strided view). */
static const mc::array &host_ready(mx_ctx *ctx, mx_array h) {
  A(h);
  h->a.eval();
  if (!h->a.flags().row_contiguous) {
    h->a = mc::contiguous(h->a, false, device_of(ctx));
    h->a.eval();
  }
  if (!h->a.flags().row_contiguous) {
    h->a = mc::add(h->a, mc::zeros_like(h->a, device_of(ctx)), device_of(ctx)); /* fresh buffer */
    h->a.eval();
  }
  if (!h->a.flags().row_contiguous) throw std::runtime_error("array is not row-contiguous");
  return h->a;
}

int mx_copy_to_host(mx_ctx *ctx, mx_array a, void *dst, size_t dst_bytes) {
  mx_array *out = nullptr;
  MX_GUARD(ctx, out, {
    const mc::array &x = host_ready(ctx, a);
    if (x.nbytes() != dst_bytes)
      throw std::invalid_argument("destination holds " + std::to_string(dst_bytes) +
                                  " bytes, result has " + std::to_string(x.nbytes()));
    if (dst_bytes) std::memcpy(dst, x.data<void>(), dst_bytes);
    return MX_OK;
  });
}

int mx_host_data(mx_ctx *ctx, mx_array a, const void **data) {
  mx_array *out = nullptr;
  *data = nullptr;
  MX_GUARD(ctx, out, {
    *data = host_ready(ctx, a).data<void>();
    return MX_OK;
  });
}

/* --- elementwise ------------------------------------------------------------------------- */
int mx_unary(mx_ctx *ctx, mx_array *out, mx_unary_op op, mx_array a) {
  MX_GUARD(ctx, out, {
    auto s = device_of(ctx);
    Elementwise ops(ctx, {a});
    const mc::array &x = ops[0];
    switch (op) {
      case MX_ABS: return ops.wrap(ctx, out, mc::abs(x, s));
      case MX_NEG: return ops.wrap(ctx, out, mc::negative(x, s));
      case MX_EXP: return ops.wrap(ctx, out, mc::exp(x, s));
      case MX_LOG: return ops.wrap(ctx, out, mc::log(x, s));
      case MX_SQRT: return ops.wrap(ctx, out, mc::sqrt(x, s));
      case MX_RSQRT: return ops.wrap(ctx, out, mc::rsqrt(x, s));
      case MX_RECIPROCAL: return ops.wrap(ctx, out, mc::reciprocal(x, s));
      case MX_SIGMOID: return ops.wrap(ctx, out, mc::sigmoid(x, s));
      case MX_TANH: return ops.wrap(ctx, out, mc::tanh(x, s));
      case MX_ERF: return ops.wrap(ctx, out, mc::erf(x, s));
      case MX_SIN: return ops.wrap(ctx, out, mc::sin(x, s));
      case MX_COS: return ops.wrap(ctx, out, mc::cos(x, s));
      case MX_TAN: return ops.wrap(ctx, out, mc::tan(x, s));
      case MX_ASIN: return ops.wrap(ctx, out, mc::arcsin(x, s));
      case MX_ACOS: return ops.wrap(ctx, out, mc::arccos(x, s));
      case MX_ATAN: return ops.wrap(ctx, out, mc::arctan(x, s));
      case MX_SINH: return ops.wrap(ctx, out, mc::sinh(x, s));
      case MX_COSH: return ops.wrap(ctx, out, mc::cosh(x, s));
      case MX_ASINH: return ops.wrap(ctx, out, mc::arcsinh(x, s));
      case MX_ACOSH: return ops.wrap(ctx, out, mc::arccosh(x, s));
      case MX_ATANH: return ops.wrap(ctx, out, mc::arctanh(x, s));
      case MX_FLOOR: return ops.wrap(ctx, out, mc::floor(x, s));
      case MX_CEIL: return ops.wrap(ctx, out, mc::ceil(x, s));
      case MX_ROUND: return ops.wrap(ctx, out, mc::round(x, s));
      case MX_SIGN: return ops.wrap(ctx, out, mc::sign(x, s));
      case MX_LOGICAL_NOT: return ops.wrap(ctx, out, mc::logical_not(x, s));
      case MX_ISNAN: return ops.wrap(ctx, out, mc::isnan(x, s));
      case MX_ISPOSINF: return ops.wrap(ctx, out, mc::isposinf(x, s));
      case MX_ISNEGINF: return ops.wrap(ctx, out, mc::isneginf(x, s));
      case MX_SQUARE: return ops.wrap(ctx, out, mc::square(x, s));
      case MX_LOG1P: return ops.wrap(ctx, out, mc::log1p(x, s));
      case MX_EXPM1: return ops.wrap(ctx, out, mc::expm1(x, s));
      case MX_BITWISE_INVERT: return ops.wrap(ctx, out, mc::bitwise_invert(x, s));
      case MX_UNARY_OP_COUNT: break;
    }
    throw std::invalid_argument("unknown unary op");
  });
}

int mx_binary(mx_ctx *ctx, mx_array *out, mx_binary_op op, mx_array a, mx_array b) {
  MX_GUARD(ctx, out, {
    auto s = device_of(ctx);
    Elementwise ops(ctx, {a, b});
    const mc::array &x = ops[0], &y = ops[1];
    switch (op) {
      case MX_ADD: return ops.wrap(ctx, out, mc::add(x, y, s));
      case MX_SUBTRACT: return ops.wrap(ctx, out, mc::subtract(x, y, s));
      case MX_MULTIPLY: return ops.wrap(ctx, out, mc::multiply(x, y, s));
      case MX_DIVIDE: return ops.wrap(ctx, out, mc::divide(x, y, s));
      case MX_POWER: return ops.wrap(ctx, out, mc::power(x, y, s));
      case MX_MAXIMUM: return ops.wrap(ctx, out, mc::maximum(x, y, s));
      case MX_MINIMUM: return ops.wrap(ctx, out, mc::minimum(x, y, s));
      case MX_EQUAL: return ops.wrap(ctx, out, mc::equal(x, y, s));
      case MX_NOT_EQUAL: return ops.wrap(ctx, out, mc::not_equal(x, y, s));
      case MX_LESS: return ops.wrap(ctx, out, mc::less(x, y, s));
      case MX_LESS_EQUAL: return ops.wrap(ctx, out, mc::less_equal(x, y, s));
      case MX_GREATER: return ops.wrap(ctx, out, mc::greater(x, y, s));
      case MX_GREATER_EQUAL: return ops.wrap(ctx, out, mc::greater_equal(x, y, s));
      case MX_LOGICAL_AND: return ops.wrap(ctx, out, mc::logical_and(x, y, s));
      case MX_LOGICAL_OR: return ops.wrap(ctx, out, mc::logical_or(x, y, s));
      case MX_REMAINDER: return ops.wrap(ctx, out, mc::remainder(x, y, s));
      case MX_FLOOR_DIVIDE: return ops.wrap(ctx, out, mc::floor_divide(x, y, s));
      case MX_BITWISE_AND: return ops.wrap(ctx, out, mc::bitwise_and(x, y, s));
      case MX_BITWISE_OR: return ops.wrap(ctx, out, mc::bitwise_or(x, y, s));
      case MX_BITWISE_XOR: return ops.wrap(ctx, out, mc::bitwise_xor(x, y, s));
      case MX_LEFT_SHIFT: return ops.wrap(ctx, out, mc::left_shift(x, y, s));
      case MX_RIGHT_SHIFT: return ops.wrap(ctx, out, mc::right_shift(x, y, s));
      case MX_ATAN2: return ops.wrap(ctx, out, mc::arctan2(x, y, s));
      case MX_LOGADDEXP: return ops.wrap(ctx, out, mc::logaddexp(x, y, s));
      case MX_BINARY_OP_COUNT: break;
    }
    throw std::invalid_argument("unknown binary op");
  });
}

int mx_where(mx_ctx *ctx, mx_array *out, mx_array cond, mx_array x, mx_array y) {
  MX_GUARD(ctx, out, {
    auto s = device_of(ctx);
    Elementwise ops(ctx, {cond, x, y});
    return ops.wrap(ctx, out, mc::where(ops[0], ops[1], ops[2], s));
  });
}

int mx_astype(mx_ctx *ctx, mx_array *out, mx_array a, mx_dtype dtype) {
  MX_GUARD(ctx, out, {
    auto s = device_of(ctx);
    Elementwise ops(ctx, {a});
    return ops.wrap(ctx, out, mc::astype(ops[0], to_mlx(dtype), s));
  });
}

int mx_view(mx_ctx *ctx, mx_array *out, mx_array a, mx_dtype dtype) {
  MX_RESULT(mc::view(A(a), to_mlx(dtype), device_of(ctx)));
}

int mx_clip(mx_ctx *ctx, mx_array *out, mx_array a, mx_array lo, mx_array hi) {
  MX_GUARD(ctx, out, {
    auto s = device_of(ctx);
    Elementwise ops(ctx, {a, lo, hi}, true);
    std::optional<mc::array> l, h;
    if (lo) l = ops[1];
    if (hi) h = ops[lo ? 2 : 1];
    return ops.wrap(ctx, out, mc::clip(ops[0], l, h, s));
  });
}

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

/* Layout, for reductions: over a transposed view (a convolution's channels-first result) MLX's
 * CPU reduction walks the view's strides; GlobalAveragePool over PP-OCRv4 rec's [1, 480, 6, 80]
 * took 1.1 ms that way and 0.11 ms over the channels-last array beneath. On the CPU device a
 * reduction of such a view therefore runs on the array beneath, over the same axes mapped
 * through the permutation, keeping them; the result is transposed back (and, without keepdims,
 * the axes dropped). The same elements reduce, in memory order. */
int mx_reduce(mx_ctx *ctx, mx_array *out, mx_reduce_op op, mx_array a, const int *axes,
              int naxes, bool keepdims) {
  MX_GUARD(ctx, out, {
    const mc::array &x = A(a);
    std::vector<int> ax = to_vec(axes, naxes);
    auto s = device_of(ctx);
    std::vector<int> perm =
        ctx->device == MX_DEVICE_CPU && naxes > 0 ? transpose_of(x) : std::vector<int>();
    int rank = static_cast<int>(x.ndim());
    std::vector<int> beneath; /* the axes of the array beneath; empty when not sunk */
    for (size_t i = 0; i < ax.size() && !perm.empty(); i++) {
      int v = ax[i] < 0 ? ax[i] + rank : ax[i];
      if (v < 0 || v >= rank) break; /* left for MLX to refuse */
      beneath.push_back(perm[v]);
    }
    if (beneath.empty() || beneath.size() != ax.size())
      return keep(ctx, out, reduction(op, x, ax, keepdims, s));
    mc::array y = mc::transpose(reduction(op, x.inputs().at(0), beneath, true, s), perm, s);
    return keep(ctx, out, keepdims ? y : mc::squeeze(y, ax, s));
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

/* --- linear algebra and neural-network kernels ------------------------------------------- */
int mx_matmul(mx_ctx *ctx, mx_array *out, mx_array a, mx_array b) {
  MX_RESULT(mc::matmul(A(a), A(b), device_of(ctx)));
}

int mx_addmm(mx_ctx *ctx, mx_array *out, mx_array c, mx_array a, mx_array b) {
  MX_RESULT(mc::addmm(A(c), A(a), A(b), 1.0f, 1.0f, device_of(ctx)));
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
    /* by name: libmlx does not export its primitives' type information */
    const char *top = p.primitive().name();
    bool reshaped = std::strcmp(top, "Reshape") == 0 || std::strcmp(top, "Unflatten") == 0;
    if (reshaped) m = p.inputs().at(0);
    if (!m.has_primitive() || std::strcmp(m.primitive().name(), "Matmul") != 0) return MX_OK;
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
      const char *name = at->primitive().name(); /* by name, as in transpose_of */
      if (std::strcmp(name, "Transpose") != 0 && std::strcmp(name, "Reshape") != 0) break;
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
      const mc::Primitive &view = (*v)->primitive();
      y = std::strcmp(view.name(), "Transpose") == 0
              ? mc::transpose(y, static_cast<const mc::Transpose &>(view).state(), s)
              : mc::reshape(y, (*v)->shape(), s);
    }
    return keep(ctx, out, std::move(y));
  });
}

bool mx_is_host_kernel(mx_array a) {
  const mc::array &x = A(a);
  return x.has_primitive() && dynamic_cast<HostKernel *>(&x.primitive()) != nullptr;
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

/* --- einsum, determinants, random numbers (linalg and random families) ------------------- */
namespace {
std::optional<mc::array> opt_key(mx_array key) {
  return key ? std::optional<mc::array>(A(key)) : std::nullopt;
}
}  // namespace

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

/* --- host kernels (CPU device) ------------------------------------------------------------ */
int mx_host_kernel(mx_ctx *ctx, mx_array *out, const char *name, mx_host_fn fn,
                   const void *params, size_t params_size, const mx_array *inputs, int n_inputs,
                   const int *shape, int ndim, mx_dtype dtype, unsigned flags) {
  MX_GUARD(ctx, out, {
    if (ctx->device != MX_DEVICE_CPU)
      throw std::invalid_argument(std::string("host kernel ") + name + " needs the CPU device");
    auto s = mc::default_stream(device_of(ctx));
    /* an elementwise kernel over operands that are one transpose of arrays beneath runs on
     * those and transposes its result back (as Elementwise does for MLX's operations) */
    std::vector<int> sunk;
    if (flags & MX_HOST_ELEMENTWISE)
      sunk = Elementwise::shared_transpose(std::vector<mx_array>(inputs, inputs + n_inputs));
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

}  // extern "C"

/* --- compiled functions ------------------------------------------------------------------ */
struct mx_compiled {
  std::function<std::vector<mc::array>(const std::vector<mc::array> &)> fn;
  std::vector<mc::Shape> checked; /* the input shapes of the last call whose sizes were checked */
};

namespace {

/* Thrown by a trace that shapeless compile must not take; mx_compiled_call maps it to
 * MX_ERR_SHAPELESS. */
struct ShapelessHazard : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/* Whether MLX's shapeless compile mis-runs this node. MLX 0.32's shapeless compile dies of
 * SIGSEGV (or aborts) at eval on a reduction whose reduced axes all have size 1 while other axes
 * are left: `mx.compile(lambda x: mx.sum(x, axis=0), shapeless=True)` crashes on [1, 4] and on
 * [1, 1], not on [1] or over both axes of [1, 1]; keyed or eager it is fine. Reduce keeps the
 * reduced axes as 1, so its output has its input's shape exactly when they are all 1; softmax,
 * logsumexp and the fast norms reduce the last axis. Primitives are told by name: libmlx exports
 * no type information for them. Remove when MLX's shapeless replay handles such reductions. */
bool shapeless_mis_runs(const mc::array &a) {
  if (!a.has_primitive() || a.inputs().empty()) return false;
  const mc::array &in = a.inputs()[0];
  if (in.ndim() < 2) return false; /* a reduction of a rank-1 array reduces every axis */
  static const char *const reductions[] = {"And", "Or", "Sum", "Prod", "Min", "Max"};
  static const char *const last_axis[] = {"Softmax", "LogSumExp", "LayerNorm", "RMSNorm"};
  const char *name = a.primitive().name();
  for (const char *r : reductions)
    if (std::strcmp(name, r) == 0)
      return a.shape() == in.shape() &&
             static_cast<const mc::Reduce &>(a.primitive()).state().second.size() < in.ndim();
  for (const char *r : last_axis)
    if (std::strcmp(name, r) == 0) return in.shape().back() == 1;
  return false;
}

/* Bytes of the calling thread's stack left below this frame (0 when unknown). */
size_t stack_left() {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return 0;
  void *base = nullptr;
  size_t size = 0;
  int rc = pthread_attr_getstack(&attr, &base, &size);
  pthread_attr_destroy(&attr);
  char here;
  if (rc != 0 || !base) return 0;
  uintptr_t lo = reinterpret_cast<uintptr_t>(base), at = reinterpret_cast<uintptr_t>(&here);
  return at > lo ? at - lo : 0;
}

/* MLX's compile walks the traced graph recursively (compile_dfs), a frame of about 150 bytes a
 * level: a chain of 60,000 operations overflowed an 8 MiB stack. A trace whose longest path would
 * need more than half the stack left, at a generous 512 bytes a level, is not handed to it. */
constexpr size_t COMPILE_BYTES_PER_LEVEL = 512;

/* Checks a trace before MLX compiles it (mx_compiled_new); throws when it must not be. The walk
 * is iterative (a graph too deep for MLX's recursion is what it looks for) and stops at arrays
 * without a primitive: the trace's inputs and evaluated constants. */
void check_trace(const std::vector<mc::array> &outputs, bool shapeless) {
  size_t left = stack_left();
  size_t max_depth = left ? left / 2 / COMPILE_BYTES_PER_LEVEL : 8192;
  std::unordered_map<std::uintptr_t, size_t> depth; /* by array id: longest path below it */
  std::vector<std::pair<mc::array, bool>> stack;    /* (array, its inputs already pushed) */
  for (const auto &o : outputs) stack.emplace_back(o, false);
  while (!stack.empty()) {
    auto [a, expanded] = stack.back();
    stack.pop_back();
    if (depth.count(a.id())) continue;
    if (!a.has_primitive()) {
      depth[a.id()] = 0;
      continue;
    }
    if (!expanded) {
      if (shapeless && shapeless_mis_runs(a))
        throw ShapelessHazard(std::string("a ") + a.primitive().name() +
                              " over only size-1 axes, which MLX's shapeless compile mis-runs");
      stack.emplace_back(a, true);
      for (const auto &in : a.inputs())
        if (!depth.count(in.id())) stack.emplace_back(in, false);
      continue;
    }
    size_t d = 0;
    for (const auto &in : a.inputs()) d = std::max(d, depth[in.id()]);
    if (d + 1 > max_depth)
      throw std::runtime_error("the graph is " + std::to_string(d + 1) +
                               " operations deep, more than MLX's compile can walk on this "
                               "thread's stack");
    depth[a.id()] = d + 1;
  }
}

/* A shapeless function replayed on larger inputs builds its intermediates inside MLX, where
 * keep() never sees them; so on a call whose input shapes differ from the last checked one, every
 * array the replay made (those not yet evaluated) is checked as keep() checks. */
void check_replay_sizes(const std::vector<mc::array> &outputs) {
  std::unordered_map<std::uintptr_t, bool> seen;
  std::vector<mc::array> stack(outputs);
  while (!stack.empty()) {
    mc::array a = stack.back();
    stack.pop_back();
    if (a.is_available() || !seen.emplace(a.id(), true).second) continue;
    check_size(a);
    for (const auto &in : a.inputs()) stack.push_back(in);
  }
}

}  // namespace

extern "C" {

int mx_compiled_new(mx_ctx *ctx, mx_compiled **out, mx_graph_fn fn, void *user, size_t n_outputs,
                    bool shapeless) {
  *out = nullptr;
  mx_array *none = nullptr;
  mx_device device = ctx->device;
  MX_GUARD(ctx, none, {
    auto traced = [fn, user, n_outputs, device, shapeless](const std::vector<mc::array> &inputs) {
      /* The trace runs the C graph function on placeholder arrays in a private arena. */
      mx_arena arena;
      mx_ctx inner{&arena, device, {0}};
      std::vector<mx_array> in;
      for (const auto &x : inputs) {
        mx_array h;
        keep(&inner, &h, x);
        in.push_back(h);
      }
      std::vector<mx_array> outs(n_outputs, nullptr);
      if (fn(user, &inner, in.data(), in.size(), outs.data(), outs.size()) != MX_OK)
        throw std::runtime_error(inner.error);
      std::vector<mc::array> result;
      for (auto h : outs) result.push_back(A(h));
      check_trace(result, shapeless);
      return result;
    };
    auto *c = new mx_compiled{mc::compile(traced, shapeless), {}};
    *out = c;
    return MX_OK;
  });
}

void mx_compiled_free(mx_compiled *compiled) {
  try {
    delete compiled;
  } catch (...) {
  }
}

int mx_compiled_call(mx_ctx *ctx, mx_compiled *compiled, const mx_array *inputs, size_t n_inputs,
                     mx_array *outputs, size_t n_outputs) {
  mx_array *none = nullptr;
  for (size_t i = 0; i < n_outputs; i++) outputs[i] = nullptr;
  MX_GUARD(ctx, none, {
    std::vector<mc::array> in;
    for (size_t i = 0; i < n_inputs; i++) in.push_back(A(inputs[i]));
    /* MLX keys its compile cache on the calling thread's default stream, which MLX creates on
     * first use. Measured: when the first call to a compiled function is what creates it, the
     * second call misses that first entry and traces again (a 2-node graph: traces 2 after 3
     * runs; with the stream made first, traces 1). So the stream is made before the call. */
    (void)mc::default_stream(mc::default_device());
    std::vector<mc::array> res;
    try {
      res = compiled->fn(in);
    } catch (const ShapelessHazard &e) {
      set_error_text(ctx, __func__, e.what());
      return MX_ERR_SHAPELESS;
    }
    if (res.size() != n_outputs) throw std::runtime_error("compiled function output count");
    std::vector<mc::Shape> shapes;
    for (const auto &x : in) shapes.push_back(x.shape());
    if (shapes != compiled->checked) {
      check_replay_sizes(res);
      compiled->checked = std::move(shapes);
    }
    for (size_t i = 0; i < n_outputs; i++) keep(ctx, &outputs[i], std::move(res[i]));
    return MX_OK;
  });
}

}  // extern "C"

/* --- custom GPU kernels (CUDA) ----------------------------------------------------------- */
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
