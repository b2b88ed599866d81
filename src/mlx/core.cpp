/*
 * The bridge's core: the conversions between the bridge's enums and MLX's, fault injection, the
 * size check and keep() that every new array passes through into its context's arena, and the
 * entry points about arenas, devices, the MLX library (its folder, its kernel cache folders) and
 * dtypes. Each entry point here either
 * runs inside a guard (mx_internal.hpp) or only reads plain data, which cannot throw. No ONNX
 * knowledge lives in the bridge.
 */
#include "mlx/mx_internal.hpp"

#include <mlx/memory.h>
#include <mlx/version.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

namespace mxb {

std::atomic<size_t> live_arrays{0}, live_arenas{0};

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
static std::atomic<long> calls_before_failure{0};

void fault_point() {
  if (calls_before_failure.load(std::memory_order_relaxed) <= 0) return;
  if (calls_before_failure.fetch_sub(1) == 1) throw std::runtime_error("injected failure");
}

/* The largest array the bridge lets MLX build: MLX's memory limit (by default a share of the
 * machine's memory on the CPU device, of the GPU's on the GPU), read once. */
static size_t array_byte_limit() {
  static const size_t limit = [] {
    size_t l = mc::get_memory_limit();
    return l ? l : SIZE_MAX;
  }();
  return limit;
}

/* MLX's CPU allocator returns a null buffer when malloc fails and its kernels then write
 * through it (SIGSEGV: a broadcast Add of [2^17, 1] and [1, 2^17], 64 GiB, though every
 * dimension fits int32), so the size is checked when the lazy array is made, before anything is
 * allocated. */
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

}  // namespace mxb

using namespace mxb;

extern "C" {

/* --- arenas, devices, errors ------------------------------------------------------------- */
/* Arenas: nothrow new; a vector's default constructor and the destructors do not throw. */
mx_arena *mx_arena_new(void) { return new (std::nothrow) mx_arena(); }
void mx_arena_free(mx_arena *arena) { delete arena; }
size_t mx_arena_count(const mx_arena *arena) { return arena ? arena->arrays.size() : 0; }

void mx_live_objects(size_t *arrays, size_t *arenas) {
  *arrays = live_arrays.load();
  *arenas = live_arenas.load();
}

void mx_fail_call_arm(long n) { calls_before_failure.store(n > 0 ? n : 0); }

bool mx_device_available(mx_device device) {
  MX_GUARD_OR(false, return mc::is_available(device == MX_DEVICE_GPU
                                                  ? mc::Device(mc::Device::gpu)
                                                  : mc::Device(mc::Device::cpu)));
}

const char *mx_version(void) {
  static std::string v;
  MX_GUARD_OR("unknown", {
    if (v.empty()) v = mc::version();
    return v.c_str();
  });
}

size_t mx_cache_limit_at_least(size_t bytes) {
  MX_GUARD_OR(0, {
    size_t previous = mc::set_cache_limit(bytes);
    if (previous > bytes) mc::set_cache_limit(previous);
    return std::max(previous, bytes);
  });
}

const char *mx_library_dir(void) {
  static std::string dir;
  MX_GUARD_OR("", {
    Dl_info info;
    if (dir.empty() && dladdr(reinterpret_cast<void *>(&mc::version), &info) && info.dli_fname) {
      dir = info.dli_fname;
      dir.erase(dir.find_last_of('/') == std::string::npos ? 0 : dir.find_last_of('/'));
    }
    return dir.c_str();
  });
}

bool mx_kernel_cache_default_dir(mx_device device, char *buf, size_t cap) {
  /* as MLX builds it (backend/cuda/jit_module.cpp, backend/cpu/compiled.cpp); the temporary
   * folder is read from TMPDIR each call, as MLX's CPU compiler does */
  MX_GUARD_OR(false, {
    std::string dir = (std::filesystem::temp_directory_path() / "mlx" / mc::version() /
                       (device == MX_DEVICE_GPU ? "ptx" : "cpu"))
                          .string();
    if (dir.size() >= cap) return false;
    std::memcpy(buf, dir.c_str(), dir.size() + 1);
    return true;
  });
}

void mx_set_error(mx_ctx *ctx, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(ctx->error, sizeof ctx->error, fmt, ap);
  va_end(ap);
}

/* --- dtypes (plain data: nothing here throws) -------------------------------------------- */
const char *mx_dtype_name(mx_dtype t) {
  static const char *names[] = {"bool",    "uint8",   "uint16",  "uint32", "uint64",
                                "int8",    "int16",   "int32",   "int64",  "float16",
                                "float32", "float64", "bfloat16", "complex64"};
  return (unsigned)t < sizeof names / sizeof *names ? names[t] : "unknown";
}

size_t mx_dtype_size(mx_dtype t) { MX_GUARD_OR(0, return to_mlx(t).size()); }

bool mx_dtype_is_float(mx_dtype t) {
  return t == MX_FLOAT16 || t == MX_FLOAT32 || t == MX_FLOAT64 || t == MX_BFLOAT16;
}
bool mx_dtype_is_signed_int(mx_dtype t) { return t >= MX_INT8 && t <= MX_INT64; }
bool mx_dtype_is_unsigned_int(mx_dtype t) { return t >= MX_UINT8 && t <= MX_UINT64; }

}  // extern "C"
