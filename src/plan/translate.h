/*
 * The translation context a translator sees while it turns one node into MLX operations: the
 * node's input arrays, a place for its outputs, the bridge context, and host access to integer
 * inputs (constants are read from the plan; computed values are evaluated, which makes the group
 * eager for that read). Translators return MX_OK or an error code with a message in t->mx->error;
 * the plan runner adds the node's name and op before it becomes an ORT status.
 */
#ifndef TRANSLATE_H
#define TRANSLATE_H

#include "ir/ir.h"
#include "mlx/mx.h"
#include "plan/node_path.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A run-time check: a boolean scalar computed in the same MLX graph; when it evaluates false
 * the run fails with the message, naming the node. Lets translators validate live values (index
 * ranges) without a separate host round trip. */
typedef struct tr_check {
  mx_array ok;
  const ir_node *node;
  char message[160];
} tr_check;

typedef struct tr_checks {
  tr_check *items;
  int count, cap;
} tr_checks;

enum { TR_DERIVED_SLOTS = 3 };

/* Sequence and optional values of one translation (see docs/ARCHITECTURE.md, "Sequences"): they
 * live only inside a fused group, so they are never MLX arrays of their own but lists of arrays
 * kept here, per value index, for as long as one translation (an eager run, a trace, a keyed
 * variant's shape pass) lasts. An optional holds 0 (none) or 1 item. values[] stays NULL for
 * them. */
typedef struct tr_seq {
  mx_array *items; /* malloc'd; the arrays live in the translation's arena */
  int count;
  bool set; /* produced in this translation */
} tr_seq;

typedef struct tr_seqs {
  tr_seq *slots; /* per value index of g */
  int n_values;
} tr_seqs;

/* A table for g's values (false when out of memory); tr_seqs_free frees the lists. */
bool tr_seqs_init(tr_seqs *s, int n_values);
void tr_seqs_free(tr_seqs *s);
struct plan_body; /* a control-flow subgraph made ready at plan build (src/plan/body.c) */

/* What a translation is building. Some compositions pay only when MLX compile fuses them into
 * one kernel (keyed traces), and some primitives cannot be replayed shapeless (bit views). */
typedef enum tr_trace { TR_EAGER, TR_TRACE_KEYED, TR_TRACE_SHAPELESS } tr_trace;

typedef struct tr_ctx {
  mx_ctx *mx;
  const ir_graph *g;
  mx_array *values; /* per value index of g */
  const mx_array *const_values; /* the plan's constants (initializers and folded values) */
  const ir_node *node;
  unsigned host_reads; /* how many non-constant values were read on the host */
  tr_checks *checks;   /* where tr_check_that records run-time checks */
  tr_node_path *path_note; /* where tr_note_path records the node's kernel path */
  tr_node_path *paths;     /* per node of g: where tr_note_path_of records another node's */
  bool fast_kernels;      /* custom kernels allowed
                           * (off: ONNXRUNTIME_EP_MLX_NO_LINEAR_ATTENTION_SCAN) */
  mx_array *derived;      /* this node's TR_DERIVED_SLOTS values prepared at plan build */
  bool preparing;         /* inside a row's prepare hook (plan build, constants arena) */
  tr_trace trace;         /* what the translation builds: an eager graph, or the trace of a
                           * compiled function (keyed on shapes, or shapeless) */
  tr_seqs *seqs;          /* sequence/optional values (NULL where none may occur) */
  struct plan_body *const *bodies; /* per subgraph of a control-flow node; NULL otherwise */
  unsigned long body_nodes; /* body nodes translated so far under this node, nested bodies too
                             * (tr_run_body stops at TR_BODY_NODE_CAP) */
} tr_ctx;

/* The most body nodes one control-flow node may unroll in one translation, counted through
 * nested bodies: each loop's own cap bounds its iterations, but two nested loops of 4096 would
 * unroll 16.7M bodies (15.7 GB resident before failing). */
enum { TR_BODY_NODE_CAP = 1 << 18 };

mx_array tr_in(tr_ctx *t, int i); /* NULL for an absent optional input */
/* True when input i is known at Compile (an initializer or a folded value): reading it on the
 * host costs nothing and does not make the group eager. */
