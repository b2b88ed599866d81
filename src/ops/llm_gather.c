/*
 * GatherBlockQuantized (com.microsoft): rows of a block-quantized table (the token embedding of
 * exported decoders, often tied to lm_head's MatMulNBits weight) gathered and dequantized,
 * w = (q - zero_point) * scale with one scale and zero point per block of block_size values
 * along quantize_axis. The forms ONNX Runtime's CPU kernel accepts:
 *   - data uint8 holding bits 8, 4 (two values per byte, the even one in the low nibble) or 2
 *     (four per byte, lowest bits first) values, packed along the last axis; gather_axis 0 and
 *     quantize_axis the last axis; zero points uint8, packed like data (default 2^(bits-1));
 *   - data int4 / uint4 (4 bits, unpacked by the EP boundary into one value per element), any
 *     gather_axis and quantize_axis; zero points of data's type (default 0).
 * The table may be a constant or computed (a Reshape of lm_head's weight): the translation is
 * composed of MLX operations on whatever array arrives. Where gather_axis differs from
 * quantize_axis, the rows are gathered first (packed bytes, scales and zero points alike) and
 * only they are unpacked and dequantized; where they coincide (int4 / uint4 only), the whole
 * table is dequantized and then gathered. As ORT's kernel: negative indices count from the
 * end, indices out of range give rows of zeros, (q - zero_point) is taken in integers and
 * multiplied by the scale in float32, rounded once to the scales' type. The block expansion
 * reads concrete shapes, so the translation is shape-keyed.
 */
#include "ops/families.h"
#include "plan/translate.h"

/* A value's static rank, or -1 when unknown (rank 0 counts as unknown: see norm.c). */
static int rank_of(const ir_value *v) { return v && v->rank > 0 ? v->rank : -1; }

static bool pow2_at_least_16(int64_t v) { return v >= 16 && !(v & (v - 1)); }

/* --- claim ------------------------------------------------------------------------------- */
static bool claim_gbq(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *data = ir_input(g, n, 0), *idx = ir_input(g, n, 1), *sc = ir_input(g, n, 2),
                 *zp = ir_input(g, n, 3);
  if (!data || !idx || !sc) return op_decline(why, "GatherBlockQuantized needs data, indices "
                                                   "and scales");
  int64_t bits = ir_attr_int(n, "bits", 4), bs = ir_attr_int(n, "block_size", 128);
  bool u8 = data->elem_type == IR_UINT8;
  if (u8 && bits != 2 && bits != 4 && bits != 8)
    return op_decline(why, "GatherBlockQuantized bits %lld with uint8 data is not supported "
                           "(2, 4 or 8)", (long long)bits);
  if (!u8 && bits != 4)
    return op_decline(why, "GatherBlockQuantized bits %lld with %s data is not supported (4)",
                      (long long)bits, ir_elem_name(data->elem_type));
  if (!pow2_at_least_16(bs))
    return op_decline(why, "GatherBlockQuantized block_size %lld is not a power of 2 from 16",
                      (long long)bs);
  if (idx->elem_type != IR_INT32 && idx->elem_type != IR_INT64)
    return op_decline(why, "GatherBlockQuantized indices of type %s (int32 or int64 expected)",
                      ir_elem_name(idx->elem_type));
  if (sc->elem_type != IR_FLOAT && sc->elem_type != IR_FLOAT16)
    return op_decline(why, "GatherBlockQuantized scales of type %s are not supported (float or "
                           "float16, as ONNX Runtime's CPU kernel)", ir_elem_name(sc->elem_type));
  if (zp && zp->elem_type != data->elem_type)
    return op_decline(why, "GatherBlockQuantized zero_points of type %s, unlike data's %s",
                      ir_elem_name(zp->elem_type), ir_elem_name(data->elem_type));
  int rank = rank_of(data);
  if (rank < 0)
    return op_decline(why, "GatherBlockQuantized data of unknown rank (the axes cannot be "
                           "checked)");
  int64_t ga = ir_attr_int(n, "gather_axis", 0), qa = ir_attr_int(n, "quantize_axis", 1);
  if (ga < -rank || ga >= rank || qa < -rank || qa >= rank)
    return op_decline(why, "GatherBlockQuantized gather_axis %lld or quantize_axis %lld is out "
                           "of range for data of rank %d", (long long)ga, (long long)qa, rank);
  ga = ga < 0 ? ga + rank : ga, qa = qa < 0 ? qa + rank : qa;
  if (u8 && (ga != 0 || qa != rank - 1))
    return op_decline(why, "GatherBlockQuantized with uint8 data needs gather_axis 0 and "
                           "quantize_axis the last axis (%d), as ONNX Runtime defines it (got "
                           "%lld and %lld)", rank - 1, (long long)ga, (long long)qa);
  if (rank_of(sc) > 0 && rank_of(sc) != rank)
    return op_decline(why, "GatherBlockQuantized scales of rank %d, unlike data's %d",
                      rank_of(sc), rank);
  return true;
}

