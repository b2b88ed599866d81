/*
 * Translators more than one operator family uses: a single bridge operation selected by the
 * row's code (mx_unary_op or mx_binary_op), with the result cast to the declared output type;
 * and the build of the fusion table's elementwise chain, whose anchors are several families'.
 */
#include "ops/families.h"
#include "cpu/fastmath.h"
#include "cpu/math.h"
#include "ops/fusion_match.h"
#include "plan/translate.h"

int op_translate_unary(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n;
  mx_array y, x = tr_in(t, 0);
  if (r->code == MX_ERF && cpu_kernel_applies(t, x)) { /* erf in one pass, not a composition */
    TR_TRY(cpu_erf(t, x, &y));
    tr_note_path(t, TR_PATH_HOST_KERNEL, "erf", 0, "host kernel (CPU)");
  } else if (r->code == MX_SIGMOID && cpu_kernel_applies(t, x)) { /* one exp, not a composition */
    TR_TRY(cpu_sigmoid(t, x, &y));
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
  (void)n;
  mx_array y;
  TR_TRY(mx_binary(t->mx, &y, (mx_binary_op)r->code, tr_in(t, 0), tr_in(t, 1)));
  return tr_out_cast(t, 0, y);
}

/* The last step of an elementwise chain with constants (the fusion table's chain) on the CPU
 * device for a float32 input: the epilogue of the kernel computing the chain's input when only
 * the chain reads it, else one host kernel from CPU_CHAIN_MIN_ELEMENTS up. */
int op_build_chain(tr_ctx *t, const ir_node *n, const op_fusion_match *m, bool *done) {
  (void)n;
  const fz_chain *chain = &m->u.chain;
  mx_array first = tr_in(t, 0), x = t->values[chain->input], y = NULL;
  if (!first || !cpu_kernel_applies(t, first) || !x || mx_dtype_of(x) != MX_FLOAT32 ||
      chain->const_rank > mx_ndim(x))
    return MX_OK;
  if (chain->input_private) TR_TRY(cpu_chain_fold(t, x, chain->steps, chain->n_steps, &y));
  if (y) {
    tr_note_path(t, TR_PATH_EPILOGUE, "chain", 0,
                 "last of an elementwise chain: the epilogue of the kernel computing its input "
                 "(CPU)");
  } else {
    if (mx_size(x) < CPU_CHAIN_MIN_ELEMENTS) return MX_OK;
    TR_TRY(cpu_chain_build(t, x, chain->steps, chain->n_steps, &y));
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
