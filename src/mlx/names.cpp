/*
 * MLX graph nodes the bridge recognises, and the only file that recognises them. Some rules look
 * at the operation that made an array (a transpose to sink or collapse, a matrix product to fold
 * a bias into, a reduction shapeless compile mis-runs). libmlx is built with hidden visibility
 * and exports no type information for its primitives, so dynamic_cast cannot tell them apart;
 * they are told by Primitive::name(), the string MLX's DEFINE_NAME gives each class ("Transpose",
 * "Reshape", "Unflatten", "Matmul", "Sum", ..., as of MLX 0.32), and their state is then read
 * through a static_cast to the class the name belongs to. A rename in MLX makes a rule stop
 * applying: the results stay right, the layout or the fold is lost.
 */
#include "mlx/mx_internal.hpp"

#include <mlx/primitives.h>

#include <cstring>

namespace mxb {

static const struct {
  const char *name;
  Node node;
} known[] = {
    {"Transpose", Node::Transpose}, {"Reshape", Node::Reshape},
    {"Unflatten", Node::Unflatten}, {"Matmul", Node::Matmul},
    /* the classes of mc::Reduce, one name per reduce type */
    {"And", Node::Reduce},          {"Or", Node::Reduce},
    {"Sum", Node::Reduce},          {"Prod", Node::Reduce},
    {"Min", Node::Reduce},          {"Max", Node::Reduce},
    /* reductions over the last axis with primitives of their own */
    {"Softmax", Node::LastAxisReduce},   {"LogSumExp", Node::LastAxisReduce},
    {"LayerNorm", Node::LastAxisReduce}, {"RMSNorm", Node::LastAxisReduce},
};

Node node_of(const mc::array &a) {
  if (!a.has_primitive()) return Node::Other;
  const char *name = a.primitive().name();
  for (const auto &k : known)
    if (std::strcmp(name, k.name) == 0) return k.node;
  return Node::Other;
}

bool is_node(const mc::array &a, Node node) {
  if (!a.has_primitive()) return false;
  const char *name = a.primitive().name();
  for (const auto &k : known)
    if (k.node == node && std::strcmp(name, k.name) == 0) return true;
  return false;
}

std::vector<int> transpose_perm(const mc::array &a) {
  return static_cast<const mc::Transpose &>(a.primitive()).state();
}

std::vector<int> transpose_of(const mc::array &a) {
  if (!is_node(a, Node::Transpose)) return {};
  auto perm = transpose_perm(a);
  for (size_t i = 0; i < perm.size(); i++)
    if (perm[i] != static_cast<int>(i)) return perm;
  return {};
}

size_t reduce_axis_count(const mc::array &a) {
  return static_cast<const mc::Reduce &>(a.primitive()).state().second.size();
}

}  // namespace mxb
