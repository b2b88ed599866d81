/*
 * The layout rules: rearrangements the bridge can make around MLX's operations so that MLX's
 * kernels meet memory in the order they run fast on, without changing any value. They are
 * mechanism only: each applies when the policy of the context's device turns it on, and the
 * device's room sets that policy once at set-up (mx_set_layout_policy; the numbers and why they
 * are what they are live there). A device with no policy set gets none of them, so the bridge's
 * entry points then build exactly the MLX operation they name. The rules read the caller's
 * handles and build new values; they never replace what a handle holds.
 */
#include "mlx/mx_internal.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace mxb {

/* Per device, process-wide; written at set-up by each session (the same values), read by every
 * elementwise operation: atomics, since set-up may run beside another session's Run. */
struct StoredPolicy {
  std::atomic<int> fuse_barrier_at{0};
  std::atomic<bool> sink_transposes{false}, single_values_as_scalars{false},
      reduce_beneath_transposes{false};
};
static StoredPolicy stored[2];
static StoredPolicy &stored_for(mx_device device) { return stored[device == MX_DEVICE_GPU]; }

mx_layout_policy layout_policy(mx_device device) {
  const StoredPolicy &s = stored_for(device);
  mx_layout_policy p;
  p.fuse_barrier_at = s.fuse_barrier_at.load(std::memory_order_relaxed);
  p.sink_transposes = s.sink_transposes.load(std::memory_order_relaxed);
  p.single_values_as_scalars = s.single_values_as_scalars.load(std::memory_order_relaxed);
  p.reduce_beneath_transposes = s.reduce_beneath_transposes.load(std::memory_order_relaxed);
  return p;
}

/* An evaluated array (a plan's constant, which concurrent runs share and which is never cut
 * here) stands on nothing. */
static int depth(mx_array h) { return A(h).has_primitive() ? h->fused_depth : 0; }

/* The barrier this context's arena made over h, when there is one. */
static const mc::array *cut_of(const mx_ctx *ctx, mx_array h) {
  auto it = ctx->arena->cuts.find(h);
  return it != ctx->arena->cuts.end() && it->second.of.id() == h->a.id() ? &it->second.cut
                                                                          : nullptr;
}

/* Fusion barriers (policy.fuse_barrier_at). MLX's compile fuses a chain of elementwise operations
 * at most 11 deep (max_compile_depth in mlx/compile.cpp) and cuts deeper chains where it falls.
 * Every elementwise result records how many elementwise operations stand on the nearest other
 * values, and when an operation's deepest operand has reached the barrier, each operand at least
 * half as deep goes through contiguous() first: MLX does not fuse across it, and it costs nothing
 * for an array that is contiguous (a fused kernel's output is), so the cut falls at a value the
 * policy chose rather than wherever MLX's depth limit puts it. Cutting every fairly deep operand,
 * not only the deepest, keeps a value shared by a long chain (a polynomial's variable) from
 * forcing a cut at every step. The context's arena records the cut made over a handle, and later
 * operations in it read the handle through its cut, at depth 0: they share one cut, and the
 * handle the caller holds is left as it is.
 *
 * Sunk transposes (policy.sink_transposes). An elementwise operation whose operands are the same
 * transpose of same-shaped arrays (single values aside) runs on the arrays beneath and transposes
 * its result instead: the same values, computed in memory order, and still a view for whatever
 * reads it next. So does one whose other operands broadcast against such a transpose, each taken
 * through the inverse permutation, a view. `layout` is false for operations that change the shape
 * (broadcast_to). */
Elementwise::Elementwise(const mx_ctx *ctx, std::initializer_list<mx_array> handles,
                         bool optional, bool layout)
    : policy(layout_policy(ctx->device)) {
  const int barrier = policy.fuse_barrier_at;
  /* each operand as this arena's operations see it (behind the barrier made over it, if any),
   * and its depth */
  std::vector<mx_array> hs;
  std::vector<mc::array> seen;
  std::vector<int> seen_depth;
  for (mx_array h : handles) {
    if (!h && optional) continue;
    A(h); /* refuses a missing handle */
    /* only a handle at least barrier / 2 deep can have been cut */
    const mc::array *cut = barrier > 0 && depth(h) >= barrier / 2 ? cut_of(ctx, h) : nullptr;
    hs.push_back(h);
    seen.push_back(cut ? *cut : h->a);
    seen_depth.push_back(cut ? 0 : depth(h));
  }
  if (policy.sink_transposes && layout) sunk = shared_transpose(seen, true);
  std::vector<int> inverse(sunk.size());
  for (size_t i = 0; i < sunk.size(); i++) inverse[sunk[i]] = static_cast<int>(i);
  int deepest = 0;
  for (int d : seen_depth) deepest = std::max(deepest, d);
  for (size_t i = 0; i < hs.size(); i++) {
    const mc::array &a = seen[i];
    bool transposed = !sunk.empty() && a.size() != 1;
    mc::array x = !transposed                ? a
                  : transpose_of(a) == sunk ? a.inputs().at(0)
                                            : mc::transpose(a, inverse, device_of(ctx));
    if (barrier > 0 && deepest >= barrier && seen_depth[i] >= barrier / 2) {
      x = mc::contiguous(x, false, device_of(ctx));
      mc::array cut = transposed ? mc::transpose(x, sunk, device_of(ctx)) : x;
      ctx->arena->cuts.insert_or_assign(hs[i], mx_arena::Cut{hs[i]->a, cut});
      /* the same handle later in this operation reads the cut, as later operations do */
      for (size_t j = i + 1; j < hs.size(); j++)
        if (hs[j] == hs[i]) seen[j] = cut, seen_depth[j] = 0;
      seen_depth[i] = 0;
    }
    arrays.push_back(std::move(x));
    depths.push_back(seen_depth[i]);
  }
  if (policy.single_values_as_scalars) single_values_as_scalars(ctx);
}

