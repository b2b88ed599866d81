/*
 * Control flow: If, Loop and Scan, translated by unrolling their subgraphs into the group's MLX
 * graph (src/plan/body.c translates a body once per call of tr_run_body). The registry claims
 * them only when every node of every subgraph is claimable (registry.c, bodies_ok), so a claimed
 * node never falls back. If reads `cond` on the host and translates the chosen branch: free when
 * cond is constant; a computed cond is value-keyed (the plan evaluates it before the call and
 * keeps a compiled variant per value), and eager inside another control-flow body. Scan (opset
 * 9 on) takes its iteration count from the scan axis extents, known from shapes, slices its scan
 * inputs per iteration in the given directions and stacks the scan outputs (shape-keyed). Loop
 * reads its trip count and condition on the host and, when the body computes the condition,
 * reads it after every iteration (eager); a loop whose condition the body only passes through
 * is shape-keyed when its trip count and condition are constant, value-keyed when they are
 * computed. Unrolling stops at CONTROL_UNROLL_CAP iterations with an error naming the node; a
 * loop known to exceed it is declined at claim time. Scan-8 is a Scan per entry of its batch
 * axis; its per-entry lengths (sequence_lens) are declined.
 */
#include "ops/families.h"
#include "plan/translate.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { CONTROL_UNROLL_CAP = 4096 };

/* --- shared ------------------------------------------------------------------------------ */
/* The worst compile class among a subgraph's nodes (recursively through their own hooks). A
 * value-keyed node counts as eager there, since the plan computes keys of its own graph only;
 * *keyed (when given) says whether the subgraph holds one. */
static op_compile_class body_class_of(const ir_graph *body, bool *keyed) {
  op_compile_class worst = OP_SHAPELESS;
  for (int i = 0; body && i < body->n_nodes; i++) {
    const ir_node *b = &body->nodes[i];
    const op_row *r = op_lookup(b->domain, b->op_type, b->since_version);
    op_compile_class c = r ? op_node_compile_class(r, body, b) : OP_EAGER;
    if (c == OP_VALUE_KEYED) {
      c = OP_EAGER;
      if (keyed) *keyed = true;
    }
    if (c > worst) worst = c;
  }
  return worst;
}

static op_compile_class body_class(const ir_graph *body) { return body_class_of(body, NULL); }

static op_compile_class at_least(op_compile_class a, op_compile_class b) { return a > b ? a : b; }

/* Whether a node of body is value-keyed (an If's computed cond, a Loop's computed trip count). */
static bool holds_keyed_node(const ir_graph *body) {
  bool keyed = false;
  body_class_of(body, &keyed);
  return keyed;
}

/* Output i, cast to its declared element type when the snapshot knows it. */
static int out_declared(tr_ctx *t, int i, mx_array a) {
  const ir_value *v = ir_output(t->g, t->node, i);
  if (v && ir_value_mx_dtype(v->elem_type) >= 0) return tr_out_cast(t, i, a);
  return tr_out(t, i, a);
}

/* Stacks count arrays along a new axis (reversed order when reverse). */
static int stack(tr_ctx *t, mx_array *items, int count, int axis, bool reverse, mx_array *out) {
  for (int i = 0; i < count; i++) TR_TRY(mx_expand_dims(t->mx, &items[i], items[i], &axis, 1));
  if (reverse)
    for (int i = 0, j = count - 1; i < j; i++, j--) {
      mx_array tmp = items[i];
      items[i] = items[j];
      items[j] = tmp;
    }
  return mx_concatenate(t->mx, out, items, (size_t)count, axis);
}

static bool has_body(const ir_graph *g, const ir_node *n, const char *attr, op_why why) {
  (void)g;
  if (ir_subgraph_of(n, attr)) return true;
  return op_decline(why, "the '%s' subgraph is missing", attr);
}

