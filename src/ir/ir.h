/*
 * The graph IR: a plain-C snapshot of an OrtGraph (nodes, values, attributes, constant
 * initializers) that claims, the partitioner and plans read instead of calling ORT's graph API
 * again and again. A snapshot owns every string and array it holds in one bump arena (ir_graph_free
 * frees it all); constant-initializer data is only borrowed from ORT and is valid while ORT's graph
 * is (the plan builder copies what it keeps). Element types are ONNX's TensorProto codes.
 */
#ifndef IR_H
#define IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct OrtApi OrtApi;
typedef struct OrtGraph OrtGraph;
typedef struct OrtNode OrtNode;
struct ir_graph;

/* ONNX TensorProto element types (the subset with names we use in code). */
enum {
  IR_UNDEFINED = 0, IR_FLOAT = 1, IR_UINT8 = 2, IR_INT8 = 3, IR_UINT16 = 4, IR_INT16 = 5,
  IR_INT32 = 6, IR_INT64 = 7, IR_STRING = 8, IR_BOOL = 9, IR_FLOAT16 = 10, IR_DOUBLE = 11,
  IR_UINT32 = 12, IR_UINT64 = 13, IR_COMPLEX64 = 14, IR_COMPLEX128 = 15, IR_BFLOAT16 = 16,
  /* Types MLX has no dtype for (see OP_RAW). From here on a snapshot holds ORT's numbering
   * (ONNXTensorElementDataType), which departs from TensorProto's after 23: ONNX numbers
   * FLOAT8E8M0 24, UINT2 25 and INT2 26. Attributes that name a type ('to') use ONNX's: convert
   * them with ir_elem_from_onnx. */
  IR_FLOAT8E4M3FN = 17, IR_FLOAT8E4M3FNUZ = 18, IR_FLOAT8E5M2 = 19, IR_FLOAT8E5M2FNUZ = 20,
  IR_UINT4 = 21, IR_INT4 = 22, IR_FLOAT4E2M1 = 23, IR_UINT2 = 24, IR_INT2 = 25,
  IR_FLOAT8E8M0 = 26
};

enum { IR_NONE = -1, IR_DIM_UNKNOWN = -1 };

/* What kind of value a name holds (ORT's ONNXType, with optionals split by what they hold). */
typedef enum ir_kind {
  IR_KIND_UNKNOWN = 0,     /* no type information */
  IR_KIND_TENSOR,
  IR_KIND_SEQUENCE,        /* seq(tensor): elem_type is the tensors' */
  IR_KIND_OPTIONAL_TENSOR, /* optional(tensor): elem_type is the tensor's */
  IR_KIND_OPTIONAL_SEQUENCE, /* optional(seq(tensor)): elem_type is the tensors' */
  IR_KIND_OTHER            /* maps, sparse tensors, nested sequences */
} ir_kind;

typedef struct ir_value {
  const char *name;
  bool is_tensor;  /* false for sequences, maps, optionals */
  ir_kind kind;
  int elem_type;   /* IR_* code (of the tensors inside, for sequences and optionals);
                    * IR_UNDEFINED when unknown */
  int rank;        /* -1 when the shape is unknown */
  const int64_t *dims; /* rank entries, IR_DIM_UNKNOWN for symbolic or unknown dims */
  bool is_constant;    /* a constant initializer */
  const void *const_data; /* borrowed from ORT; NULL unless is_constant */
  size_t const_bytes;
  bool is_graph_input, is_graph_output;
  bool is_outer_scope; /* in a subgraph: a value of an enclosing graph, resolved by name */
  int producer; /* node index or IR_NONE */
  int readers;  /* node inputs in this graph that read the value, a subgraph's implicit ones too */
  int first_readers[2]; /* the nodes behind the first two of those (IR_NONE where fewer): the
                         * pattern matchers' forward step, without a scan of the graph */
} ir_value;

typedef enum ir_attr_type {
  IR_ATTR_UNDEFINED, IR_ATTR_INT, IR_ATTR_FLOAT, IR_ATTR_STRING, IR_ATTR_INTS, IR_ATTR_FLOATS,
  IR_ATTR_STRINGS, IR_ATTR_TENSOR, IR_ATTR_OTHER
} ir_attr_type;

