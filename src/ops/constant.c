/*
 * Constant-producing operators: Constant, ConstantOfShape and Range. Constant turns its one value
 * attribute (a tensor, value_float(s) or value_int(s)) into an MLX array; string and sparse
 * constants are declined. (ONNX Runtime itself turns Constant nodes into initializers when it
 * loads a model, so through ORT this row is rarely reached.) ConstantOfShape fills a shape read on
 * the host with its one-element value tensor (float 0 by default). Range reads its three scalars
 * on the host: integer types compute the length ceil((limit-start)/delta) and the values exactly
 * in integers; float types take the length from the difference in the element type, as ONNX
 * Runtime does. float32 (and float16/bfloat16) values are start + i*delta, as ONNX specifies
 * (ONNX Runtime accumulates start += delta instead, so long ranges differ in the last bits);
 * float64 values are accumulated on the host exactly as ONNX Runtime does, bit for bit. With
 * constant inputs all three are folded once when the plan is built; computed shape or scalar
 * inputs make the group eager for that read. Constant, ConstantOfShape and Range take float64 on
 * the CPU device (OP_F64).
 */
#include "ops/families.h"
#include "plan/translate.h"

#include <math.h>
#include <stdlib.h>

/* --- shared helpers ---------------------------------------------------------------------- */
/* Checks a tensor attribute's dtype and dims and makes an int shape of it. */
static bool tensor_attr_shape(const ir_attr *a, int *shape, int64_t *elems) {
  if (a->tensor_rank < 0 || a->tensor_rank > MX_MAX_RANK) return false;
  *elems = 1;
  for (int i = 0; i < a->tensor_rank; i++) {
    if (a->tensor_dims[i] < 0 || a->tensor_dims[i] > INT32_MAX) return false;
    shape[i] = (int)a->tensor_dims[i];
    *elems *= a->tensor_dims[i];
  }
  int dt = ir_to_mx_dtype(a->tensor_elem_type);
  return dt >= 0 && (size_t)*elems * ir_elem_size(a->tensor_elem_type) == a->tensor_bytes;
}

/* --- Constant ---------------------------------------------------------------------------- */
static const char *const value_attrs[] = {"value", "value_float", "value_floats", "value_int",
                                          "value_ints", NULL};

static bool claim_constant(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)g, (void)r;
  if (ir_find_attr(n, "sparse_value"))
    return op_decline(why, "sparse_value constants are not translated; store the constant as a "
                           "dense 'value' tensor");
  if (ir_find_attr(n, "value_string") || ir_find_attr(n, "value_strings"))
    return op_decline(why, "string constants: MLX has no string dtype");
  int found = 0;
  for (int k = 0; value_attrs[k]; k++) found += ir_find_attr(n, value_attrs[k]) != NULL;
  if (found != 1) return op_decline(why, "exactly one value attribute is required");
  const ir_attr *a = ir_find_attr(n, "value");
  int shape[MX_MAX_RANK];
  int64_t elems;
  if (a && (a->type != IR_ATTR_TENSOR || !tensor_attr_shape(a, shape, &elems)))
    return op_decline(why, "value is a %s tensor of rank %d, which MLX cannot hold",
                      ir_elem_name(a->tensor_elem_type), a->tensor_rank);
  return true;
}

static int translate_constant(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array y;
  const ir_attr *a;
  int shape[MX_MAX_RANK];
  int64_t elems;
  if ((a = ir_find_attr(n, "value"))) {
    if (a->type != IR_ATTR_TENSOR || !tensor_attr_shape(a, shape, &elems))
      return tr_fail(t, "value is a %s tensor MLX cannot hold", ir_elem_name(a->tensor_elem_type));
    TR_TRY(mx_from_data(t->mx, &y, a->tensor_data, shape, a->tensor_rank,
                        (mx_dtype)ir_to_mx_dtype(a->tensor_elem_type)));
  } else if ((a = ir_find_attr(n, "value_float"))) {
    TR_TRY(mx_scalar(t->mx, &y, a->f, MX_FLOAT32));
  } else if ((a = ir_find_attr(n, "value_floats"))) {
    int len = (int)a->count;
    TR_TRY(mx_from_data(t->mx, &y, a->floats, &len, 1, MX_FLOAT32));
  } else if ((a = ir_find_attr(n, "value_int"))) {
    TR_TRY(mx_scalar_int(t->mx, &y, a->i, MX_INT64));
  } else if ((a = ir_find_attr(n, "value_ints"))) {
    int len = (int)a->count;
    TR_TRY(mx_from_data(t->mx, &y, a->ints, &len, 1, MX_INT64));
  } else {
    return tr_fail(t, "no value attribute MLX can hold");
  }
  return tr_out(t, 0, y);
}