/* --- If ---------------------------------------------------------------------------------- */
static bool claim_if(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  if (!has_body(g, n, "then_branch", why) || !has_body(g, n, "else_branch", why)) return false;
  const ir_graph *branches[2] = {ir_subgraph_of(n, "then_branch"),
                                 ir_subgraph_of(n, "else_branch")};
  for (int k = 0; k < 2; k++)
    if (branches[k]->n_graph_outputs != n->n_outputs)
      return op_decline(why, "%s has %d outputs, the node %d", k ? "else_branch" : "then_branch",
                        branches[k]->n_graph_outputs, n->n_outputs);
  /* With a computed cond a whole If compiles (value-keyed), unless a branch holds a value-keyed
   * node of its own (an If with a computed cond, a Loop with a computed trip count): keys are
   * computed for a group's own graph only, so that one would make the whole If run eagerly.
   * Left to ORT, its branches are offered to us one by one, where that node is value-keyed. */
  if (!op_input_is_const(g, n, 0) && (holds_keyed_node(branches[0]) ||
                                      holds_keyed_node(branches[1])))
    return op_decline(why, "cond is computed and a branch holds a node keyed on computed values "
                           "(an If's cond, a Loop's trip count): the whole If would run eagerly, "
                           "so its branches are claimed one by one instead, where they compile");
  return true;
}

/* A computed cond keys the compiled variant (the plan computes it before each call): the chosen
 * branch is then translated into the trace like any other nodes. */
static op_compile_class class_if(const ir_graph *g, const ir_node *n) {
  op_compile_class branches = at_least(body_class(ir_subgraph_of(n, "then_branch")),
                                       body_class(ir_subgraph_of(n, "else_branch")));
  return op_input_is_const(g, n, 0) ? branches : at_least(OP_VALUE_KEYED, branches);
}

static int translate_if(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  double cond = 0;
  TR_TRY(tr_host_scalar(t, 0, &cond));
  const struct plan_body *b = tr_body(t, cond != 0 ? "then_branch" : "else_branch");
  if (!b) return tr_fail(t, "the chosen branch is missing");
  mx_array *outs = calloc((size_t)n->n_outputs + 1, sizeof(mx_array));
  if (!outs) return tr_fail(t, "out of memory");
  int rc = tr_run_body(t, b, NULL, 0, outs);
  for (int i = 0; rc == MX_OK && i < n->n_outputs; i++) rc = out_declared(t, i, outs[i]);
  free(outs);
  return rc;
}

/* --- Scan -------------------------------------------------------------------------------- */
/* Scan's layout. Scan-8 puts an optional sequence_lens first and a batch axis in front of every
 * state and scan input and output (scanned along axis 1, directions in 'directions'); from 9 on
 * there is no batch axis and the axes are attributes. */
typedef struct scan_form {
  int first; /* node input of the first state: 1 for Scan-8 (after sequence_lens), else 0 */
  int n_state, n_scan_in, n_scan_out;
  const ir_attr *in_dirs, *out_dirs, *in_axes, *out_axes;
} scan_form;

static bool scan_form_of(const ir_node *n, const ir_graph *body, scan_form *f, op_why why) {
  memset(f, 0, sizeof *f);
  bool v8 = n->since_version < 9;
  f->first = v8 ? 1 : 0;
  int64_t m = ir_attr_int(n, "num_scan_inputs", -1);
  if (m < 1 || m > n->n_inputs - f->first)
    return op_decline(why, "num_scan_inputs is missing or invalid");
  f->n_scan_in = (int)m;
  f->n_state = n->n_inputs - f->first - f->n_scan_in;
  f->n_scan_out = n->n_outputs - f->n_state;
  if (f->n_scan_out < 0 || body->n_graph_inputs != n->n_inputs - f->first ||
      body->n_graph_outputs != n->n_outputs)
    return op_decline(why, "the body's inputs/outputs (%d/%d) do not match the node's (%d/%d)",
                      body->n_graph_inputs, body->n_graph_outputs, n->n_inputs, n->n_outputs);
  f->in_dirs = ir_find_attr(n, v8 ? "directions" : "scan_input_directions");
  f->out_dirs = v8 ? NULL : ir_find_attr(n, "scan_output_directions");
  f->in_axes = v8 ? NULL : ir_find_attr(n, "scan_input_axes");
  f->out_axes = v8 ? NULL : ir_find_attr(n, "scan_output_axes");
  const ir_attr *lists[4] = {f->in_dirs, f->out_dirs, f->in_axes, f->out_axes};
  const char *names[4] = {v8 ? "directions" : "scan_input_directions", "scan_output_directions",
                          "scan_input_axes", "scan_output_axes"};
  int want[4] = {f->n_scan_in, f->n_scan_out, f->n_scan_in, f->n_scan_out};
  for (int k = 0; k < 4; k++) {
    if (!lists[k]) continue;
    if (lists[k]->type != IR_ATTR_INTS || (int)lists[k]->count != want[k])
      return op_decline(why, "%s must hold %d values", names[k], want[k]);
    for (size_t i = 0; k < 2 && i < lists[k]->count; i++)
      if (lists[k]->ints[i] != 0 && lists[k]->ints[i] != 1)
        return op_decline(why, "%s holds %lld (0 or 1 expected)", names[k],
                          (long long)lists[k]->ints[i]);
  }
  return true;
}

