/*
 * The bridge's private C++ header, included by the bridge's .cpp files in src/mlx only (nothing
 * outside src/mlx may include it: MLX types appear nowhere else). It owns what those files share:
 * the handle and arena types behind mx.h's opaque pointers, the conversions between the bridge's
 * enums and MLX's, keep() (which puts a new array into the context's arena after the size
 * check), the error guard MX_GUARD that every entry point runs its body in, and the declarations
 * of the helpers each file offers the others (layout rules, MLX graph nodes recognised by name).
 * Everything here is in namespace mxb and hidden from the library's exports by
 * -fvisibility=hidden.
 */
#ifndef MX_INTERNAL_HPP
#define MX_INTERNAL_HPP

#include "mx.h"

#include <mlx/mlx.h>

#include <atomic>
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <vector>

namespace mc = mlx::core;

namespace mxb {
/* Live handles and arenas, process-wide (mx_live_objects): a session that ends must give back
 * every one it made. Defined in core.cpp. */
extern std::atomic<size_t> live_arrays, live_arenas;
}  // namespace mxb

/* A handle. Its array is fixed when the handle is made: no entry point replaces what a caller's
 * handle holds (the layout rules build new values and keep their own records in the arena). */
struct mx_array_impl {
  const mc::array a;
  int fused_depth = 0; /* elementwise operations stacked on the nearest non-elementwise values */
  /* mx_host_data's row-major copy of `a`, when `a` is a strided view: the pointer it returns
   * must stay valid while the handle lives (mx.h). The same values as `a`. */
  std::optional<mc::array> host_copy;
  /* The bytes a resident constant was made from (mx_from_data with ctx->resident), row-major:
   * host reads come from here, so the host never touches the device's copy. */
  std::shared_ptr<const std::vector<char>> host_bytes;
  explicit mx_array_impl(mc::array x) : a(std::move(x)) { mxb::live_arrays++; }
  ~mx_array_impl() { mxb::live_arrays--; }
  mx_array_impl(const mx_array_impl &) = delete;
  mx_array_impl &operator=(const mx_array_impl &) = delete;
};

struct mx_arena {
  std::vector<mx_array_impl *> arrays;
  /* The fusion barriers layout.cpp made over handles while building into this arena, so that
   * later operations reuse one (the handles themselves are left as they are). Per handle: the
   * array that was cut, held so that its id cannot be another array's, and the cut. */
  struct Cut {
    mc::array of, cut;
  };
  std::unordered_map<const mx_array_impl *, Cut> cuts;
  mx_arena() { mxb::live_arenas++; }
  ~mx_arena() {
    for (auto *p : arrays) delete p;
    mxb::live_arenas--;
  }
  mx_arena(const mx_arena &) = delete;
  mx_arena &operator=(const mx_arena &) = delete;
};

namespace mxb {

/* --- core.cpp: conversions, errors, arena ------------------------------------------------ */
void set_error_text(mx_ctx *ctx, const char *where, const char *what);
mc::Device device_of(const mx_ctx *ctx);
mc::Dtype to_mlx(mx_dtype t); /* throws std::invalid_argument on an unknown value */
mx_dtype from_mlx(mc::Dtype t);
mc::Shape to_shape(const int *shape, int ndim);
std::vector<int> to_vec(const int *v, int n);
/* Fault injection (mx_fail_call_arm): throws on the armed call. */
void fault_point();

/* An array too large to be allocated: MX_GUARD maps it to MX_ERR_NOMEM with its message. */
struct TooLarge : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/* Refuses (TooLarge) an array whose bytes exceed MLX's memory limit, before anything is
 * allocated; see core.cpp for why. */
void check_size(const mc::array &a);
/* Puts a new array into the context's arena and hands back its handle. */
int keep(mx_ctx *ctx, mx_array *out, mc::array a);
/* The array behind a handle; a missing handle is refused (std::invalid_argument). */
inline const mc::array &A(mx_array h) {
  if (!h) throw std::invalid_argument("missing array");
  return h->a;
}

/* --- host_io.cpp: bytes between the host and a GPU ------------------------------------- */
/* mx_from_data with ctx->resident (mx.h). */
int resident_from_data(mx_ctx *ctx, mx_array *out, const void *data, const mc::Shape &shape,
                       mc::Dtype dtype, size_t nbytes);
/* Copies evaluated, row-contiguous `x` into `dst` straight from device memory and says true;
 * false (nothing copied) where `x` is not in device memory or the build has no CUDA I/O. */
bool device_copy_to_host(const mc::array &x, void *dst, size_t bytes);

/* --- names.cpp: MLX graph nodes the bridge recognises ------------------------------------ */
/* The kinds of MLX primitive some rule here looks for; everything else is Other. */
enum class Node { Other, Transpose, Reshape, Unflatten, Matmul, Reduce, LastAxisReduce };
Node node_of(const mc::array &a); /* Other for an array without a primitive */
bool is_node(const mc::array &a, Node node); /* node_of(a) == node, comparing fewer names */
/* For a Transpose node: its permutation (identity included). */
std::vector<int> transpose_perm(const mc::array &a);
/* The permutation `a` is a transpose (a view) by, when it is one and not the identity; else
 * empty. */
std::vector<int> transpose_of(const mc::array &a);
/* For a Reduce node: how many axes it reduces. */
size_t reduce_axis_count(const mc::array &a);

/* --- layout.cpp: the layout rules, applied as the device's policy says ------------------- */
mx_layout_policy layout_policy(mx_device device);

/* The operands of one elementwise operation, rearranged as the context device's layout policy
 * says (layout.cpp explains each rule); wrap() builds the result's handle. The caller's handles
 * are read, never changed. */
class Elementwise {
 public:
  /* Missing handles are skipped where `optional` (Clip's bounds), refused otherwise. `layout`
   * allows the transpose to be sunk (operations that keep their operands' shape). */
  Elementwise(const mx_ctx *ctx, std::initializer_list<mx_array> handles, bool optional = false,
              bool layout = true);
  const mc::array &operator[](size_t i) const { return arrays.at(i); }
  int wrap(mx_ctx *ctx, mx_array *out, mc::array result) const;

