/*
 * Block-quantized weights of exported decoders (com.microsoft): MatMulNBits, A @ dequant(B)^T
 * with B's 4- or 8-bit values packed along K in blocks of block_size, each block with a scale
 * and a zero point: w = (q - zero_point) * scale.
 *
 * B, scales and zero points are constant initializers in every export, so the work of fitting
 * them to MLX is done once, when the plan is built (the row's prepare hook), on the host:
 *   - block_size 32..256: MLX's affine quantized matmul (w = scale * q + bias per group) takes
 *     the same bits. ORT packs values little-end first (two 4-bit values per byte, the even k in
 *     the low nibble; one 8-bit value per byte), which is exactly MLX's order inside a uint32 word
 *     read from little-endian memory, so B's bytes become the words unchanged; the zero point
 *     folds into the bias (bias = -scale * zero_point); a block of 256 is two MLX groups of 128
 *     sharing its scale and bias. A K that is not a multiple of block_size leaves the last block
 *     padded (ORT's layout): A is padded with zeros to match, so the padding adds nothing.
 *   - block_size 16 (no MLX group that small): B is dequantized once into a dense float32
 *     [K, N] matrix and the node is a plain matrix product.
 * Both compute in float32 (float16 A widened, the result rounded once): at least as accurate
 * as ORT's accuracy_level 0 whatever the node's accuracy_level asks (a lower accuracy is only
 * a permission). g_idx is claimed when it is the trivial k / block_size (and the zero points are
 * not packed uint8, which ORT's kernel ignores on that path); bias is added last.
 */
#include "ops/families.h"
#include "plan/translate.h"

#include <stdlib.h>
#include <string.h>

/* The node's packing attributes. */
typedef struct mnb_dims {
  int k, n, bits, bs, blocks, kpad;
} mnb_dims;

static mnb_dims dims_of(const ir_node *n) {
  mnb_dims d = {(int)ir_attr_int(n, "K", 0), (int)ir_attr_int(n, "N", 0),
                (int)ir_attr_int(n, "bits", 4), (int)ir_attr_int(n, "block_size", 0), 0, 0};
  if (d.bs > 0) d.blocks = (d.k + d.bs - 1) / d.bs, d.kpad = d.blocks * d.bs;
  return d;
}

/* --- MatMulNBits ------------------------------------------------------------------------- */
static bool const_input(const ir_graph *g, const ir_node *n, int i, const char *what,
                        op_why why) {
  if (!ir_has_input(n, i) || op_input_is_const(g, n, i)) return true;
  return op_decline(why, "MatMulNBits %s is not a constant initializer (computed, or fed at run "
                         "time); only constant ones (as exporters write them) are re-packed for "
                         "MLX", what);
}

/* g_idx[k] == k / block_size for every k: the blocks are the contiguous ones. */
static bool trivial_g_idx(const ir_value *v, mnb_dims d) {
  int64_t *idx;
  size_t count;
  if (!ir_const_ints(v, &idx, &count)) return false;
  bool ok = count == (size_t)d.k;
  for (size_t i = 0; ok && i < count; i++) ok = idx[i] == (int64_t)i / d.bs;
  free(idx);
  return ok;
}

static bool claim_mnb(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  mnb_dims d = dims_of(n);
  if (d.bits != 4 && d.bits != 8)
    return op_decline(why, "MatMulNBits bits %d is not supported (4 and 8 are)", d.bits);
  if (d.bs < 16 || d.bs > 256 || (d.bs & (d.bs - 1)))
    return op_decline(why, "MatMulNBits block_size %d is not supported (a power of 2 from 16 to "
                           "256)", d.bs);
  if (d.k <= 0 || d.n <= 0)
    return op_decline(why, "MatMulNBits needs positive K and N attributes (K %d, N %d)", d.k,
                      d.n);
  int64_t prepacked = ir_attr_int(n, "weight_prepacked", 0);
  if (prepacked)
    return op_decline(why, "MatMulNBits weight_prepacked %lld (a CUDA layout) is not supported",
                      (long long)prepacked);
  if (!const_input(g, n, 1, "B", why) || !const_input(g, n, 2, "scales", why) ||
      !const_input(g, n, 3, "zero_points", why))
    return false;
  const ir_value *a = ir_input(g, n, 0), *s = ir_input(g, n, 2), *z = ir_input(g, n, 3);
  if (a && s && s->elem_type != a->elem_type)
    return op_decline(why, "MatMulNBits scales are %s, unlike A's %s", ir_elem_name(s->elem_type),
                      ir_elem_name(a->elem_type));
  if (z && z->elem_type != IR_UINT8 && (!s || z->elem_type != s->elem_type))
    return op_decline(why, "MatMulNBits zero_points of type %s are not supported (uint8, or "
                           "the scales' type)", ir_elem_name(z->elem_type));
  const ir_value *gi = ir_input(g, n, 4);
  if (gi && !trivial_g_idx(gi, d))
    return op_decline(why, "MatMulNBits g_idx that reorders K (act-order) is not supported; "
                           "only the trivial k / block_size");
  /* ORT's CPU kernel reads no packed zero points on its g_idx path (it uses the implicit
   * 2^(bits-1)): rather than give another answer than the reference, such nodes stay there */
  if (gi && z && z->elem_type == IR_UINT8)
    return op_decline(why, "MatMulNBits with g_idx and packed uint8 zero_points is not "
                           "claimed: ONNX Runtime's kernel ignores those zero points there; drop "
                           "the trivial g_idx input to run it on MLX");
  int64_t want = (int64_t)d.n * d.blocks * (d.bs * d.bits / 8);
  const ir_value *b = ir_input(g, n, 1);
  int64_t have = b ? ir_num_elements(b) : -1;
  if (have >= 0 && have != want)
    return op_decline(why, "MatMulNBits B holds %lld bytes; N x ceil(K / block_size) x "
                           "block_size * bits / 8 = %lld expected", (long long)have,
                      (long long)want);
  return true;
}

