/*
 * Sequence and optional operators: SequenceConstruct, SequenceEmpty, SequenceAt, SequenceLength,
 * SequenceInsert, SequenceErase, SplitToSequence, ConcatFromSequence, Optional,
 * OptionalHasElement and OptionalGetElement. A sequence is a list of MLX arrays held in the
 * translation's side table (translate.h, tr_seq_in / tr_seq_out), never an array of its own; an
 * optional tensor is a list of 0 (none) or 1 item. The lists are structure fixed while a
 * translation runs, so these nodes trace like any other; only a position (or split) input that is
 * not a constant is read on the host, which makes the group eager. Such values never cross the
 * group's boundary: ep/containers.c declines a claimed node whose sequence would. Positions out
 * of range fail the run with a message naming the node.
 */
#include "ops/families.h"
#include "plan/translate.h"

#include <stdlib.h>

enum { SEQ_ABSENT_OK = 1 }; /* row code: OptionalHasElement 18 takes an absent input */

#define SEQ_TYPES (OP_ALL | OP_F64 | OP_SEQ)

/* Position inputs: absent or constant ones cost nothing, computed ones are read on the host
 * every run (eager). SequenceAt and SequenceErase take it as input 1, SequenceInsert as 2. */
static op_compile_class class_position_at(const ir_graph *g, const ir_node *n, int i) {
  return !ir_has_input(n, i) || op_input_is_const(g, n, i) ? OP_SHAPELESS : OP_EAGER;
}
static op_compile_class class_position1(const ir_graph *g, const ir_node *n) {
  return class_position_at(g, n, 1);
}
static op_compile_class class_position2(const ir_graph *g, const ir_node *n) {
  return class_position_at(g, n, 2);
}

/* Reads the scalar position input i against a sequence of `count` items (negative counts from
 * the back); `end_ok`: count itself is valid (insertion at the end). */
static int seq_position(tr_ctx *t, int i, int count, bool end_ok, int *out) {
  int64_t pos[2];
  size_t got = 0;
  int rc = tr_host_ints(t, i, pos, 2, &got);
  if (rc != MX_OK) return rc;
  if (got != 1) return tr_fail(t, "the position must hold one value, not %zu", got);
  int64_t p = pos[0] < 0 ? pos[0] + count : pos[0];
  if (p < 0 || p > count || (p == count && !end_ok))
    return tr_fail(t, "position %lld is out of range for a sequence of %d tensors (valid: "
                   "%d..%d)", (long long)pos[0], count, -count, end_ok ? count : count - 1);
  *out = (int)p;
  return MX_OK;
}

/* --- SequenceConstruct, SequenceEmpty, SequenceLength, SequenceAt ------------------------ */
static bool claim_construct(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  if (n->n_inputs < 1) return op_decline(why, "SequenceConstruct needs at least one input");
  return op_all_same_type(g, n, why);
}

static int translate_construct(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array *list = malloc(sizeof(mx_array) * ((size_t)n->n_inputs + 1));
  if (!list) return tr_fail(t, "out of memory");
  for (int i = 0; i < n->n_inputs; i++) list[i] = tr_in(t, i);
  int rc = tr_seq_out(t, 0, list, n->n_inputs);
  free(list);
  return rc;
}

static bool claim_empty(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)g, (void)r;
  int elem = ir_elem_from_onnx((int)ir_attr_int(n, "dtype", 1 /* float */));
  if (ir_to_mx_dtype(elem) < 0)
    return op_decline(why, "dtype %s is not an MLX dtype", ir_elem_name(elem));
  return true;
}

static int translate_empty(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  return tr_seq_out(t, 0, NULL, 0);
}

static int translate_length(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  const mx_array *items;
  int count;
  mx_array y;
  TR_TRY(tr_seq_in(t, 0, &items, &count));
  TR_TRY(mx_scalar_int(t->mx, &y, count, MX_INT64));
  return tr_out(t, 0, y);
}

