/*
 * Packing and unpacking of raw element types at the EP boundary (see packed.h).
 */
#include "plan/packed.h"
#include "ops/registry.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

int packed_bits(int t) {
  switch (t) {
    case IR_UINT4: case IR_INT4: case IR_FLOAT4E2M1: return 4;
    case IR_UINT2: case IR_INT2: return 2;
    case IR_FLOAT8E4M3FN: case IR_FLOAT8E4M3FNUZ: case IR_FLOAT8E5M2: case IR_FLOAT8E5M2FNUZ:
    case IR_FLOAT8E8M0: return 8;
    default: return 0;
  }
}

size_t packed_bytes(int t, size_t count) {
  int bits = packed_bits(t);
  if (!bits) return 0;
  size_t per = (size_t)(8 / bits);
  return (count + per - 1) / per;
}

static bool is_signed(int t) { return t == IR_INT4 || t == IR_INT2; }

void packed_unpack(int t, const uint8_t *src, size_t count, uint8_t *dst) {
  int bits = packed_bits(t);
  if (bits == 8) {
    memcpy(dst, src, count);
    return;
  }
  int per = 8 / bits;
  unsigned mask = (1u << bits) - 1, sign = 1u << (bits - 1);
  for (size_t i = 0; i < count; i++) {
    unsigned v = (src[i / (size_t)per] >> ((i % (size_t)per) * (size_t)bits)) & mask;
    if (is_signed(t) && (v & sign)) v |= ~mask & 0xFFu;
    dst[i] = (uint8_t)v;
  }
}

void packed_pack(int t, const uint8_t *src, size_t count, uint8_t *dst) {
  int bits = packed_bits(t);
  if (bits == 8) {
    memcpy(dst, src, count);
    return;
  }
  size_t per = (size_t)(8 / bits);
  unsigned mask = (1u << bits) - 1;
  memset(dst, 0, packed_bytes(t, count));
  for (size_t i = 0; i < count; i++)
    dst[i / per] |= (uint8_t)((src[i] & mask) << ((i % per) * (size_t)bits));
}

static size_t count_of(const int *shape, int ndim) {
  size_t n = 1;
  for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
  return n;
}

int packed_to_mx(mx_ctx *ctx, mx_array *out, int t, const void *data, size_t bytes,
                 const int *shape, int ndim) {
  int dt = ir_carrier_mx_dtype(t);
  size_t n = count_of(shape, ndim);
  if (dt < 0 || !packed_bits(t)) {
    mx_set_error(ctx, "element type %d has no MLX carrier", t);
    return MX_ERR_ARG;
  }
  if (n && (!data || bytes < packed_bytes(t, n))) {
    mx_set_error(ctx, "%zu bytes hold fewer than %zu values", bytes, n);
    return MX_ERR_ARG;
  }
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf) {
    mx_set_error(ctx, "out of memory");
    return MX_ERR_NOMEM;
  }
  if (n) packed_unpack(t, data, n, buf);
  int rc = mx_from_data(ctx, out, buf, shape, ndim, (mx_dtype)dt);
  free(buf);
  return rc;
}

int packed_from_mx(mx_ctx *ctx, mx_array a, int t, void *dst, size_t dst_bytes) {
  size_t n = count_of(mx_shape(a), mx_ndim(a));
  if (!n) return MX_OK;
  if (dst_bytes < packed_bytes(t, n) || mx_nbytes(a) != n) {
    mx_set_error(ctx, "output of %zu values does not fit %zu bytes", n, dst_bytes);
    return MX_ERR_ARG;
  }
  uint8_t *buf = malloc(n);
  if (!buf) {
    mx_set_error(ctx, "out of memory");
    return MX_ERR_NOMEM;
  }
  int rc = mx_copy_to_host(ctx, a, buf, n);
  if (rc == MX_OK) packed_pack(t, buf, n, dst);
  free(buf);
  return rc;
}