/* Input i (a constant) as float32 values on the host, count of them checked. */
static int host_floats(tr_ctx *t, int i, size_t count, const float **out) {
  mx_array a = tr_in(t, i);
  if (mx_size(a) != count)
    return tr_fail(t, "MatMulNBits input %d holds %zu values, %zu expected", i, mx_size(a),
                   count);
  if (mx_dtype_of(a) != MX_FLOAT32) TR_TRY(mx_astype(t->mx, &a, a, MX_FLOAT32));
  const void *p;
  TR_TRY(mx_host_data(t->mx, a, &p));
  *out = p;
  return MX_OK;
}

/* The zero point of every (row, block), as float: packed uint8, float, or the implicit
 * 2^(bits-1). */
static int zero_points(tr_ctx *t, mnb_dims d, float *zp) {
  size_t cells = (size_t)d.n * d.blocks;
  mx_array z = tr_in(t, 3);
  if (!z) {
    for (size_t i = 0; i < cells; i++) zp[i] = (float)(1 << (d.bits - 1));
    return MX_OK;
  }
  if (mx_dtype_of(z) != MX_UINT8) {
    const float *f;
    TR_TRY(host_floats(t, 3, cells, &f));
    memcpy(zp, f, cells * sizeof *zp);
    return MX_OK;
  }
  size_t row_bytes = ((size_t)d.blocks * d.bits + 7) / 8;
  if (mx_size(z) != (size_t)d.n * row_bytes)
    return tr_fail(t, "MatMulNBits zero_points hold %zu bytes, %zu expected", mx_size(z),
                   (size_t)d.n * row_bytes);
  const void *p;
  TR_TRY(mx_host_data(t->mx, z, &p));
  const uint8_t *zb = p;
  for (int r = 0; r < d.n; r++)
    for (int b = 0; b < d.blocks; b++) {
      const uint8_t *row = zb + (size_t)r * row_bytes;
      zp[(size_t)r * d.blocks + b] =
          d.bits == 8 ? row[b] : (float)((row[b / 2] >> ((b % 2) * 4)) & 0xF);
    }
  return MX_OK;
}

/* block_size 16: B dequantized to a dense [K, N] float32 matrix (out[0]). */
static int make_dense(tr_ctx *t, mnb_dims d, const uint8_t *bq, const float *sc,
                      const float *zp, mx_array *out) {
  float *w = malloc((size_t)d.k * d.n * sizeof *w);
  if (!w) return tr_fail(t, "out of memory dequantizing MatMulNBits B");
  size_t row_bytes = (size_t)d.kpad * d.bits / 8;
  for (int r = 0; r < d.n; r++)
    for (int k = 0; k < d.k; k++) {
      const uint8_t *row = bq + (size_t)r * row_bytes;
      int q = d.bits == 8 ? row[k] : (row[k / 2] >> ((k % 2) * 4)) & 0xF;
      size_t cell = (size_t)r * d.blocks + k / d.bs;
      w[(size_t)k * d.n + r] = ((float)q - zp[cell]) * sc[cell];
    }
  int shape[2] = {d.k, d.n};
  int rc = mx_from_data(t->mx, &out[0], w, shape, 2, MX_FLOAT32);
  free(w);
  return rc;
}

/* block_size 32..256: B's bytes as MLX's uint32 words (out[0]), per-group float32 scales
 * (out[1]) and biases -scale * zero_point (out[2]), a block of 256 as two groups of 128. */
static int make_quantized(tr_ctx *t, mnb_dims d, const uint8_t *bq, const float *sc,
                          const float *zp, mx_array *out) {
  int rep = d.bs > 128 ? d.bs / 128 : 1, groups = d.blocks * rep;
  size_t cells = (size_t)d.n * groups;
  float *s = malloc(cells * sizeof *s), *bias = malloc(cells * sizeof *bias);
  int rc = MX_OK;
  if (!s || !bias) rc = tr_fail(t, "out of memory re-packing MatMulNBits B");
  for (size_t c = 0; rc == MX_OK && c < cells; c++) {
    size_t cell = (c / groups) * d.blocks + (c % groups) / rep;
    s[c] = sc[cell];
    bias[c] = -sc[cell] * zp[cell];
  }
  /* the words are B's bytes: ORT's order is MLX's on a little-endian host */
  int wshape[2] = {d.n, d.kpad * d.bits / 32}, gshape[2] = {d.n, groups};
  if (rc == MX_OK) rc = mx_from_data(t->mx, &out[0], bq, wshape, 2, MX_UINT32);
  if (rc == MX_OK) rc = mx_from_data(t->mx, &out[1], s, gshape, 2, MX_FLOAT32);
  if (rc == MX_OK) rc = mx_from_data(t->mx, &out[2], bias, gshape, 2, MX_FLOAT32);
  free(s);
  free(bias);
  return rc;
}

