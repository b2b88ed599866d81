/*
 * How a Run's bytes and a plan's constants cross between host memory and a GPU: inputs read
 * straight into device memory when evaluated, constants read the same way at plan build (small
 * ones keeping their bytes for host reads), outputs copied from device memory straight into
 * ORT's buffer.
 *
 * MLX's CUDA backend keeps an array made from host memory (mc::array(data, ...)) in managed
 * memory: the host writes it, then the first kernel to read it faults every page across, and an
 * output read through array::data() is first moved into managed memory and then faulted back to
 * the host. Measured on an H200 with PP-OCRv4 det at batch 8 (39 MB in, 13 MB out): most of an
 * 80 ms Run went there, against 22 ms of kernels. Here an input is read by MLX's own loader
 * (mc::load) from a reader over ORT's buffer, when MLX evaluates it: on the GPU MLX puts it in a
 * device buffer with one asynchronous copy. An output of a CUDA build (MXB_CUDA_IO, set by the
 * Makefile when MLX's CUDA headers and CUDA's are there) is copied with cudaMemcpy from the
 * device buffer MLX holds, found through MLX's own allocator header; cudaMemcpy is looked up in
 * the CUDA runtime MLX has already loaded, so the plugin links nothing more. Elsewhere, and for
 * buffers MLX keeps in managed memory, the host reads through array::data() as before.
 */
#include "mlx/mx_internal.hpp"

#include <mlx/io.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#if defined(MXB_CUDA_IO)
#include <dlfcn.h>
#include <mlx/backend/cuda/allocator.h>
#endif

using namespace mxb;

namespace {

/* The one public way to have MLX read bytes into GPU memory itself is mc::load, which reads the
 * NumPy .npy format from an io::Reader: the header when called, the data when the array is
 * evaluated (MLX's Load primitive; its class is not exported, so it cannot be made directly).
 * This reader shows a host buffer as an .npy stream: a header written here, then the buffer,
 * which the caller keeps alive and unchanged until the array is evaluated (the plan evaluates
 * every array of a Run before its Compute returns). */
class HostBufferReader : public mc::io::Reader {
 public:
  /* `owner`, when given, keeps the bytes alive for as long as MLX keeps the reader */
  HostBufferReader(const void *data, size_t n, const mc::Shape &shape, const char *code,
                   std::shared_ptr<const std::vector<char>> owner = nullptr)
      : data_(static_cast<const char *>(data)), n_(n), owner_(std::move(owner)) {
    std::string dict = std::string("{'descr': '") + code + "', 'fortran_order': False, 'shape': (";
    for (size_t i = 0; i < shape.size(); i++)
      dict += (i ? ", " : "") + std::to_string(shape[i]);
    dict += "), }";
    /* NumPy pads the header with spaces and a newline to a multiple of 64 bytes */
    size_t total = (10 + dict.size() + 1 + 63) / 64 * 64;
    dict.append(total - 10 - dict.size() - 1, ' ');
    dict += '\n';
    uint16_t len = static_cast<uint16_t>(dict.size());
    head_ = std::string("\x93NUMPY\x01\x00", 8);
    head_.append(reinterpret_cast<const char *>(&len), 2); /* little-endian, as x86 and arm64 */
    head_ += dict;
  }
  bool is_open() const override { return true; }
  bool good() const override { return true; }
  size_t tell() override { return pos_; }
  void seek(int64_t off, std::ios_base::seekdir way) override {
    size_t base = way == std::ios_base::beg ? 0 : way == std::ios_base::cur ? pos_ : size();
    pos_ = base + static_cast<size_t>(off);
  }
  void read(char *out, size_t n) override {
    read(out, n, pos_);
    pos_ += n;
  }
  void read(char *out, size_t n, size_t offset) override {
    if (offset > size() || n > size() - offset) throw std::out_of_range("read past an input");
    while (n && offset < head_.size()) { /* the header (MLX reads it in small pieces) */
      size_t k = std::min(n, head_.size() - offset);
      std::memcpy(out, head_.data() + offset, k);
      out += k, offset += k, n -= k;
    }
    if (n) std::memcpy(out, data_ + (offset - head_.size()), n);
  }
  std::string label() const override { return "an ONNX Runtime input buffer"; }

 private:
  size_t size() const { return head_.size() + n_; }
  const char *data_;
  size_t n_;
  std::shared_ptr<const std::vector<char>> owner_;
  std::string head_;
  size_t pos_ = 0;
};

/* The .npy type code of an MLX type (NumPy's array-protocol strings, as mc::load parses them). */
const char *npy_code(mc::Dtype t) {
  switch (t) {
    case mc::bool_: return "|b1";
    case mc::int8: return "|i1";
    case mc::int16: return "<i2";
    case mc::int32: return "<i4";
    case mc::int64: return "<i8";
    case mc::uint8: return "|u1";
    case mc::uint16: return "<u2";
    case mc::uint32: return "<u4";
    case mc::uint64: return "<u8";
    case mc::float16: return "<f2";
    case mc::bfloat16: return "<V2";
    case mc::float32: return "<f4";
    default: return nullptr;
  }
}

}  // namespace

