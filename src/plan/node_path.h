/*
 * The path a node's translation took, as machine-readable identifiers: what kind of computation
 * produces its result (its own host kernel, the epilogue of its producer's kernel, a later node's
 * kernel, one fused MLX operation, or a composition the EP chose), a short stable id of that
 * kernel or composition, and which neighbouring nodes' work the kernel took in. Translators record
 * it with tr_note_path (translate.h); the run record (stats_file, src/ep/stats.c) writes it per
 * node for tools and tests, and the verbose summary prints the note beside it for people. Tests
 * read the identifiers, never the note.
 */
#ifndef NODE_PATH_H
#define NODE_PATH_H

typedef enum tr_path_kind {
  TR_PATH_NONE,        /* nothing noted: MLX's plain operations */
  TR_PATH_HOST_KERNEL, /* one host kernel of its own (CPU device): kernel names it */
  TR_PATH_EPILOGUE,    /* applied by the kernel computing its input to the rows it has just
                        * finished: kernel names the epilogue (gelu, swish, chain, bias) */
  TR_PATH_INSIDE,      /* computed by a later node's host kernel, its own never evaluated:
                        * kernel names that kernel (gelu, swish) */
  TR_PATH_MLX_FUSED,   /* one fused MLX operation or custom kernel (sdpa, addmm, gpu_scan) */
  TR_PATH_COMPOSED,    /* MLX operations composed in a form the EP chose (kernel: which, or
                        * NULL for the operator's composition) */
} tr_path_kind;

/* What a node's kernel took in besides the node itself (bits of tr_node_path.folds). */
enum {
  TR_FOLD_BIAS = 1u << 0,     /* a bias add (Conv's B, Gemm's C row) */
  TR_FOLD_SCALE = 1u << 1,    /* a constant scale of its input (attention scores, Swish's beta) */
  TR_FOLD_MASK = 1u << 2,     /* an additive mask */
  TR_FOLD_RESIDUAL = 1u << 3, /* the Add (residual sum) that computes its input */
  TR_FOLD_MERGE_HEADS = 1u << 4, /* the Transpose/Reshape that merges attention heads after it */
  TR_FOLD_COUNT = 5
};

typedef struct tr_node_path {
  tr_path_kind kind;
  const char *kernel; /* a string literal: a short id (softmax, conv_im2col), or NULL */
  unsigned folds;     /* TR_FOLD_* bits */
  const char *note;   /* a string literal for the verbose summary */
} tr_node_path;

/* The identifiers as the run record writes them ("host_kernel", "bias"). */
const char *tr_path_kind_name(tr_path_kind kind);
const char *tr_fold_name(int bit); /* bit: 0 .. TR_FOLD_COUNT - 1 */

#endif