/* The re-packed operands (out[0..2]; out[1], out[2] NULL for the dense form). */
static int repack(tr_ctx *t, const ir_node *n, mx_array *out) {
  mnb_dims d = dims_of(n);
  out[0] = out[1] = out[2] = NULL;
  mx_array b = tr_in(t, 1);
  size_t cells = (size_t)d.n * d.blocks, bytes = (size_t)d.n * d.kpad * d.bits / 8;
  if (mx_dtype_of(b) != MX_UINT8 || mx_size(b) != bytes)
    return tr_fail(t, "MatMulNBits B holds %zu values, %zu bytes expected", mx_size(b), bytes);
  const void *bq;
  const float *sc;
  TR_TRY(mx_host_data(t->mx, b, &bq));
  TR_TRY(host_floats(t, 2, cells, &sc));
  float *zp = malloc(cells * sizeof *zp);
  if (!zp) return tr_fail(t, "out of memory reading MatMulNBits zero points");
  int rc = zero_points(t, d, zp);
  if (rc == MX_OK)
    rc = d.bs < 32 ? make_dense(t, d, bq, sc, zp, out) : make_quantized(t, d, bq, sc, zp, out);
  free(zp);
  return rc;
}

static int prepare_mnb(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array ops[3];
  TR_TRY(repack(t, n, ops));
  for (int i = 0; i < 3; i++)
    if (ops[i]) TR_TRY(tr_keep_derived(t, i, ops[i]));
  return MX_OK;
}

static int translate_mnb(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mnb_dims d = dims_of(n);
  mx_array x = tr_in(t, 0), w = tr_derived(t, 0), s = tr_derived(t, 1), bias = tr_derived(t, 2);
  mx_array y, add = tr_in(t, 5);
  int rank = mx_ndim(x);
  if (!w) { /* not prepared (a node folded at plan build): re-pack for this translation */
    mx_array ops[3];
    TR_TRY(repack(t, n, ops));
    w = ops[0], s = ops[1], bias = ops[2];
  }
  if (rank < 1 || mx_dim(x, -1) != d.k)
    return tr_fail(t, "MatMulNBits A's last dimension must be K = %d", d.k);
  if (mx_dtype_of(x) != MX_FLOAT32) TR_TRY(mx_astype(t->mx, &x, x, MX_FLOAT32));
  if (rank == 1) {
    static const int ax0[1] = {0};
    TR_TRY(mx_expand_dims(t->mx, &x, x, ax0, 1));
  }
  if (!s) {
    TR_TRY(mx_matmul(t->mx, &y, x, w));
  } else {
    if (d.kpad != d.k) {
      int lo[MX_MAX_RANK] = {0}, hi[MX_MAX_RANK] = {0}, nd = mx_ndim(x);
      mx_array zero;
      hi[nd - 1] = d.kpad - d.k;
      TR_TRY(tr_scalar(t, &zero, 0.0, MX_FLOAT32));
      TR_TRY(mx_pad(t->mx, &x, x, lo, hi, nd, zero));
    }
    TR_TRY(mx_quantized_matmul(t->mx, &y, x, w, s, bias, d.bs > 128 ? 128 : d.bs, d.bits));
  }
  if (rank == 1) {
    static const int ax0[1] = {0};
    TR_TRY(mx_squeeze(t->mx, &y, y, ax0, 1));
  }
  if (add) {
    if (mx_dtype_of(add) != MX_FLOAT32) TR_TRY(mx_astype(t->mx, &add, add, MX_FLOAT32));
    TR_TRY(mx_binary(t->mx, &y, MX_ADD, y, add));
  }
  if (s)
    tr_note_path(t, TR_PATH_MLX_FUSED, "quantized_matmul", 0, "MLX quantized matmul");
  else
    tr_note_path(t, TR_PATH_COMPOSED, "dequantized_matmul", 0,
                 "dequantized at plan build, dense matmul");
  return tr_out_cast(t, 0, y);
}

const op_row ops_llm_quant_rows[] = {
    {"com.microsoft", "MatMulNBits", 1, 1, claim_mnb, translate_mnb, OP_SHAPE_KEYED,
     OP_T(IR_FLOAT) | OP_T(IR_FLOAT16), 0,
     "bits 4/8, block_size 16-256; B, scales, zero_points constant (re-packed at plan build): "
     "MLX quantized matmul (block 16: dequantized once, dense matmul); float32 compute; g_idx "
     "only trivial (and not with packed zero points); bits 2 declined",
     NULL, prepare_mnb, 0},
    OP_ROWS_END,
};