static int translate_at(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  const mx_array *items;
  int count, at;
  TR_TRY(tr_seq_in(t, 0, &items, &count));
  TR_TRY(seq_position(t, 1, count, false, &at));
  return tr_out(t, 0, items[at]);
}

/* --- SequenceInsert, SequenceErase --------------------------------------------------------- */
static int translate_insert(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  const mx_array *items;
  int count, at;
  TR_TRY(tr_seq_in(t, 0, &items, &count));
  if (ir_has_input(t->node, 2)) TR_TRY(seq_position(t, 2, count, true, &at));
  else at = count;
  mx_array *list = malloc(sizeof(mx_array) * ((size_t)count + 1));
  if (!list) return tr_fail(t, "out of memory");
  for (int k = 0, j = 0; k <= count; k++) list[k] = k == at ? tr_in(t, 1) : items[j++];
  int rc = tr_seq_out(t, 0, list, count + 1);
  free(list);
  return rc;
}

static int translate_erase(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  const mx_array *items;
  int count, at;
  TR_TRY(tr_seq_in(t, 0, &items, &count));
  if (ir_has_input(t->node, 1)) TR_TRY(seq_position(t, 1, count, false, &at));
  else if (count == 0) return tr_fail(t, "cannot erase from an empty sequence");
  else at = count - 1;
  mx_array *list = malloc(sizeof(mx_array) * ((size_t)count + 1));
  if (!list) return tr_fail(t, "out of memory");
  for (int k = 0, j = 0; k < count; k++)
    if (k != at) list[j++] = items[k];
  int rc = tr_seq_out(t, 0, list, count - 1);
  free(list);
  return rc;
}

/* --- SplitToSequence ----------------------------------------------------------------------- */
static op_compile_class class_split(const ir_graph *g, const ir_node *n) {
  return !ir_has_input(n, 1) || op_input_is_const(g, n, 1) ? OP_SHAPE_KEYED : OP_EAGER;
}

static bool claim_split(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *x = ir_input(g, n, 0), *s = ir_input(g, n, 1);
  if (x && x->rank == 0) return op_decline(why, "a scalar input cannot be split");
  if (s && s->rank > 1) return op_decline(why, "split must be a scalar or 1-D (rank %d)", s->rank);
  return true;
}

/* The piece lengths along an axis of length dim: the split input (scalar: chunks of that size,
 * the last one smaller; 1-D: the lengths, summing to dim) or size-1 pieces. */
static int split_lengths(tr_ctx *t, int dim, int64_t **out, int *count) {
  mx_array s = tr_in(t, 1);
  size_t n = s ? mx_size(s) : 0, got = 0;
  int64_t *vals = malloc(sizeof(int64_t) * ((n > (size_t)dim ? n : (size_t)dim) + 1));
  if (!vals) return tr_fail(t, "out of memory");
  int rc = s ? tr_host_ints(t, 1, vals, n, &got) : MX_OK;
  if (rc == MX_OK && s && mx_ndim(s) == 0) { /* chunks of one size */
    int64_t size = vals[0];
    if (size <= 0) rc = tr_fail(t, "split is %lld; it must be positive", (long long)size);
    got = 0;
    for (int64_t at = 0; rc == MX_OK && at < dim; at += size)
      vals[got++] = at + size <= dim ? size : dim - at;
  } else if (rc == MX_OK && s) {
    int64_t sum = 0;
    for (size_t k = 0; rc == MX_OK && k < got; k++) {
      if (vals[k] < 0)
        rc = tr_fail(t, "split[%zu] is %lld; lengths must be >= 0", k, (long long)vals[k]);
      sum += vals[k];
    }
    if (rc == MX_OK && sum != dim)
      rc = tr_fail(t, "split lengths sum to %lld, the axis has %d", (long long)sum, dim);
  } else if (rc == MX_OK) {
    for (got = 0; got < (size_t)dim; got++) vals[got] = 1;
  }
  if (rc != MX_OK) {
    free(vals);
    return rc;
  }
  *out = vals;
  *count = (int)got;
  return MX_OK;
}