/* --- translation ------------------------------------------------------------------------- */
/* The values of a uint8 array packed `bits` to a byte along its last axis, lowest bits first:
 * the last axis grows by 8 / bits. */
static int unpack_last(tr_ctx *t, mx_array a, int bits, mx_array *out) {
  if (bits == 8) {
    *out = a;
    return MX_OK;
  }
  int per = 8 / bits, nd = mx_ndim(a), shape[MX_MAX_RANK];
  mx_array shifts, mask, v;
  TR_TRY(mx_arange(t->mx, &shifts, 0, 8, bits, MX_UINT8)); /* [per] */
  TR_TRY(mx_scalar_int(t->mx, &mask, (1 << bits) - 1, MX_UINT8));
  int ax = nd;
  TR_TRY(mx_expand_dims(t->mx, &v, a, &ax, 1));
  TR_TRY(mx_binary(t->mx, &v, MX_RIGHT_SHIFT, v, shifts));
  TR_TRY(mx_binary(t->mx, &v, MX_BITWISE_AND, v, mask));
  for (int i = 0; i < nd; i++) shape[i] = mx_dim(a, i);
  shape[nd - 1] *= per;
  return mx_reshape(t->mx, out, v, shape, nd);
}

/* a [.., blocks, ..] (axis q) with each block's value repeated bs times along q, cut to len. */
static int expand_blocks(tr_ctx *t, mx_array a, int q, int bs, int len, mx_array *out) {
  int nd = mx_ndim(a), ax = q + 1, wide[MX_MAX_RANK + 1], merged[MX_MAX_RANK];
  mx_array v;
  TR_TRY(mx_expand_dims(t->mx, &v, a, &ax, 1));
  for (int i = 0, j = 0; i < nd; i++) {
    wide[j++] = mx_dim(a, i);
    if (i == q) wide[j++] = bs;
    merged[i] = i == q ? mx_dim(a, i) * bs : mx_dim(a, i);
  }
  TR_TRY(mx_broadcast_to(t->mx, &v, v, wide, nd + 1));
  TR_TRY(mx_reshape(t->mx, &v, v, merged, nd));
  if (merged[q] < len) return tr_fail(t, "scales hold %d blocks along quantize_axis, too few "
                                         "for %d values", mx_dim(a, q), len);
  return merged[q] == len ? (*out = v, MX_OK) : tr_slice_axis(t, v, q, 0, len, out);
}

/* (values - zero points) * scales in float32, block parameters expanded along axis q to the
 * values' length there. values: unpacked integers; zp: unpacked, or NULL for `zp_default`. */
static int dequantize(tr_ctx *t, mx_array vals, mx_array sc, mx_array zp, int zp_default, int q,
                      int bs, mx_array *out) {
  int len = mx_dim(vals, q);
  mx_array v, s, z;
  TR_TRY(mx_astype(t->mx, &v, vals, MX_INT32));
  if (zp) {
    if (mx_dim(zp, q) > mx_dim(sc, q)) TR_TRY(tr_slice_axis(t, zp, q, 0, mx_dim(sc, q), &zp));
    TR_TRY(mx_astype(t->mx, &z, zp, MX_INT32));
    TR_TRY(expand_blocks(t, z, q, bs, len, &z));
    TR_TRY(mx_binary(t->mx, &v, MX_SUBTRACT, v, z));
  } else if (zp_default) {
    TR_TRY(mx_scalar_int(t->mx, &z, zp_default, MX_INT32));
    TR_TRY(mx_binary(t->mx, &v, MX_SUBTRACT, v, z));
  }
  TR_TRY(mx_astype(t->mx, &v, v, MX_FLOAT32));
  TR_TRY(mx_astype(t->mx, &s, sc, MX_FLOAT32));
  TR_TRY(expand_blocks(t, s, q, bs, len, &s));
  return mx_binary(t->mx, out, MX_MULTIPLY, v, s);
}

/* indices counted from the end when negative, clipped into [0, dim) (*idx, int32), and which
 * were in range (*valid, bool, the indices' shape). */
