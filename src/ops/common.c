/*
 * Translators more than one operator family uses: a single bridge operation selected by the
 * row's code (mx_unary_op or mx_binary_op), with the result cast to the declared output type;
 * and the elementwise chain check the steps' translators make first.
 */
#include "ops/families.h"
#include "cpu/fastmath.h"
#include "cpu/math.h"
#include "ops/fusion_match.h"
#include "plan/translate.h"

int op_translate_unary(tr_ctx *t, const ir_node *n, const op_row *r) {
  mx_array y, x = tr_in(t, 0);
  if (r->code == MX_ERF && cpu_kernel_applies(t, x)) { /* erf in one pass, not a composition */
    TR_TRY(cpu_erf(t, x, &y));
    if (cpu_match_erf_in_gelu(t, n))
      tr_note_path(t, TR_PATH_INSIDE, "gelu", 0,
                   "inside a Gelu: its last Mul's host kernel computes it");
    else
      tr_note_path(t, TR_PATH_HOST_KERNEL, "erf", 0, "host kernel (CPU)");
  } else if (r->code == MX_SIGMOID && cpu_kernel_applies(t, x)) { /* one exp, not a composition */
    TR_TRY(cpu_sigmoid(t, x, &y));
    if (cpu_match_sigmoid_in_swish(t, n))
      tr_note_path(t, TR_PATH_INSIDE, "swish", 0,
                   "inside a Swish: its Mul's host kernel computes it");
    else
      tr_note_path(t, TR_PATH_HOST_KERNEL, "sigmoid", 0, "host kernel (CPU)");
  } else if (cpu_fast_has_unary(r->code) &&
             cpu_fast_applies(t, x)) { /* MLX's CPU exp is scalar code */
    TR_TRY(cpu_fast_unary(t, r->code, x, &y));
    tr_note_path(t, TR_PATH_COMPOSED, "fastmath", 0, "composed (CPU)");
  } else {
    TR_TRY(mx_unary(t->mx, &y, (mx_unary_op)r->code, x));
  }
  return tr_out_cast(t, 0, y);
}

int op_translate_binary(tr_ctx *t, const ir_node *n, const op_row *r) {
  mx_array y;
  bool done;
  TR_TRY(op_translate_chain(t, n, &done));
  if (done) return MX_OK;
  TR_TRY(mx_binary(t->mx, &y, (mx_binary_op)r->code, tr_in(t, 0), tr_in(t, 1)));
  return tr_out_cast(t, 0, y);
}

int op_translate_chain(tr_ctx *t, const ir_node *n, bool *done) {
  *done = false;
  mx_array first = tr_in(t, 0), y = NULL;
  cpu_match_chain chain;
  if (!first || !cpu_kernel_applies(t, first) || !cpu_match_chain_ending_at(t, n, &chain))
    return MX_OK;
  mx_array x = t->values[chain.input];
  if (chain.input_private) TR_TRY(cpu_chain_fold(t, x, chain.steps, chain.n_steps, &y));
  if (y) {
    tr_note_path(t, TR_PATH_EPILOGUE, "chain", 0,
                 "last of an elementwise chain: the epilogue of the kernel computing its input "
                 "(CPU)");
  } else {
    if (mx_size(x) < CPU_CHAIN_MIN_ELEMENTS) return MX_OK;
    TR_TRY(cpu_chain_build(t, x, chain.steps, chain.n_steps, &y));
    tr_note_path(t, TR_PATH_HOST_KERNEL, "chain", 0,
                 "last of an elementwise chain: one host kernel (CPU)");
  }
  *done = true;
  return tr_out_cast(t, 0, y);
}

/* Declines when a known rank exceeds what MLX arrays can hold. */
bool op_rank_fits(const ir_value *v, const char *what, op_why why) {
  if (v && v->rank > MX_MAX_RANK)
    return op_decline(why, "%s has rank %d; MLX arrays hold at most %d dimensions", what, v->rank,
                      MX_MAX_RANK);
  return true;
}

/* Declines a shape-valued input (constant, or computed with a known length) holding more than
 * `cap` values. Its values are read on the host at run time. */
bool op_ints_fit(const ir_graph *g, const ir_node *n, int i, size_t cap, const char *what,
                     op_why why) {
  const ir_value *v = ir_input(g, n, i);
  int64_t len = v ? ir_num_elements(v) : -1;
  if (len > (int64_t)cap)
    return op_decline(why, "%s has %lld entries; at most %zu are supported", what,
                      (long long)len, cap);
  return true;
}