static int translate_split(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0);
  int rank = mx_ndim(x), axis, count = 0;
  TR_TRY(tr_axis(t, ir_attr_int(n, "axis", 0), rank, &axis));
  bool squeeze = !ir_has_input(n, 1) && ir_attr_int(n, "keepdims", 1) == 0;
  int64_t *lengths = NULL;
  TR_TRY(split_lengths(t, mx_dim(x, axis), &lengths, &count));
  mx_array *list = malloc(sizeof(mx_array) * ((size_t)count + 1));
  int rc = list ? MX_OK : tr_fail(t, "out of memory");
  int at = 0;
  for (int k = 0; rc == MX_OK && k < count; at += (int)lengths[k++]) {
    rc = tr_slice_axis(t, x, axis, at, at + (int)lengths[k], &list[k]);
    if (rc == MX_OK && squeeze) rc = mx_squeeze(t->mx, &list[k], list[k], &axis, 1);
  }
  if (rc == MX_OK) rc = tr_seq_out(t, 0, list, count);
  free(list);
  free(lengths);
  return rc;
}

/* --- ConcatFromSequence -------------------------------------------------------------------- */
static int translate_concat(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  const mx_array *items;
  int count, axis;
  TR_TRY(tr_seq_in(t, 0, &items, &count));
  if (count == 0) return tr_fail(t, "cannot concatenate an empty sequence");
  bool new_axis = ir_attr_int(n, "new_axis", 0) != 0;
  int rank = mx_ndim(items[0]);
  TR_TRY(tr_axis(t, ir_attr_int(n, "axis", 0), new_axis ? rank + 1 : rank, &axis));
  if (!new_axis && rank == 0) return tr_fail(t, "scalars can only be stacked (new_axis=1)");
  mx_array *list = malloc(sizeof(mx_array) * ((size_t)count + 1));
  if (!list) return tr_fail(t, "out of memory");
  int rc = MX_OK;
  for (int k = 0; rc == MX_OK && k < count; k++) {
    list[k] = items[k];
    if (mx_ndim(items[k]) != rank)
      rc = tr_fail(t, "item %d has rank %d, item 0 rank %d", k, mx_ndim(items[k]), rank);
    else if (new_axis) rc = mx_expand_dims(t->mx, &list[k], items[k], &axis, 1);
  }
  mx_array y = NULL;
  if (rc == MX_OK) rc = mx_concatenate(t->mx, &y, list, (size_t)count, axis);
  free(list);
  return rc == MX_OK ? tr_out(t, 0, y) : rc;
}

/* --- Optional, OptionalHasElement, OptionalGetElement ------------------------------------- */
static bool claim_optional(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *x = ir_input(g, n, 0), *y = ir_output(g, n, 0);
  if (x && !x->is_tensor)
    return op_decline(why, "an optional of a sequence is not held in MLX groups");
  if (y && y->kind != IR_KIND_OPTIONAL_TENSOR)
    return op_decline(why, "only optional tensors are held in MLX groups");
  return true;
}

static int translate_optional(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  mx_array x = tr_in(t, 0);
  return tr_seq_out(t, 0, &x, x ? 1 : 0);
}

static bool claim_has_element(const ir_graph *g, const ir_node *n, const op_row *r,
                              op_why why) {
  const ir_value *x = ir_input(g, n, 0);
  if (!x && r->code != SEQ_ABSENT_OK)
    return op_decline(why, "OptionalHasElement before opset 18 needs its input");
  return true;
}

/* The input's kind: a plain tensor or sequence holds an element, an absent input does not. */
static int translate_has_element(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  const ir_value *x = ir_input(t->g, n, 0);
  bool has = x != NULL;
  if (x && x->kind == IR_KIND_OPTIONAL_TENSOR) {
    const mx_array *items;
    int count;
    TR_TRY(tr_seq_in(t, 0, &items, &count));
    has = count > 0;
  }
  mx_array y;
  TR_TRY(mx_scalar(t->mx, &y, has ? 1 : 0, MX_BOOL));
  return tr_out(t, 0, y);
}