 private:
  mx_layout_policy policy;
  std::vector<mc::array> arrays; /* the operands, behind barriers where deep */
  std::vector<int> depths;
  std::vector<int> sunk; /* the transpose applied to the result; empty when none */
  void single_values_as_scalars(const mx_ctx *ctx);
  int depth_of(const mc::array &x, int hops = 0) const;
};

/* The permutation every operand that is not a single value is a transpose by, with the same
 * shape, when there is one and it is not the identity; else empty. With `broadcast`, operands
 * may instead broadcast against the largest such transpose. */
std::vector<int> shared_transpose(const std::vector<mc::array> &operands, bool broadcast);

/* A reduction of `x` over `axes`, run on the array beneath when `x` is a transposed view and the
 * policy says so; `reduce` builds the reduction itself. Empty when the rule does not apply. */
std::optional<mc::array> reduce_beneath_transpose(
    const mx_ctx *ctx, const mc::array &x, const std::vector<int> &axes, bool keepdims,
    const std::function<mc::array(const mc::array &, const std::vector<int> &)> &reduce);

}  // namespace mxb

/* Every entry point that takes a context runs its body inside MX_GUARD: `out` (when not NULL) is
 * cleared first, and the catch chain ends in `catch (...)`, so no C++ exception leaves the
 * bridge; the message lands in ctx->error prefixed with the entry point's name. */
#define MX_GUARD(ctx, out, ...)                                           \
  do {                                                                    \
    if (out) *(out) = nullptr;                                            \
    try {                                                                 \
      mxb::fault_point();                                                 \
      __VA_ARGS__;                                                        \
    } catch (const std::bad_alloc &) {                                    \
      mxb::set_error_text(ctx, __func__, "out of memory");                \
      return MX_ERR_NOMEM;                                                \
    } catch (const mxb::TooLarge &e) {                                    \
      mxb::set_error_text(ctx, __func__, e.what());                       \
      return MX_ERR_NOMEM;                                                \
    } catch (const std::invalid_argument &e) {                            \
      mxb::set_error_text(ctx, __func__, e.what());                       \
      return MX_ERR_ARG;                                                  \
    } catch (const std::exception &e) {                                   \
      mxb::set_error_text(ctx, __func__, e.what());                       \
      return MX_ERR_MLX;                                                  \
    } catch (...) {                                                       \
      mxb::set_error_text(ctx, __func__, "unknown C++ exception");        \
      return MX_ERR_MLX;                                                  \
    }                                                                     \
  } while (0)

#define MX_RESULT(...) MX_GUARD(ctx, out, return mxb::keep(ctx, out, (__VA_ARGS__)))

/* The guard of an entry point without a context (a query, a free): a failure gives `fallback`. */
#define MX_GUARD_OR(fallback, ...) \
  do {                             \
    try {                          \
      __VA_ARGS__;                 \
    } catch (...) {                \
      return fallback;             \
    }                              \
  } while (0)

#endif