static int64_t attr_at(const ir_attr *a, int i) { return a ? a->ints[i] : 0; }

static bool claim_scan(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  if (!has_body(g, n, "body", why)) return false;
  if (n->since_version < 9 && ir_has_input(n, 0))
    return op_decline(why, "Scan-8 with sequence_lens (per-batch lengths) is not translated");
  scan_form f;
  return scan_form_of(n, ir_subgraph_of(n, "body"), &f, why);
}

static op_compile_class class_scan(const ir_graph *g, const ir_node *n) {
  (void)g;
  return at_least(OP_SHAPE_KEYED, body_class(ir_subgraph_of(n, "body")));
}

/* One scan over a sequence: state[n_state] is threaded through (final values written back),
 * xs[j] is scanned along axes[j], ys[k] receives the stacked scan output k. */
static int scan_run(tr_ctx *t, const struct plan_body *b, const scan_form *f, mx_array *state,
                    const mx_array *xs, const int *axes, mx_array *ys) {
  int steps = -1;
  for (int j = 0; j < f->n_scan_in; j++) {
    int len = mx_dim(xs[j], axes[j]);
    if (steps >= 0 && len != steps)
      return tr_fail(t, "scan inputs disagree on the sequence length (%d and %d)", steps, len);
    steps = len;
  }
  if (steps <= 0) return tr_fail(t, "a scan over zero iterations is not translated");
  if (steps > CONTROL_UNROLL_CAP)
    return tr_fail(t, "%d iterations exceed the unroll cap of %d", steps, CONTROL_UNROLL_CAP);
  int width = f->n_state + (f->n_scan_in > f->n_scan_out ? f->n_scan_in : f->n_scan_out);
  mx_array *in = calloc((size_t)width + 1, sizeof(mx_array));
  mx_array *out = calloc((size_t)width + 1, sizeof(mx_array));
  mx_array *scans = calloc((size_t)f->n_scan_out * (size_t)steps + 1, sizeof(mx_array));
  int rc = in && out && scans ? MX_OK : tr_fail(t, "out of memory");
  for (int i = 0; rc == MX_OK && i < f->n_state; i++) in[i] = state[i];
  for (int it = 0; rc == MX_OK && it < steps; it++) {
    for (int j = 0; rc == MX_OK && j < f->n_scan_in; j++) {
      int at = attr_at(f->in_dirs, j) ? steps - 1 - it : it;
      mx_array *slot = &in[f->n_state + j];
      rc = tr_slice_axis(t, xs[j], axes[j], at, at + 1, slot);
      if (rc == MX_OK) rc = mx_squeeze(t->mx, slot, *slot, &axes[j], 1);
    }
    if (rc == MX_OK) rc = tr_run_body(t, b, in, 0, out);
    for (int i = 0; rc == MX_OK && i < f->n_state; i++) in[i] = out[i];
    for (int k = 0; rc == MX_OK && k < f->n_scan_out; k++)
      scans[(size_t)k * (size_t)steps + (size_t)it] = out[f->n_state + k];
  }
  for (int i = 0; rc == MX_OK && i < f->n_state; i++) state[i] = in[i];
  for (int k = 0; rc == MX_OK && k < f->n_scan_out; k++) {
    mx_array *items = &scans[(size_t)k * (size_t)steps];
    int axis = 0;
    rc = tr_axis(t, attr_at(f->out_axes, k), mx_ndim(items[0]) + 1, &axis);
    if (rc == MX_OK) rc = stack(t, items, steps, axis, attr_at(f->out_dirs, k) != 0, &ys[k]);
  }
  free(in);
  free(out);
  free(scans);
  return rc;
}