namespace mxb {

#if defined(MXB_CUDA_IO)
using cuda_memcpy_fn = cudaError_t (*)(void *, const void *, size_t, cudaMemcpyKind);

static cuda_memcpy_fn cuda_memcpy() {
  static cuda_memcpy_fn fn = []() -> cuda_memcpy_fn {
    for (const char *name : {"libcudart.so.13", "libcudart.so.12", "libcudart.so"}) {
      void *lib = dlopen(name, RTLD_NOW | RTLD_NOLOAD); /* only the one MLX loaded */
      if (lib) return reinterpret_cast<cuda_memcpy_fn>(dlsym(lib, "cudaMemcpy"));
    }
    return nullptr;
  }();
  return fn;
}

bool device_copy_to_host(const mc::array &x, void *dst, size_t bytes) {
  cuda_memcpy_fn copy = cuda_memcpy();
  auto *buf = static_cast<mc::cu::CudaBuffer *>(const_cast<mc::array &>(x).buffer().ptr());
  if (!copy || !buf || buf->device < 0 || !buf->data) return false; /* managed: host reads it */
  const char *src = static_cast<const char *>(buf->data) + x.offset();
  cudaError_t rc = copy(dst, src, bytes, cudaMemcpyDefault);
  if (rc != cudaSuccess)
    throw std::runtime_error("copying a result from the GPU failed (CUDA error " +
                             std::to_string(static_cast<int>(rc)) + ")");
  return true;
}
#else
bool device_copy_to_host(const mc::array &, void *, size_t) { return false; }
#endif

/* Constants a GPU's kernels read are MLX's, in device memory: an array made from host memory
 * is kept in managed memory by MLX's CUDA backend, and each host read of it (a translator reading
 * a shape, an eager group translating every Run) moved its pages back to the host, for the next
 * kernel to fault them over again. So the constant is read by MLX's loader into its own memory
 * and evaluated now, and, when small, the bytes stay with the handle for host reads
 * (mx_host_data, mx_copy_to_host). Large ones (weights) are not kept twice: a host read of one
 * takes MLX's own path. */
constexpr size_t kHostBytesMax = size_t(64) << 10;

int resident_from_data(mx_ctx *ctx, mx_array *out, const void *data, const mc::Shape &shape,
                       mc::Dtype dtype, size_t nbytes) {
  const char *code = npy_code(dtype);
  auto bytes = std::make_shared<std::vector<char>>(static_cast<const char *>(data),
                                                   static_cast<const char *>(data) + nbytes);
  mc::array a = [&] {
    if (code) {
      auto reader = std::make_shared<HostBufferReader>(bytes->data(), nbytes, shape, code, bytes);
      return mc::load(reader, device_of(ctx));
    }
    /* a type .npy cannot name: MLX's own copy, then into the device's memory by a copy */
    void *copy = std::malloc(nbytes);
    if (!copy) throw std::bad_alloc();
    std::memcpy(copy, data, nbytes);
    mc::array host(copy, shape, dtype, [](void *p) { std::free(p); });
    return mc::copy(host, device_of(ctx));
  }();
  a.eval();
  int rc = keep(ctx, out, a);
  if (rc == MX_OK && nbytes <= kHostBytesMax) (*out)->host_bytes = std::move(bytes);
  return rc;
}

}  // namespace mxb

extern "C" {

int mx_from_host(mx_ctx *ctx, mx_array *out, const void *data, const int *shape, int ndim,
                 mx_dtype dtype) {
  MX_GUARD(ctx, out, {
    mc::Device dev = device_of(ctx);
    mc::Shape s = to_shape(shape, ndim);
    mc::Dtype t = to_mlx(dtype);
    size_t nbytes = t.size();
    for (int d : s) nbytes *= static_cast<size_t>(d);
    const char *code = npy_code(t);
    if (nbytes == 0 || !code) { /* nothing to read, or a type .npy cannot name: a plain copy */
      void *copy = std::malloc(nbytes ? nbytes : 1);
      if (!copy) throw std::bad_alloc();
      if (nbytes) std::memcpy(copy, data, nbytes);
      return keep(ctx, out, mc::array(copy, s, t, [](void *p) { std::free(p); }));
    }
    auto reader = std::make_shared<HostBufferReader>(data, nbytes, s, code);
    mc::array a = mc::load(reader, dev);
    if (a.shape() != s || a.dtype() != t) throw std::logic_error("an input read back wrongly");
    return keep(ctx, out, std::move(a));
  });
}

}  // extern "C"
