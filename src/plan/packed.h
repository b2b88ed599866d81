/*
 * Raw element types at the EP boundary (see OP_RAW in ops/registry.h): ORT holds float8 as one
 * code per byte and int4/uint4/float4 (2 per byte) and int2/uint2 (4 per byte) packed, lowest
 * bits first. Inside the MLX graph each is a carrier array of the logical shape, one element per
 * value (ir_carrier_mx_dtype): these helpers convert between the two on the host.
 */
#ifndef PACKED_H
#define PACKED_H

#include "mlx/mx.h"

#include <stddef.h>
#include <stdint.h>

/* Bits per value of a raw type that ORT packs below a byte (4 or 2); 8 for float8; 0 otherwise. */
int packed_bits(int elem_type);
/* Bytes ORT uses for `count` values of a raw type. */
size_t packed_bytes(int elem_type, size_t count);
/* Unpacks `count` values from ORT's bytes into one byte each (signed types sign-extended). */
void packed_unpack(int elem_type, const uint8_t *src, size_t count, uint8_t *dst);
/* Packs `count` carrier bytes into ORT's layout (dst holds packed_bytes(elem_type, count)). */
void packed_pack(int elem_type, const uint8_t *src, size_t count, uint8_t *dst);
/* An MLX carrier array of logical `shape` from ORT's bytes (a copy; `bytes` is ORT's size). */
int packed_to_mx(mx_ctx *ctx, mx_array *out, int elem_type, const void *data, size_t bytes,
                 const int *shape, int ndim);
/* Writes carrier array `a` into ORT's buffer `dst` of `dst_bytes` bytes in ORT's layout. */
int packed_from_mx(mx_ctx *ctx, mx_array a, int elem_type, void *dst, size_t dst_bytes);

#endif