/* Single values as scalars (policy.single_values_as_scalars). MLX's fused CPU kernel counts an
 * operand of one element as a scalar only when it has no dimensions; a [1] constant (common in
 * exported models: Mul by a [1] weight) makes it take the strided loop for the whole kernel. Such
 * operands become rank 0 where that cannot change the result's rank (another operand has at least
 * as many dimensions). An evaluated one (a plan's constant) becomes a rank-0 array over its
 * memory, built afresh (no copy, no operation: eager runs evaluate nothing more for it, and the
 * handle the caller holds is left as it is); others are reshaped. */
void Elementwise::single_values_as_scalars(const mx_ctx *ctx) {
  size_t widest = 0;
  for (const auto &a : arrays)
    if (a.size() != 1) widest = std::max(widest, a.ndim());
  for (auto &a : arrays) {
    if (a.size() != 1 || a.ndim() == 0 || a.ndim() > widest) continue;
    if (!a.has_primitive() && a.is_available()) {
      mc::array value = a; /* the deleter holds it: its memory lives as long as the scalar */
      a = mc::array(const_cast<char *>(value.data<char>()), mc::Shape{}, value.dtype(),
                    [value](void *) {});
    } else {
      a = mc::reshape(a, {}, device_of(ctx));
    }
  }
}

/* Depth of a result built from these operands; MLX's own nodes in between (the broadcasts and
 * casts it inserts) count one each. */
int Elementwise::depth_of(const mc::array &x, int hops) const {
  for (size_t i = 0; i < arrays.size(); i++)
    if (x.id() == arrays[i].id()) return depths[i];
  if (!x.has_primitive()) return 0;
  if (hops == 4) return policy.fuse_barrier_at; /* not built as expected: barrier next time */
  int d = 0;
  for (const auto &in : x.inputs()) d = std::max(d, depth_of(in, hops + 1));
  return d + 1;
}

/* The result's depth counts the operation, not the transpose put back over it. */
int Elementwise::wrap(mx_ctx *ctx, mx_array *out, mc::array result) const {
  int depth = depth_of(result);
  if (!sunk.empty()) result = mc::transpose(result, sunk, device_of(ctx));
  keep(ctx, out, std::move(result));
  (*out)->fused_depth = depth;
  return MX_OK;
}

/* Single values must not have more dimensions than the transposed operands (they would add
 * leading axes). With `broadcast`, operands may have the rank of the largest transpose and
 * broadcast against its shape (those not transposed by the permutation are taken through its
 * inverse by the caller). */
std::vector<int> shared_transpose(const std::vector<mc::array> &operands, bool broadcast) {
  std::vector<int> perm;
  const mc::array *first = nullptr;
  for (const mc::array &a : operands) { /* the largest transposed operand fixes the permutation */
    std::vector<int> p = a.size() == 1 ? std::vector<int>() : transpose_of(a);
    if (!p.empty() && (!first || a.size() > first->size())) first = &a, perm = p;
  }
  if (!first) return {};
  for (const mc::array &a : operands) {
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

/* Reductions beneath transposes (policy.reduce_beneath_transposes): over a transposed view (a
 * convolution's channels-first result) a reduction runs on the array beneath, over the same axes
 * mapped through the permutation, keeping them; the result is transposed back (and, without
 * keepdims, the axes dropped). The same elements reduce, in memory order. */
std::optional<mc::array> reduce_beneath_transpose(
    const mx_ctx *ctx, const mc::array &x, const std::vector<int> &axes, bool keepdims,
    const std::function<mc::array(const mc::array &, const std::vector<int> &)> &reduce) {
  if (!layout_policy(ctx->device).reduce_beneath_transposes || axes.empty()) return std::nullopt;
  std::vector<int> perm = transpose_of(x);
  int rank = static_cast<int>(x.ndim());
  std::vector<int> beneath; /* the axes of the array beneath */
  for (size_t i = 0; i < axes.size() && !perm.empty(); i++) {
    int v = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (v < 0 || v >= rank) break; /* left for MLX to refuse */
    beneath.push_back(perm[v]);
  }
  if (beneath.empty() || beneath.size() != axes.size()) return std::nullopt;
  auto s = device_of(ctx);
  mc::array y = mc::transpose(reduce(x.inputs().at(0), beneath), perm, s);
  return keepdims ? y : mc::squeeze(y, axes, s);
}

}  // namespace mxb

extern "C" {

void mx_set_layout_policy(mx_device device, const mx_layout_policy *policy) {
  static const mx_layout_policy none = {0, false, false, false};
  const mx_layout_policy &p = policy ? *policy : none;
  mxb::StoredPolicy &s = mxb::stored_for(device);
  s.fuse_barrier_at.store(p.fuse_barrier_at > 0 ? p.fuse_barrier_at : 0);
  s.sink_transposes.store(p.sink_transposes);
  s.single_values_as_scalars.store(p.single_values_as_scalars);
  s.reduce_beneath_transposes.store(p.reduce_beneath_transposes);
}

}  // extern "C"
