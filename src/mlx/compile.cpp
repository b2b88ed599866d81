/*
 * Compiled functions: a C graph function traced and compiled by MLX's compile (mx_compiled_new,
 * mx_compiled_call), and the checks the bridge makes around it: a trace is refused before MLX
 * compiles it when its graph is deeper than MLX's recursive compile can walk on this thread's
 * stack, or when it is shapeless and holds a node MLX's shapeless compile mis-runs (the shapeless
 * rules); a shapeless replay on new shapes has its intermediates size-checked as keep() does.
 */
#include "mlx/mx_internal.hpp"

#include <mlx/compile.h>
#include <mlx/primitives.h> /* a refused node's name, for the message */

#include <pthread.h>

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>

using namespace mxb;

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
 * logsumexp and the fast norms reduce the last axis (names.cpp tells these nodes apart). Remove
 * when MLX's shapeless replay handles such reductions. */
bool shapeless_mis_runs(const mc::array &a) {
  if (!a.has_primitive() || a.inputs().empty()) return false;
  const mc::array &in = a.inputs()[0];
  if (in.ndim() < 2) return false; /* a reduction of a rank-1 array reduces every axis */
  switch (node_of(a)) {
    case Node::Reduce: return a.shape() == in.shape() && reduce_axis_count(a) < in.ndim();
    case Node::LastAxisReduce: return in.shape().back() == 1;
    default: return false;
  }
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
      mx_ctx inner{&arena, device, false, {0}};
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