static int translate_get_element(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  const ir_value *x = ir_input(t->g, n, 0);
  const mx_array *items;
  int count;
  if (!x) return tr_fail(t, "the input is missing");
  if (x->kind == IR_KIND_TENSOR) return tr_out(t, 0, tr_in(t, 0));
  TR_TRY(tr_seq_in(t, 0, &items, &count));
  if (x->kind == IR_KIND_SEQUENCE) return tr_seq_out(t, 0, items, count);
  if (count == 0) return tr_fail(t, "the optional input is empty (it holds no tensor)");
  return tr_out(t, 0, items[0]);
}

#define POSITION_NOTE(what)                                                                  \
  what "; negative counts from the back; out of range fails the run naming the node; a "    \
       "constant or absent position compiles shapeless, a computed one is read on the host "  \
       "(eager)"
#define INSIDE_NOTE                                                                          \
  "sequences live only inside one MLX group (never a group input or output); lists are "    \
  "trace-time structure (shapeless)"

const op_row ops_sequence_rows[] = {
    {"", "SequenceConstruct", 11, 25, claim_construct, translate_construct, OP_SHAPELESS,
     SEQ_TYPES, 0, INSIDE_NOTE},
    {"", "SequenceEmpty", 11, 25, claim_empty, translate_empty, OP_SHAPELESS, SEQ_TYPES, 0,
     INSIDE_NOTE "; dtype must be an MLX dtype"},
    {"", "SequenceLength", 11, 25, NULL, translate_length, OP_SHAPELESS, SEQ_TYPES, 0,
     "the item count is trace-time structure"},
    {"", "SequenceAt", 11, 25, NULL, translate_at, OP_EAGER, SEQ_TYPES, 0,
     POSITION_NOTE("position in [-n, n-1]"), class_position1},
    {"", "SequenceInsert", 11, 25, NULL, translate_insert, OP_EAGER, SEQ_TYPES, 0,
     POSITION_NOTE("position in [-n, n], default the end"), class_position2},
    {"", "SequenceErase", 11, 25, NULL, translate_erase, OP_EAGER, SEQ_TYPES, 0,
     POSITION_NOTE("position in [-n, n-1], default the last"), class_position1},
    {"", "SplitToSequence", 11, 25, claim_split, translate_split, OP_EAGER, SEQ_TYPES, 0,
     "shape-keyed (the piece count follows the axis length); split scalar (equal chunks, the "
     "last smaller) or 1-D; keepdims=0 only without split; a computed split is read on the host "
     "(eager)", class_split},
    {"", "ConcatFromSequence", 11, 25, NULL, translate_concat, OP_SHAPELESS, SEQ_TYPES, 0,
     "new_axis=1 stacks; an empty sequence fails the run"},
    {"", "Optional", 15, 25, claim_optional, translate_optional, OP_SHAPELESS, SEQ_TYPES, 0,
     "optional tensors only (an optional sequence is declined); " INSIDE_NOTE},
    {"", "OptionalHasElement", 15, 17, claim_has_element, translate_has_element, OP_SHAPELESS,
     SEQ_TYPES, 0, "optional tensor input"},
    {"", "OptionalHasElement", 18, 25, claim_has_element, translate_has_element, OP_SHAPELESS,
     SEQ_TYPES, SEQ_ABSENT_OK,
     "a plain tensor or sequence input is true, an absent input false"},
    {"", "OptionalGetElement", 15, 17, NULL, translate_get_element, OP_SHAPELESS, SEQ_TYPES, 0,
     "an empty optional fails the run naming the node"},
    {"", "OptionalGetElement", 18, 25, NULL, translate_get_element, OP_SHAPELESS, SEQ_TYPES, 0,
     "a plain tensor or sequence input passes through; an empty optional fails the run naming "
     "the node"},
    OP_ROWS_END,
};