static int translate_scan(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  const struct plan_body *b = tr_body(t, "body");
  if (!b) return tr_fail(t, "the body is missing");
  char reason[256];
  scan_form f;
  if (!scan_form_of(n, tr_body_graph(b), &f, (op_why){reason, sizeof reason}))
    return tr_fail(t, "%s", reason);
  int count = n->n_inputs + n->n_outputs;
  mx_array *state = calloc((size_t)count + 1, sizeof(mx_array));
  mx_array *xs = calloc((size_t)count + 1, sizeof(mx_array));
  mx_array *ys = calloc((size_t)count + 1, sizeof(mx_array));
  int *axes = calloc((size_t)count + 1, sizeof(int));
  int rc = state && xs && ys && axes ? MX_OK : tr_fail(t, "out of memory");
  for (int i = 0; rc == MX_OK && i < f.n_state; i++)
    if (!(state[i] = tr_in(t, f.first + i))) rc = tr_fail(t, "state input %d is missing", i);
  for (int j = 0; rc == MX_OK && j < f.n_scan_in; j++) {
    xs[j] = tr_in(t, f.first + f.n_state + j);
    if (!xs[j]) rc = tr_fail(t, "scan input %d is missing", j);
    else rc = tr_axis(t, attr_at(f.in_axes, j), mx_ndim(xs[j]), &axes[j]);
  }
  if (rc == MX_OK && f.first == 0) { /* Scan 9 and later: one sequence */
    rc = scan_run(t, b, &f, state, xs, axes, ys);
  } else if (rc == MX_OK) { /* Scan-8: one sequence per batch entry, stacked on axis 0 */
    int batch = mx_dim(f.n_scan_in ? xs[0] : state[0], 0);
    mx_array *per = calloc((size_t)count * (size_t)(batch + 1) + 1, sizeof(mx_array));
    mx_array *st = calloc((size_t)count + 1, sizeof(mx_array));
    mx_array *x1 = calloc((size_t)count + 1, sizeof(mx_array));
    rc = per && st && x1 ? MX_OK : tr_fail(t, "out of memory");
    int zero = 0, n_res = f.n_state + f.n_scan_out;
    for (int bi = 0; rc == MX_OK && bi < batch; bi++) {
      for (int i = 0; rc == MX_OK && i < f.n_state; i++) {
        rc = tr_slice_axis(t, state[i], 0, bi, bi + 1, &st[i]);
        if (rc == MX_OK) rc = mx_squeeze(t->mx, &st[i], st[i], &zero, 1);
      }
      for (int j = 0; rc == MX_OK && j < f.n_scan_in; j++) {
        rc = tr_slice_axis(t, xs[j], 0, bi, bi + 1, &x1[j]);
        if (rc == MX_OK) rc = mx_squeeze(t->mx, &x1[j], x1[j], &zero, 1);
        axes[j] = 0;
      }
      mx_array *row = &per[(size_t)bi * (size_t)n_res];
      if (rc == MX_OK) rc = scan_run(t, b, &f, st, x1, axes, &row[f.n_state]);
      for (int i = 0; rc == MX_OK && i < f.n_state; i++) row[i] = st[i];
    }
    mx_array *items = calloc((size_t)batch + 1, sizeof(mx_array));
    if (rc == MX_OK && !items) rc = tr_fail(t, "out of memory");
    for (int o = 0; rc == MX_OK && o < n_res; o++) {
      for (int bi = 0; bi < batch; bi++) items[bi] = per[(size_t)bi * (size_t)n_res + (size_t)o];
      mx_array *dst = o < f.n_state ? &state[o] : &ys[o - f.n_state];
      rc = batch ? stack(t, items, batch, 0, false, dst) : tr_fail(t, "empty batch");
    }
    free(items);
    free(per);
    free(st);
    free(x1);
  }
  for (int i = 0; rc == MX_OK && i < f.n_state; i++) rc = out_declared(t, i, state[i]);
  for (int k = 0; rc == MX_OK && k < f.n_scan_out; k++) rc = out_declared(t, f.n_state + k, ys[k]);
  free(state);
  free(xs);
  free(ys);
  free(axes);
  return rc;
}

/* --- Loop -------------------------------------------------------------------------------- */
/* True when the body's condition output is its condition input, passed through unchanged
 * (directly or through Identity nodes). */
static bool cond_passes_through(const ir_graph *body) {
  if (body->n_graph_inputs < 2 || body->n_graph_outputs < 1) return false;
  int v = body->graph_outputs[0];
  for (int hops = 0; v != IR_NONE && hops <= body->n_nodes; hops++) {
    if (v == body->graph_inputs[1]) return true;
    int p = body->values[v].producer;
    if (p == IR_NONE || strcmp(body->nodes[p].op_type, "Identity") != 0) return false;
    v = body->nodes[p].n_inputs ? body->nodes[p].inputs[0] : IR_NONE;
  }
  return false;
}

