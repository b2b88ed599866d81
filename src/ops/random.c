/*
 * Random-number operators: RandomNormal, RandomUniform, RandomNormalLike, RandomUniformLike,
 * Bernoulli and Multinomial, drawn with MLX's counter-based generator. The values therefore differ
 * from ONNX Runtime's (a different generator): only the distributions agree. Without a `seed`
 * attribute every call draws from MLX's global key sequence, so every run gives fresh values; with
 * one, the key is made from the seed (its float bits), so every run of that node gives the same
 * values (ONNX Runtime instead seeds a generator once per kernel and advances it run to run). The
 * rows are eager: translated every run and never constant-folded or compiled, since a compiled
 * trace would freeze the key it drew. Draws are made in float32 and cast to the requested dtype;
 * Bernoulli compares a uniform draw with the probabilities; Multinomial samples MLX's categorical
 * distribution from each row of unnormalised log-probabilities.
 */
#include "ops/families.h"
#include "plan/translate.h"

#include <string.h>

enum { RND_NORMAL, RND_UNIFORM };

/* The key for a node: from its seed attribute, or NULL (MLX's global sequence). */
static int node_key(tr_ctx *t, const ir_node *n, mx_array *key) {
  const ir_attr *seed = ir_find_attr(n, "seed");
  *key = NULL;
  if (!seed || seed->type != IR_ATTR_FLOAT) return MX_OK;
  uint32_t bits;
  memcpy(&bits, &seed->f, sizeof bits);
  return mx_random_key(t->mx, key, bits);
}

/* A declined dtype attribute: unknown, not held by MLX, or outside `allowed`. */
static bool dtype_attr_ok(const ir_node *n, uint32_t allowed, op_why why) {
  const ir_attr *a = ir_find_attr(n, "dtype");
  if (!a) return true;
  if (a->type != IR_ATTR_INT || ir_to_mx_dtype((int)a->i) < 0 || !(allowed & OP_T((int)a->i)))
    return op_decline(why, "dtype %s is not translated here", ir_elem_name((int)a->i));
  return true;
}

/* --- RandomNormal / RandomUniform (shape attribute) and their Like forms ----------------- */
static bool claim_random(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)g, (void)r;
  if (!dtype_attr_ok(n, OP_FLOATS, why)) return false;
  if (n->n_inputs == 0) {
    const ir_attr *s = ir_find_attr(n, "shape");
    if (!s || s->type != IR_ATTR_INTS) return op_decline(why, "the shape attribute is required");
    if (s->count > MX_MAX_RANK)
      return op_decline(why, "shape has %zu dims; MLX arrays hold at most %d", s->count,
                        MX_MAX_RANK);
    for (size_t k = 0; k < s->count; k++)
      if (s->ints[k] < 0 || s->ints[k] > INT32_MAX)
        return op_decline(why, "shape[%zu] = %lld is not a valid dimension", k,
                          (long long)s->ints[k]);
  } else if (!ir_find_attr(n, "dtype")) {
    const ir_value *x = ir_input(g, n, 0);
    if (x && !(OP_FLOATS & OP_T(x->elem_type)))
      return op_decline(why, "without a dtype attribute the output takes the input's type %s, "
                             "which is not a float type", ir_elem_name(x->elem_type));
  }
  return true;
}

static int translate_random(tr_ctx *t, const ir_node *n, const op_row *r) {
  int shape[MX_MAX_RANK], ndim = 0;
  mx_array like = tr_in(t, 0), key, y;
  if (like) {
    ndim = mx_ndim(like);
    memcpy(shape, mx_shape(like), sizeof(int) * (size_t)ndim);
  } else {
    const ir_attr *s = ir_find_attr(n, "shape");
    if (!s || s->count > MX_MAX_RANK) return tr_fail(t, "invalid shape attribute");
    ndim = (int)s->count;
    for (int k = 0; k < ndim; k++) shape[k] = (int)s->ints[k];
  }
  TR_TRY(node_key(t, n, &key));
  if (r->code == RND_NORMAL)
    TR_TRY(mx_random_normal(t->mx, &y, shape, ndim, ir_attr_float(n, "mean", 0.0f),
                            ir_attr_float(n, "scale", 1.0f), MX_FLOAT32, key));
  else
    TR_TRY(mx_random_uniform(t->mx, &y, shape, ndim, ir_attr_float(n, "low", 0.0f),
                             ir_attr_float(n, "high", 1.0f), MX_FLOAT32, key));
  mx_dtype want = tr_out_dtype(t, 0);
  if (want != MX_FLOAT32) TR_TRY(mx_astype(t->mx, &y, y, want));
  return tr_out(t, 0, y);
}