/* --- ConstantOfShape --------------------------------------------------------------------- */
static bool claim_constant_of_shape(const ir_graph *g, const ir_node *n, const op_row *r,
                                    op_why why) {
  (void)r;
  const ir_attr *a = ir_find_attr(n, "value");
  int shape[MX_MAX_RANK];
  int64_t elems;
  if (a && (a->type != IR_ATTR_TENSOR || !tensor_attr_shape(a, shape, &elems) || elems != 1))
    return op_decline(why, "value must be a one-element tensor of a dtype MLX holds (got %s)",
                      ir_elem_name(a->tensor_elem_type));
  const ir_value *s = ir_input(g, n, 0);
  if (s && s->elem_type != IR_INT64) return op_decline(why, "the shape input must be int64");
  int64_t len = s ? ir_num_elements(s) : -1;
  if (len > MX_MAX_RANK)
    return op_decline(why, "the shape input has %lld entries; MLX arrays hold at most %d "
                           "dimensions",
                      (long long)len, MX_MAX_RANK);
  return true;
}

static int translate_constant_of_shape(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  int64_t spec[MX_MAX_RANK];
  size_t count;
  TR_TRY(tr_host_ints(t, 0, spec, MX_MAX_RANK, &count));
  int shape[MX_MAX_RANK], vshape[MX_MAX_RANK];
  for (size_t i = 0; i < count; i++) {
    if (spec[i] < 0 || spec[i] > INT32_MAX)
      return tr_fail(t, "shape[%zu] is %lld; dims must lie in 0..%d", i, (long long)spec[i],
                     INT32_MAX);
    shape[i] = (int)spec[i];
  }
  mx_array value, y;
  const ir_attr *a = ir_find_attr(n, "value");
  int64_t elems;
  if (a) {
    if (a->type != IR_ATTR_TENSOR || !tensor_attr_shape(a, vshape, &elems) || elems != 1)
      return tr_fail(t, "value must be a one-element tensor of a dtype MLX holds");
    TR_TRY(mx_from_data(t->mx, &value, a->tensor_data, vshape, 0,
                        (mx_dtype)ir_to_mx_dtype(a->tensor_elem_type)));
  } else {
    TR_TRY(mx_scalar(t->mx, &value, 0.0, MX_FLOAT32));
  }
  TR_TRY(mx_full(t->mx, &y, shape, (int)count, value));
  return tr_out(t, 0, y);
}

/* --- Range ------------------------------------------------------------------------------- */
static bool claim_range(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  return op_all_same_type(g, n, why);
}

/* An integer scalar input, exactly (int16 goes through tr_host_scalar, exact for 16 bits). */
static int host_int(tr_ctx *t, int i, int64_t *v) {
  mx_dtype d = mx_dtype_of(tr_in(t, i));
  if (d == MX_INT32 || d == MX_INT64) {
    size_t count;
    TR_TRY(tr_host_ints(t, i, v, 1, &count));
    return count == 1 ? MX_OK : tr_fail(t, "input %d must hold one value", i);
  }
  double dv;
  TR_TRY(tr_host_scalar(t, i, &dv));
  *v = (int64_t)dv;
  return MX_OK;
}

/* arange(0, len) * delta + start, computed in `work` and cast to `dtype`. */
static int range_values(tr_ctx *t, int64_t len, mx_array start, mx_array delta, mx_dtype work,
                        mx_dtype dtype) {
  mx_array y;
  TR_TRY(mx_arange(t->mx, &y, 0, (double)len, 1, work));
  TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, y, delta));
  TR_TRY(mx_binary(t->mx, &y, MX_ADD, y, start));
  if (mx_dtype_of(y) != dtype) TR_TRY(mx_astype(t->mx, &y, y, dtype));
  return tr_out(t, 0, y);
}

/* float64 as ONNX Runtime computes it: y[0] = start, then start += delta for each next value (a
 * sequential sum, so it is built on the host rather than by a device scan). */