static int fit_indices(tr_ctx *t, mx_array in, int dim, mx_array *idx, mx_array *valid) {
  mx_array zero, d, neg, lo, hi, top;
  TR_TRY(mx_astype(t->mx, &in, in, MX_INT64));
  TR_TRY(mx_scalar_int(t->mx, &zero, 0, MX_INT64));
  TR_TRY(mx_scalar_int(t->mx, &d, dim, MX_INT64));
  TR_TRY(mx_binary(t->mx, &neg, MX_LESS, in, zero));
  TR_TRY(mx_binary(t->mx, &top, MX_ADD, in, d));
  TR_TRY(mx_where(t->mx, &in, neg, top, in));
  TR_TRY(mx_binary(t->mx, &lo, MX_GREATER_EQUAL, in, zero));
  TR_TRY(mx_binary(t->mx, &hi, MX_LESS, in, d));
  TR_TRY(mx_binary(t->mx, valid, MX_LOGICAL_AND, lo, hi));
  TR_TRY(mx_scalar_int(t->mx, &top, dim > 0 ? dim - 1 : 0, MX_INT64));
  TR_TRY(mx_clip(t->mx, &in, in, zero, top));
  return mx_astype(t->mx, idx, in, MX_INT32);
}

static int translate_gbq(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array data = tr_in(t, 0), sc = tr_in(t, 2), zp = tr_in(t, 3), idx, valid, y;
  int rank = mx_ndim(data), ga, qa, irank = mx_ndim(tr_in(t, 1));
  int bits = (int)ir_attr_int(n, "bits", 4), bs = (int)ir_attr_int(n, "block_size", 128);
  TR_TRY(tr_axis(t, ir_attr_int(n, "gather_axis", 0), rank, &ga));
  TR_TRY(tr_axis(t, ir_attr_int(n, "quantize_axis", 1), rank, &qa));
  if (mx_ndim(sc) != rank || (zp && mx_ndim(zp) != rank))
    return tr_fail(t, "GatherBlockQuantized scales and zero_points must have data's rank %d",
                   rank);
  bool u8 = ir_input(t->g, n, 0)->elem_type == IR_UINT8;
  int zp_default = u8 ? 1 << (bits - 1) : 0;
  TR_TRY(fit_indices(t, tr_in(t, 1), mx_dim(data, ga), &idx, &valid));
  if (ga != qa) {
    /* gather the packed rows and their block parameters, then dequantize only those */
    TR_TRY(mx_take(t->mx, &data, data, idx, ga));
    TR_TRY(mx_take(t->mx, &sc, sc, idx, ga));
    if (zp) TR_TRY(mx_take(t->mx, &zp, zp, idx, ga));
    int q = qa < ga ? qa : qa + irank - 1;
    if (u8) {
      TR_TRY(unpack_last(t, data, bits, &data));
      if (zp) TR_TRY(unpack_last(t, zp, bits, &zp));
    }
    TR_TRY(dequantize(t, data, sc, zp, zp_default, q, bs, &y));
  } else { /* int4 / uint4 only: the whole table, then the rows */
    TR_TRY(dequantize(t, data, sc, zp, zp_default, qa, bs, &y));
    TR_TRY(mx_take(t->mx, &y, y, idx, ga));
  }
  /* rows for indices out of range are zeros */
  int vshape[MX_MAX_RANK], k = 0;
  for (int i = 0; i < ga; i++) vshape[k++] = 1;
  for (int i = 0; i < irank; i++) vshape[k++] = mx_dim(valid, i);
  for (int i = ga + 1; i < rank; i++) vshape[k++] = 1;
  mx_array zero;
  TR_TRY(mx_reshape(t->mx, &valid, valid, vshape, k));
  TR_TRY(mx_scalar(t->mx, &zero, 0.0, MX_FLOAT32));
  TR_TRY(mx_where(t->mx, &y, valid, y, zero));
  tr_note_path(t, TR_PATH_COMPOSED, "gather_dequantize", 0,
               "rows gathered, then unpacked and dequantized");
  return tr_out_cast(t, 0, y);
}

const op_row ops_llm_gather_rows[] = {
    {"com.microsoft", "GatherBlockQuantized", 1, 1, claim_gbq, translate_gbq, OP_SHAPE_KEYED,
     OP_T(IR_UINT8) | OP_T(IR_INT4) | OP_T(IR_UINT4), 0,
     "data uint8 (bits 2/4/8 packed; gather_axis 0, quantize_axis last) or int4/uint4 (any "
     "axes), constant or computed; block_size a power of 2 from 16; float/float16 scales; rows "
     "gathered then dequantized with MLX operations; out-of-range indices give zeros",
     NULL, NULL, 0},
    OP_ROWS_END,
};