static bool const_trip_count(const ir_graph *g, const ir_node *n, int64_t *m) {
  int64_t *vals = NULL;
  size_t count = 0;
  bool ok = ir_const_ints(ir_input(g, n, 0), &vals, &count) && count == 1;
  if (ok) *m = vals[0];
  free(vals);
  return ok;
}

/* How many body nodes unrolling Loop n translates, nested Loops included, where trip counts
 * are constants (a computed one counts as 1: the run-time cap, TR_BODY_NODE_CAP, bounds it);
 * saturates instead of overflowing. */
static int64_t unrolled_nodes(const ir_graph *g, const ir_node *n) {
  const ir_graph *body = ir_subgraph_of(n, "body");
  int64_t m = 1, per_iteration = 0;
  if (!body || (const_trip_count(g, n, &m) && m <= 0)) return 0;
  for (int i = 0; i < body->n_nodes; i++) {
    const ir_node *b = &body->nodes[i];
    int64_t inner = strcmp(b->op_type, "Loop") == 0 && b->n_subgraphs ? unrolled_nodes(body, b) : 0;
    per_iteration += 1 + inner;
    if (per_iteration > TR_BODY_NODE_CAP) break;
  }
  return per_iteration > INT64_MAX / m ? INT64_MAX : m * per_iteration;
}

static bool claim_loop(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  if (!has_body(g, n, "body", why)) return false;
  const ir_graph *body = ir_subgraph_of(n, "body");
  int carried = n->n_inputs - 2;
  if (carried < 0 || body->n_graph_inputs != n->n_inputs ||
      body->n_graph_outputs != 1 + n->n_outputs || n->n_outputs < carried)
    return op_decline(why, "the body's inputs/outputs (%d/%d) do not match the node's (%d/%d)",
                      body->n_graph_inputs, body->n_graph_outputs, n->n_inputs, n->n_outputs);
  int64_t m = 0;
  if (const_trip_count(g, n, &m) && m > CONTROL_UNROLL_CAP && cond_passes_through(body) &&
      !ir_has_input(n, 1))
    return op_decline(why, "the trip count %lld exceeds the unroll cap of %d iterations",
                      (long long)m, CONTROL_UNROLL_CAP);
  int64_t nodes = unrolled_nodes(g, n);
  if (nodes > TR_BODY_NODE_CAP)
    return op_decline(why, "unrolled with its nested loops it would translate %lld nodes, more "
                      "than the cap of %d", (long long)nodes, TR_BODY_NODE_CAP);
  return true;
}

/* With a pass-through cond the iterations are known before the loop runs: from constants
 * (shape-keyed), else from M and cond computed before the call (value-keyed). A cond the body
 * computes is read after every iteration (eager). */
static op_compile_class class_loop(const ir_graph *g, const ir_node *n) {
  const ir_graph *body = ir_subgraph_of(n, "body");
  if (!cond_passes_through(body)) return OP_EAGER;
  bool fixed = (!ir_has_input(n, 0) || op_input_is_const(g, n, 0)) &&
               (!ir_has_input(n, 1) || op_input_is_const(g, n, 1));
  return at_least(fixed ? OP_SHAPE_KEYED : OP_VALUE_KEYED, body_class(body));
}

/* Reads a one-element array as a truth value on the host. */
static int host_truth(tr_ctx *t, mx_array a, bool *value) {
  if (mx_size(a) != 1) return tr_fail(t, "the loop condition must hold one value");
  double v = 0;
  TR_TRY(tr_scalar_value(t->mx, a, &v));
  t->host_reads++;
  *value = v != 0;
  return MX_OK;
}

/* Scan output k after zero iterations: empty, shaped [0, ...] from the body's declared shape. */
static int empty_scan_output(tr_ctx *t, const ir_graph *body, int k, mx_array *out) {
  const ir_value *v = &body->values[body->graph_outputs[k]];
  int shape[MX_MAX_RANK], dt = ir_value_mx_dtype(v->elem_type);
  if (v->rank < 0 || v->rank + 1 > MX_MAX_RANK || dt < 0)
    return tr_fail(t, "zero iterations, and the shape of scan output '%s' is unknown", v->name);
  shape[0] = 0;
  for (int d = 0; d < v->rank; d++) {
    if (v->dims[d] < 0)
      return tr_fail(t, "zero iterations, and the shape of scan output '%s' is unknown", v->name);
    shape[d + 1] = (int)v->dims[d];
  }
  mx_array zero;
  TR_TRY(tr_scalar(t, &zero, 0, (mx_dtype)dt));
  return mx_full(t->mx, out, shape, v->rank + 1, zero);
}