bool tr_input_is_constant(const tr_ctx *t, int i);
int tr_out(tr_ctx *t, int i, mx_array a);
/* Sets output i after casting `a` to the element type ONNX declares for it (MLX promotes where
 * ONNX does not). */
int tr_out_cast(tr_ctx *t, int i, mx_array a);
bool tr_has_out(tr_ctx *t, int i);
int tr_fail(tr_ctx *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Reads an integer (int32/int64) input's values on the host into vals (cap entries). */
int tr_host_ints(tr_ctx *t, int i, int64_t *vals, size_t cap, size_t *count);
/* A 1-D array of count int64 values (copied), in dtype. */
int tr_ints_array(tr_ctx *t, const int64_t *vals, int count, mx_dtype dtype, mx_array *out);
/* Reads a float/int scalar input on the host as a double. */
int tr_host_scalar(tr_ctx *t, int i, double *value);
/* The value of a one-element array, evaluated and read on the host, as a double. */
int tr_scalar_value(mx_ctx *ctx, mx_array a, double *value);
/* The dtype ONNX declares for output i (or input 0's dtype when unknown). */
mx_dtype tr_out_dtype(tr_ctx *t, int i);
/* Normalises a possibly negative axis against rank; fails with a message when out of range. */
int tr_axis(tr_ctx *t, int64_t axis, int rank, int *out);
/* Records that `ok` (a bool array; all elements must be true) must hold after evaluation. */
int tr_check_that(tr_ctx *t, mx_array ok, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Records which path a node with a fast kernel took (node_path.h): its kind, a short kernel id
 * and what the kernel folded in, for the run record; `note` says it in words for the verbose
 * summary. kernel and note must be string literals (or NULL kernel). */
void tr_note_path(tr_ctx *t, tr_path_kind kind, const char *kernel, unsigned folds,
                  const char *note);
/* The same for node `node` of t->g: a fusion's build notes a covered node whose own note would
 * mislead (an Erf inside a Gelu that the Gelu's kernel computes). */
void tr_note_path_of(tr_ctx *t, int node, tr_path_kind kind, const char *kernel, unsigned folds,
                     const char *note);
/* Values a row's prepare hook computed once from constant inputs (NULL when none was kept). */
mx_array tr_derived(const tr_ctx *t, int slot);
/* In a prepare hook: evaluates `a` and keeps it in the plan under `slot`. */
int tr_keep_derived(tr_ctx *t, int slot, mx_array a);
/* a[start:stop] along one axis, every other axis whole (the rank is kept). */
int tr_slice_axis(tr_ctx *t, mx_array a, int axis, int start, int stop, mx_array *out);
/* Sequence (and optional) values: input i's items (borrowed until the translation ends), or a
 * failure when input i is absent or holds no sequence; output i set to a copy of items. */
int tr_seq_in(tr_ctx *t, int i, const mx_array **items, int *count);
int tr_seq_out(tr_ctx *t, int i, const mx_array *items, int count);
/* Whether value v (a value index) has been produced: an array, or a sequence in t->seqs. */
bool tr_value_ready(const tr_ctx *t, int v);
/* A scalar of dtype (helper for constants such as 1 or 0.5 in compositions). */
int tr_scalar(tr_ctx *t, mx_array *out, double v, mx_dtype dtype);

/* Control flow (If, Loop, Scan). The node's subgraph under attribute attr, made ready when the
 * plan was built (rows found, constants converted); NULL when the node has none. */
const struct plan_body *tr_body(const tr_ctx *t, const char *attr);
const ir_graph *tr_body_graph(const struct plan_body *b);
/* Translates the body once: inputs[k] binds its graph input k (every one must be given), outer
 * scope values come from the node's graph, and outputs[k] receives graph output k. Lazy like
 * any translation; host reads and run-time checks of body nodes count as the node's own.
 * Errors name the body node ("body node 'x' (Add): ..."). */
int tr_run_body(tr_ctx *t, const struct plan_body *b, const mx_array *inputs,
                uint64_t fixed_inputs, mx_array *outputs);
/* fixed_inputs: bit k set when input k is fixed for this translation (made from host values,
 * such as a Loop's iteration number), so body nodes may read it on the host for free. */

#define TR_TRY(call)        \
  do {                      \
    int rc_ = (call);       \
    if (rc_ != MX_OK) return rc_; \
  } while (0)

#endif
