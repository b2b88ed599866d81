/*
 * The fusion table: multi-node spellings one kernel replaces (layer normalisation in nine
 * nodes, Gelu in five, Swish, attention in nodes, a Softmax's scale and mask, a residual sum
 * before LayerNormalization, a bias added to a product, elementwise chains with constants).
 * Each row names its anchor op types (the spelling's last node, which computes the result),
 * a matcher that reads only the graph snapshot and the plan's constants (ops/fusion_match.h),
 * a build that translates the anchor from the spelling's inputs, the devices it serves, the
 * compile class the anchor needs when matched, and a note (docs/OPERATORS.md prints the table).
 *
 * The plan runs the table once, at build (op_fusions_find, after constant folding), over a
 * graph or a control-flow body, and keeps each anchor's matches. Translating an anchor then
 * tries its matches' builds in table order; a build that declines on live dtypes or shapes
 * leaves the node to its registry row's translator. The covered inner nodes are still
 * translated by their own rows (their values may be read elsewhere, and MLX never evaluates
 * what no output needs); a build notes the path of those whose own note would mislead.
 */
#ifndef OPS_FUSIONS_H
#define OPS_FUSIONS_H

#include "ir/ir.h"
#include "mlx/mx.h"
#include "ops/registry.h"

struct tr_ctx;
struct fz_graph;
struct op_fusion_match; /* ops/fusion_match.h */

enum { OP_FUSION_CPU = 1u << 0, OP_FUSION_GPU = 1u << 1 };

typedef struct op_fusion {
  const char *name;             /* a short id, as the path notes' kernel ids */
  const char *const *anchors;   /* ONNX-domain op types, NULL-terminated */
  bool (*match)(const struct fz_graph *f, const ir_node *anchor, struct op_fusion_match *m);
  /* Translates the anchor from the match, or leaves *done false (nothing built) when a live
   * dtype or shape rules it out, after which the anchor's own translator runs. */
  int (*build)(struct tr_ctx *t, const ir_node *anchor, const struct op_fusion_match *m,
               bool *done);
  unsigned devices;             /* OP_FUSION_* */
  op_compile_class anchor_class; /* the least the anchor needs when matched */
  const char *note;
} op_fusion;

/* The matches of one graph, per anchor node (fusions.c). */
typedef struct op_fusions op_fusions;

/* Runs the table over g's nodes for device (skipping the nodes in skip, when given: folded
 * ones), reading constants from consts through ctx; from_shapes (per value, or NULL): the values
 * computed from input shapes and constants alone. *out: NULL when nothing matched. MX_OK or
 * MX_ERR_NOMEM. */
int op_fusions_find(const ir_graph *g, const mx_array *consts, const bool *from_shapes,
                    mx_ctx *ctx, mx_device device, const bool *skip, op_fusions **out);
void op_fusions_free(op_fusions *f);
/* The least compile class node `index` needs for the fusions anchored there (OP_SHAPELESS when
 * none). */
op_compile_class op_fusions_anchor_class(const op_fusions *f, int index);

/* Translates node `index` of t->g: its matches' builds in turn, then the row's translator. */
int op_fusions_translate(struct tr_ctx *t, const op_fusions *f, int index, const op_row *row);

/* Calls fn for every row of the table (tools/registry_dump.c). */
void op_fusions_visit(void (*fn)(void *user, const op_fusion *row), void *user);

#endif
