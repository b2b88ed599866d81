/*
 * The operator registry: one table whose rows name (domain, op type, opset range), the claim
 * predicate, the translator and the compile class. The same row answers "can we claim it?" at
 * GetCapability and "how do we run it?" when a plan is built and run, so the two cannot drift.
 * A predicate that declines writes a reason a user can act on. Rows are contributed by one file
 * per operator family (one .c file each in src/ops/) and listed explicitly in registry.c.
 */
#ifndef REGISTRY_H
#define REGISTRY_H

#include "ir/ir.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tr_ctx;
struct op_row;

/* How a node may be compiled (see docs/ARCHITECTURE.md, compile policy). */


typedef enum op_compile_class {
  OP_SHAPELESS,   /* translation depends on ranks only */
  OP_SHAPELESS_GPU, /* shapeless on the GPU; shape-keyed on the CPU device, where float32 takes a
                     * host kernel built for concrete shapes (cpu/math.c), unless host
                     * kernels are switched off */
  OP_SHAPE_KEYED, /* translation reads concrete shapes */
  OP_VALUE_KEYED, /* translation reads a few scalar inputs on the host (If's cond): the plan
                   * computes them before each call and keeps one compiled variant per value
                   * (op_row.key_inputs names them); eager where they cannot be computed first */
  OP_EAGER,       /* translation reads tensor values on the host every run */
  OP_HOST_SHAPE   /* eager, and the output shape follows tensor values (NonZero, Unique, ...):
                   * the partitioner gives such a node a group of its own, so that the nodes
                   * around it form groups that still compile */
} op_compile_class;

/* A decline reason under construction. */
typedef struct op_why {
  char *text;
  size_t len;
} op_why;

typedef bool (*op_claim_fn)(const ir_graph *g, const ir_node *n, const struct op_row *row,
                            op_why why);
typedef int (*op_translate_fn)(struct tr_ctx *t, const ir_node *n, const struct op_row *row);
/* A node's own compile class where it can be better than the row's worst case (e.g. a scatter
 * whose indices are constant need not read them on the host every run). */
typedef op_compile_class (*op_node_class_fn)(const ir_graph *g, const ir_node *n);
/* Work on constant inputs done once when the plan is built (a convolution weight transposed to
 * MLX's layout): stores its results with tr_keep_derived, which the translator reads back with
 * tr_derived instead of recomputing them on every run. */
typedef int (*op_prepare_fn)(struct tr_ctx *t, const ir_node *n, const struct op_row *row);

/* OP_VALUE_KEYED rows: the class of a key input's value, when the row knows that every value of
 * the class gives the same translation, so that one compiled variant (traced for the first value
 * met) serves them all. dims[i] / ranks[i] are the dims of the node's input i where they are
 * known before the call (graph inputs of the group), ranks[i] -1 otherwise. False: no class
 * (the variant is keyed on the value itself). */
typedef bool (*op_key_class_fn)(const ir_node *n, int input, int64_t value,
                                const int *const *dims, const int *ranks, int64_t *klass);

/* Element-type masks: bit (1 << IR_*) per ONNX element type. */
#define OP_T(x) (1u << (x))
#define OP_FLOATS (OP_T(IR_FLOAT) | OP_T(IR_FLOAT16) | OP_T(IR_BFLOAT16))
#define OP_SIGNED (OP_T(IR_INT8) | OP_T(IR_INT16) | OP_T(IR_INT32) | OP_T(IR_INT64))
#define OP_UNSIGNED (OP_T(IR_UINT8) | OP_T(IR_UINT16) | OP_T(IR_UINT32) | OP_T(IR_UINT64))
#define OP_INTS (OP_SIGNED | OP_UNSIGNED)
#define OP_NUMERIC (OP_FLOATS | OP_INTS)
#define OP_ALL (OP_NUMERIC | OP_T(IR_BOOL))
/* float64: rows whose translation MLX computes exactly in float64 (verified to the last bit or
 * within a few ulps by tests) add this bit; claimed only when the EP runs on the CPU device,
 * since MLX's GPU backends have no float64. exp, sigmoid, erf and trigonometry are computed in
 * float32 precision by MLX even for float64, so their rows never carry it. */