typedef struct ir_attr {
  const char *name;
  ir_attr_type type;
  int64_t i;
  float f;
  const char *s;
  size_t count; /* entries of ints / floats / strings (STRINGS: back to back in s) */
  const int64_t *ints;
  const float *floats;
  /* IR_ATTR_TENSOR: a copy of the tensor (Constant's value) */
  int tensor_elem_type;
  int tensor_rank;
  const int64_t *tensor_dims;
  const void *tensor_data;
  size_t tensor_bytes;
} ir_attr;

typedef struct ir_node {
  const char *name, *op_type, *domain;
  int since_version;
  int n_inputs, n_outputs, n_attrs;
  const int *inputs;  /* value indices; IR_NONE for an omitted optional input */
  const int *outputs; /* value indices; IR_NONE for an omitted optional output */
  const ir_attr *attrs;
  const char *assigned_ep; /* "" unless ORT already assigned the node to an EP */
  const OrtNode *ort_node; /* only valid while ORT's graph is */
  /* Control flow (If, Loop, Scan): the values of this graph the node's subgraphs read by name
   * (ORT's implicit inputs; they order the node after their producers), and the subgraphs
   * themselves with the attribute naming each, snapshotted recursively. */
  int n_implicit, n_subgraphs;
  const int *implicit;
  const struct ir_subgraph *subgraphs;
} ir_node;

/* A subgraph attribute of a node (If's then_branch/else_branch, Loop's and Scan's body). */
typedef struct ir_subgraph {
  const char *attr;
  struct ir_graph *graph;
} ir_subgraph;

typedef struct ir_graph {
  ir_node *nodes;
  int n_nodes;
  ir_value *values;
  int n_values;
  int *graph_inputs, *graph_outputs; /* value indices in ORT's order */
  const char *parent_op; /* op type of the node owning this graph ("" at the top level) */
  int n_graph_inputs, n_graph_outputs;
  struct ir_arena *arena; /* subgraphs share their root snapshot's arena */
  bool owns_arena;        /* false for the subgraphs of a node */
  const struct ir_graph *enclosing; /* for a node's subgraph: the graph holding the node */
} ir_graph;

/* Snapshot ORT's graph. ort_version is the API version `ort` was obtained for: from 24 on, a
 * value with no shape information is told apart from a scalar (rank -1 instead of 0). Returns
 * NULL and writes a message into err on failure. */
ir_graph *ir_snapshot(const OrtApi *ort, int ort_version, const OrtGraph *graph, char *err,
                      size_t err_len);
void ir_graph_free(ir_graph *g);
/* Snapshot one node of a graph on its own (its inputs, outputs and subgraphs), as a one-node
 * graph: used in a subgraph's GetCapability to ask whether the control-flow node that owns the
 * subgraph will be claimed whole. */
ir_graph *ir_snapshot_node(const OrtApi *ort, int ort_version, const OrtNode *node, char *err,
                           size_t err_len);

/* Attribute and value helpers used by claims and translators. */
const ir_attr *ir_find_attr(const ir_node *n, const char *name);
int64_t ir_attr_int(const ir_node *n, const char *name, int64_t fallback);
float ir_attr_float(const ir_node *n, const char *name, float fallback);
const char *ir_attr_string(const ir_node *n, const char *name, const char *fallback);
const ir_value *ir_input(const ir_graph *g, const ir_node *n, int i);  /* NULL if absent */
const ir_value *ir_output(const ir_graph *g, const ir_node *n, int i); /* NULL if absent */
bool ir_has_input(const ir_node *n, int i);
size_t ir_elem_size(int elem_type); /* 0 for types without a fixed size */
const char *ir_elem_name(int elem_type);
/* The IR (ORT) element type of an ONNX TensorProto type code, as attributes spell them. */
int ir_elem_from_onnx(int onnx_type);
/* Reads an integer constant input (int32/int64) into a newly malloc'd int64 array. */
bool ir_const_ints(const ir_value *v, int64_t **vals, size_t *count);
int64_t ir_num_elements(const ir_value *v); /* -1 if unknown */
/* The subgraph of n under attribute attr (NULL when none). */
const ir_graph *ir_subgraph_of(const ir_node *n, const char *attr);
/* The index of the value named `name` in g (IR_NONE when g has none). */
int ir_find_value(const ir_graph *g, const char *name);

#endif