static int range_float64(tr_ctx *t, int len, double start, double delta) {
  double *v = malloc(sizeof(double) * ((size_t)len + 1));
  if (!v) return tr_fail(t, "out of memory");
  for (int i = 0; i < len; i++, start += delta) v[i] = start;
  mx_array y;
  int rc = mx_from_data(t->mx, &y, v, &len, 1, MX_FLOAT64);
  free(v);
  TR_TRY(rc);
  return tr_out(t, 0, y);
}

static int translate_range(tr_ctx *t, const ir_node *n, const op_row *r) {
  mx_dtype dt = mx_dtype_of(tr_in(t, 0));
  mx_array start, delta;
  if (!mx_dtype_is_float(dt)) {
    int64_t s, l, d;
    TR_TRY(host_int(t, 0, &s));
    TR_TRY(host_int(t, 1, &l));
    TR_TRY(host_int(t, 2, &d));
    if (d == 0) return tr_fail(t, "delta is 0");
    __int128 diff = (__int128)l - s, q = diff / d;
    if (diff % d != 0 && (diff > 0) == (d > 0)) q++; /* ceil of the exact quotient */
    if (q < 0) q = 0;
    if (q > INT32_MAX) return tr_fail(t, "the range has %lld elements, more than MLX holds",
                                      (long long)q);
    TR_TRY(mx_scalar_int(t->mx, &start, s, MX_INT64));
    TR_TRY(mx_scalar_int(t->mx, &delta, d, MX_INT64));
    return range_values(t, (int64_t)q, start, delta, MX_INT64, dt);
  }
  double s, l, d;
  TR_TRY(tr_host_scalar(t, 0, &s));
  TR_TRY(tr_host_scalar(t, 1, &l));
  TR_TRY(tr_host_scalar(t, 2, &d));
  if (d == 0) return tr_fail(t, "delta is 0");
  /* ONNX Runtime subtracts in the element type (float32 for the narrower floats) */
  double diff = dt == MX_FLOAT64 ? l - s : (double)((float)l - (float)s);
  double len = ceil(diff / d);
  if (!isfinite(len)) return tr_fail(t, "the range length is not finite");
  if (len < 0) len = 0;
  if (len > INT32_MAX) return tr_fail(t, "the range has %.0f elements, more than MLX holds", len);
  if (dt == MX_FLOAT64) return range_float64(t, (int)len, s, d);
  /* float16/bfloat16 (opset 27, the row's code) compute in float32 unless stash_type is 0. */
  bool stash = dt == MX_FLOAT32 || !r->code || ir_attr_int(n, "stash_type", 1) != 0;
  mx_dtype work = stash ? MX_FLOAT32 : dt;
  TR_TRY(mx_scalar(t->mx, &start, s, work));
  TR_TRY(mx_scalar(t->mx, &delta, d, work));
  return range_values(t, (int64_t)len, start, delta, work, dt);
}

#define RANGE_TYPES (OP_T(IR_FLOAT) | OP_T(IR_INT16) | OP_T(IR_INT32) | OP_T(IR_INT64))

const op_row ops_constant_rows[] = {
    {"", "Constant", 1, 25, claim_constant, translate_constant, OP_SHAPELESS, OP_ALL | OP_F64, 0,
     "value tensor, value_float(s), value_int(s); value_string(s) and sparse_value declined"},
    {"", "ConstantOfShape", 9, 25, claim_constant_of_shape, translate_constant_of_shape,
     OP_SHAPE_KEYED, OP_T(IR_INT64) | OP_F64, 0,
     "the shape input is int64 (float64 in the types is the value's, CPU device only); it is read "
     "on the host: free when constant; a computed shape makes the group eager for that read"},
    {"", "Range", 11, 26, claim_range, translate_range, OP_SHAPE_KEYED, RANGE_TYPES | OP_F64, 0,
     "integer ranges exact; float64 accumulated as ONNX Runtime does; the scalars are read on "
     "the host: free when constant; computed scalars make the group eager for that read"},
    {"", "Range", 27, 27, claim_range, translate_range, OP_SHAPE_KEYED,
     RANGE_TYPES | OP_F64 | OP_T(IR_FLOAT16) | OP_T(IR_BFLOAT16), 1,
     "adds float16/bfloat16 with stash_type; the scalars are read on the host: free when "
     "constant; computed scalars make the group eager for that read"},
    OP_ROWS_END,
};
