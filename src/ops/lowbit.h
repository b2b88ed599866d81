/*
 * The codec of raw element types (see OP_RAW in ops/registry.h) inside the MLX graph: decoding a
 * carrier array (float8/float4 codes as uint8, int4/int2 values as int8, uint4/uint2 values as
 * uint8) to float32, and encoding float32 into a carrier as ONNX's Cast does.
 */
#ifndef LOWBIT_H
#define LOWBIT_H

#include "mlx/mx.h"

#include <stdbool.h>

/* True for the raw types whose carrier holds codes (float8 17..20 and 24, float4 23). */
bool lowbit_is_float(int elem_type);
/* The value of one code of a float8/float4 type (NaN for NaN codes). */
float lowbit_code_value(int elem_type, unsigned code);
/* Carrier -> float32: codes through a table gathered with take (exact), integers by astype. */
int lowbit_decode(mx_ctx *ctx, mx_array *out, mx_array carrier, int elem_type);
/* float32 -> carrier. float8/float4: round to nearest, ties to the even code; NaN to the
 * format's NaN with the input's sign (0x7F/0xFF for e4m3fn and e5m2, 0x80 for the fnuz types,
 * as ONNX Runtime writes them; float4 as the ONNX reference does); +-inf and overflow clamp to
 * +-max when `saturate` (float4 always), else become +-inf (e5m2) or NaN, by the ONNX rule
 * (ORT's CPU kernel departs from it for a few values just past the largest finite one).
 * float8e8m0: round_mode "up", "down" or "nearest" on the float32 bits, as the ONNX reference.
 * int4/uint4/int2/uint2: rounded half away from zero (as ONNX Runtime's CPU kernel), NaN and
 * inf to 0, then the low bits kept (wrapping, as integer narrowing does). x is float32, or for
 * the float8/float4 formats any float type (its own bits give the sign, NaN's included). */
int lowbit_encode(mx_ctx *ctx, mx_array *out, mx_array x, int elem_type, bool saturate,
                  const char *round_mode);
/* Any MLX array -> carrier of elem_type (float inputs through float32, integers wrap). */
int lowbit_from(mx_ctx *ctx, mx_array *out, mx_array x, int elem_type, bool saturate,
                const char *round_mode);

/* Cast between ONNX element types `from` and `to` where either is raw (carriers in and out). */
int lowbit_cast(mx_ctx *ctx, mx_array *out, mx_array x, int from, int to, bool saturate,
                const char *round_mode);

#endif