static int translate_loop(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  const struct plan_body *b = tr_body(t, "body");
  if (!b) return tr_fail(t, "the body is missing");
  const ir_graph *body = tr_body_graph(b);
  int carried = n->n_inputs - 2, n_scan = n->n_outputs - carried;
  int64_t trips = INT64_MAX;
  if (ir_has_input(n, 0)) {
    size_t count = 0;
    TR_TRY(tr_host_ints(t, 0, &trips, 1, &count));
    if (count != 1) return tr_fail(t, "the trip count M must hold one value");
  }
  bool cond = true;
  if (ir_has_input(n, 1)) {
    double c = 0;
    TR_TRY(tr_host_scalar(t, 1, &c));
    cond = c != 0;
  }
  bool through = cond_passes_through(body);
  size_t cap = (size_t)(trips < CONTROL_UNROLL_CAP ? (trips > 0 ? trips : 0) : CONTROL_UNROLL_CAP);
  mx_array *in = calloc((size_t)n->n_inputs + 1, sizeof(mx_array));
  mx_array *out = calloc((size_t)body->n_graph_outputs + 1, sizeof(mx_array));
  mx_array *scans = calloc((size_t)n_scan * cap + 1, sizeof(mx_array));
  int rc = in && out && scans ? MX_OK : tr_fail(t, "out of memory");
  for (int i = 0; rc == MX_OK && i < carried; i++) in[2 + i] = tr_in(t, 2 + i);
  int64_t it = 0;
  for (; rc == MX_OK && it < trips && cond; it++) {
    if (it >= CONTROL_UNROLL_CAP) {
      rc = tr_fail(t, "the loop runs more than %d iterations, the unroll cap", CONTROL_UNROLL_CAP);
      break;
    }
    rc = mx_scalar_int(t->mx, &in[0], it, MX_INT64);
    if (rc == MX_OK) rc = mx_scalar(t->mx, &in[1], cond ? 1 : 0, MX_BOOL);
    if (rc == MX_OK) rc = tr_run_body(t, b, in, 3u /* iteration number and cond */, out);
    for (int i = 0; rc == MX_OK && i < carried; i++) in[2 + i] = out[1 + i];
    for (int k = 0; rc == MX_OK && k < n_scan; k++)
      scans[(size_t)k * cap + (size_t)it] = out[1 + carried + k];
    if (rc == MX_OK && !through) rc = host_truth(t, out[0], &cond);
  }
  for (int i = 0; rc == MX_OK && i < carried; i++) rc = out_declared(t, i, in[2 + i]);
  for (int k = 0; rc == MX_OK && k < n_scan; k++) {
    mx_array y;
    rc = it ? stack(t, &scans[(size_t)k * cap], (int)it, 0, false, &y)
            : empty_scan_output(t, body, 1 + carried + k, &y);
    if (rc == MX_OK) rc = out_declared(t, carried + k, y);
  }
  free(in);
  free(out);
  free(scans);
  return rc;
}

const op_row ops_control_rows[] = {
    {"", "If", 1, 25, claim_if, translate_if, OP_EAGER, 0, 0,
     "the chosen branch is translated inline; a computed cond is evaluated before the call and "
     "keys the compiled variant (value-keyed); eager inside another control-flow body",
     class_if, NULL, 1u /* cond */},
    {"", "Loop", 1, 25, claim_loop, translate_loop, OP_EAGER, 0, 0,
     "unrolled up to 4096 iterations; with a pass-through cond, M and cond are known before the "
     "loop (constant: shape-keyed; computed: evaluated before the call and value-keyed); a "
     "body-computed cond is read after every iteration (eager)",
     class_loop, NULL, 3u /* M, cond */},
    {"", "Scan", 8, 8, claim_scan, translate_scan, OP_EAGER, 0, 0,
     "one unrolled scan per batch entry (axis 0), scanned along axis 1; sequence_lens declined",
     class_scan, NULL},
    {"", "Scan", 9, 25, claim_scan, translate_scan, OP_EAGER, 0, 0,
     "unrolled over the scan axis (iteration count from shapes, up to 4096), directions and "
     "axes as given",
     class_scan, NULL},
    OP_ROWS_END,
};