/* --- Bernoulli --------------------------------------------------------------------------- */
static bool claim_bernoulli(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)g, (void)r;
  return dtype_attr_ok(n, OP_ALL, why);
}

static int translate_bernoulli(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array p = tr_in(t, 0), key, u, y;
  TR_TRY(node_key(t, n, &key));
  TR_TRY(mx_random_uniform(t->mx, &u, mx_shape(p), mx_ndim(p), 0.0, 1.0, MX_FLOAT32, key));
  if (mx_dtype_of(p) != MX_FLOAT32) TR_TRY(mx_astype(t->mx, &p, p, MX_FLOAT32));
  TR_TRY(mx_binary(t->mx, &y, MX_LESS, u, p));
  mx_dtype want = tr_out_dtype(t, 0);
  if (want != MX_BOOL) TR_TRY(mx_astype(t->mx, &y, y, want));
  return tr_out(t, 0, y);
}

/* --- Multinomial ------------------------------------------------------------------------- */
static bool claim_multinomial(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *x = ir_input(g, n, 0);
  if (x->rank >= 0 && x->rank != 2)
    return op_decline(why, "input has rank %d; Multinomial takes [batch_size, class_size]",
                      x->rank);
  int64_t dtype = ir_attr_int(n, "dtype", IR_INT32);
  if (dtype != IR_INT32 && dtype != IR_INT64)
    return op_decline(why, "dtype must be int32 or int64");
  int64_t samples = ir_attr_int(n, "sample_size", 1);
  if (samples < 1 || samples > INT32_MAX)
    return op_decline(why, "sample_size %lld must be positive", (long long)samples);
  return true;
}

static int translate_multinomial(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), key, y;
  if (mx_ndim(x) != 2) return tr_fail(t, "input must be [batch_size, class_size]");
  TR_TRY(node_key(t, n, &key));
  if (mx_dtype_of(x) != MX_FLOAT32) TR_TRY(mx_astype(t->mx, &x, x, MX_FLOAT32));
  TR_TRY(mx_random_categorical(t->mx, &y, x, 1, (int)ir_attr_int(n, "sample_size", 1), key));
  TR_TRY(mx_astype(t->mx, &y, y, tr_out_dtype(t, 0)));
  return tr_out(t, 0, y);
}

#define RANDOM_NOTE(what)                                                                      \
  what "; MLX's generator (values differ from ONNX Runtime's, the distribution agrees); a seed " \
       "gives the same values every run; eager, never folded"

const op_row ops_random_rows[] = {
    {"", "RandomNormal", 1, 25, claim_random, translate_random, OP_EAGER, 0, RND_NORMAL,
     RANDOM_NOTE("mean, scale, shape, dtype (float types)")},
    {"", "RandomUniform", 1, 25, claim_random, translate_random, OP_EAGER, 0, RND_UNIFORM,
     RANDOM_NOTE("[low, high), shape, dtype (float types)")},
    {"", "RandomNormalLike", 1, 25, claim_random, translate_random, OP_EAGER, 0, RND_NORMAL,
     RANDOM_NOTE("the input's shape; dtype attribute or the input's (float) type")},
    {"", "RandomUniformLike", 1, 25, claim_random, translate_random, OP_EAGER, 0, RND_UNIFORM,
     RANDOM_NOTE("the input's shape; dtype attribute or the input's (float) type")},
    {"", "Bernoulli", 15, 25, claim_bernoulli, translate_bernoulli, OP_EAGER, OP_FLOATS, 0,
     RANDOM_NOTE("uniform draw < p; dtype attribute or the input's type")},
    {"", "Multinomial", 7, 25, claim_multinomial, translate_multinomial, OP_EAGER, OP_FLOATS, 0,
     RANDOM_NOTE("MLX's categorical over each row of log-probabilities; int32/int64")},
    OP_ROWS_END,
};