#define OP_F64 OP_T(IR_DOUBLE)
/* Raw types: ONNX element types MLX has no dtype for (float8, uint4, int4, float4, uint2, int2:
 * IR_FLOAT8E4M3FN .. IR_FLOAT8E8M0, 17..26 in ORT's numbering). They cross the EP boundary as
 * a carrier array of the logical shape (see ir_carrier_mx_dtype and plan/packed.h): float8 and
 * float4 as their uint8 codes, packed integers unpacked one value per element (int4/int2 as
 * sign-extended int8, uint4/uint2 as uint8). Only rows whose translator understands carriers
 * add these bits (Cast, CastLike, QuantizeLinear, DequantizeLinear); for every other row such
 * a value is declined. */
#define OP_RAW                                                                                   \
  (OP_T(IR_FLOAT8E4M3FN) | OP_T(IR_FLOAT8E4M3FNUZ) | OP_T(IR_FLOAT8E5M2) |                    \
   OP_T(IR_FLOAT8E5M2FNUZ) | OP_T(IR_FLOAT8E8M0) | OP_T(IR_UINT4) | OP_T(IR_INT4) |            \
   OP_T(IR_FLOAT4E2M1) | OP_T(IR_UINT2) | OP_T(IR_INT2))

/* Not an element type: the row takes or makes sequence / optional values (ops/sequence.c).
 * Such values may only live inside one fused group; capability.c's boundary rule
 * (ep/containers.c) declines any that would cross it. */
#define OP_SEQ (1u << 31)

typedef struct op_row {
  const char *domain; /* "" for ai.onnx */
  const char *op_type;
  int since_min, since_max; /* inclusive range of the node's since_version */
  op_claim_fn claim;        /* NULL: the generic checks alone decide */
  op_translate_fn translate;
  op_compile_class compile_class;
  uint32_t dtypes; /* accepted element types of input 0 (the "T" type); 0 = any MLX type */
  int code;        /* family parameter, e.g. the bridge op a shared translator calls */
  const char *note; /* notable declined forms or the reason for the compile class */
  op_node_class_fn node_class; /* optional: per-node compile class, never worse than the row's */
  op_prepare_fn prepare;       /* optional: work on constant inputs done once at plan build */
  uint32_t key_inputs;         /* OP_VALUE_KEYED nodes: the scalar inputs that key a variant,
                                * one bit per input index */
  op_key_class_fn key_class;   /* optional: classes of key values sharing one variant */
} op_row;

/* The compile class of one node: the row's, or the node's own when the row has a hook. */
op_compile_class op_node_compile_class(const op_row *row, const ir_graph *g, const ir_node *n);

#define OP_ROWS_END {NULL, NULL, 0, 0, NULL, NULL, OP_SHAPELESS, 0, 0, NULL, NULL, NULL, 0}

/* What a claim may assume about where the node will run. */
typedef struct op_claim_env {
  bool float64; /* the device computes float64 (MLX's CPU stream) */
} op_claim_env;

/* Finds the row for a node; NULL with a reason when there is none. Runs the generic checks
 * (boundary dtypes MLX can hold, the row's dtype mask) and then the row's predicate. */
const op_row *op_claim(const ir_graph *g, const ir_node *n, const op_claim_env *env, char *why,
                       size_t why_len);
const op_row *op_lookup(const char *domain, const char *op_type, int since_version);

/* Visits every row, in registry order (for docs/OPERATORS.md). */
typedef void (*op_visit_fn)(void *user, const op_row *row);
void op_registry_visit(op_visit_fn fn, void *user);

/* Writes a decline reason and returns false, so predicates can `return op_decline(why, ...)`. */
bool op_decline(op_why why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Shared claim helpers. */
bool op_all_same_type(const ir_graph *g, const ir_node *n, op_why why); /* inputs share a dtype */
bool op_input_is_const(const ir_graph *g, const ir_node *n, int i);
int ir_to_mx_dtype(int elem_type); /* -1 when MLX has no such dtype (float64 maps: see OP_F64) */
/* The MLX dtype carrying a raw type (see OP_RAW): MX_UINT8 or MX_INT8; -1 for any other type. */
int ir_carrier_mx_dtype(int elem_type);
/* ir_to_mx_dtype, else the carrier dtype of a raw type, else -1. */
int ir_value_mx_dtype(int elem_type);

#endif
