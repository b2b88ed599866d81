/*
 * Attention spelled in ONNX nodes (MatMul of queries and transposed keys, an optional scale and
 * additive mask, Softmax over the last axis, MatMul by values), as one host kernel on the CPU
 * device. Each part of the work is a block of query rows of one batch item: its scores go into a
 * scratch block that stays in the core's cache, softmax runs over them in place, and the product
 * with the values writes the block's output rows. Run as three kernels, the scores travelled
 * through memory three times, each kernel waited for the previous one, and the batch items were
 * split over the cores three times. When the result is only read by a Transpose that merges the
 * heads ([B, H, M, D] -> [B, M, H, D], as every BERT-style model does next), the kernel writes
 * that layout directly and hands back a transposed view, so the Transpose and the Reshape after
 * it copy nothing. The scratch blocks live after the output in the kernel's own allocation: a
 * kernel cannot report an allocation failure of its own, MLX's allocation can.
 */
#include "cpu/attention.h"

#include "cpu/sgemm/sgemm.h"
#include "cpu/workers.h"
#include "cpu/math.h"
#include "cpu/matmul.h"

#include <limits.h>

/* Score blocks up to this many floats (128 KiB) whole items; longer rows take fewer query rows a
 * block, but at least MIN_BLOCK_ROWS: each block packs the keys again. */
enum { BLOCK_FLOATS = 1 << 15, MIN_BLOCK_ROWS = 48 };

typedef struct at_geometry {
  int m, n, k, d, n_batch;
  int batch[MX_MAX_RANK];
  long items;
  int block_rows, blocks; /* query rows a block, blocks an item */
  int slots;              /* scratch blocks after the output, one a part */
  long out_floats, slot_floats;
  float scale;
  bool masked, heads_last;
} at_geometry;
/* With [batch, heads] batch axes the units go head by head (all of one head's items, then the
 * next head's), so that the threads' shares of them (workers.c: thread i starts at the i-th
 * share) fall on the heads whose columns each thread wrote in the query, key and value products
 * before, split by columns: their rows are in its own cache, not the other core's. */

typedef struct at_job {
  const at_geometry *g;
  const mx_host_tensor *q, *kt, *v, *mask;
  float *out;
  int parts;
} at_job;

/* Where the mask's row `row` of batch item `item` starts: its axes align with the scores'
 * trailing ones ([batch..., M, N]), an axis of size 1 broadcasting. */
static long mask_offset(const mx_host_tensor *mask, const at_geometry *g, long item, int row) {
  long at = cpu_matmul_item_offset(mask, g->n_batch, g->batch, item);
  if (mask->ndim >= 2 && mask->shape[mask->ndim - 2] != 1)
    at += row * mask->strides[mask->ndim - 2];
  return at;
}

/* Unit `unit`'s batch item and its block of query rows [*row0, *row0 + *rows). */
static long unit_item(const at_geometry *g, long unit, int *row0, int *rows) {
  long item = unit / g->blocks;
  if (g->n_batch == 2) { /* heads outermost: see at_geometry */
    long heads = g->batch[1], batch = g->batch[0];
    item = item % batch * heads + item / batch;
  }
  *row0 = (int)(unit % g->blocks) * g->block_rows;
  *rows = g->m - *row0 < g->block_rows ? g->m - *row0 : g->block_rows;
  return item;
}

/* Asks for the cache lines of `runs` runs of `len` floats, run i at base + i * step. */
static void prefetch_runs(const float *base, long runs, long step, long len) {
  for (long i = 0; i < runs; i++)
    for (long at = 0; at < len; at += 16) __builtin_prefetch(base + i * step + at, 0, 2);
}

/* The operands of `unit` into the cache, where they lie in runs (a query row, a key, a value
 * row): the heads' views are strided, one head's row a short run every H x D floats, which the
 * processor's own prefetch did not follow; the products before wrote them, half from the other
 * core. Asked for one unit ahead (the next part's first, at a part's last). MiniLM b1's attention
 * kernel, summed over both threads, runs with and without in turn: scores 469 -> 428 and
 * 459 -> 417 us, the products by the values 284 -> 262 and 278 -> 244 us. */
static void prefetch_unit(const at_job *j, long unit) {
  const at_geometry *g = j->g;
  const mx_host_tensor *q = j->q, *kt = j->kt, *v = j->v;
  int row0, rows;
  long item = unit_item(g, unit, &row0, &rows);
  if (q->strides[q->ndim - 1] == 1)
    prefetch_runs((const float *)q->data + cpu_matmul_item_offset(q, g->n_batch, g->batch, item) +
                      row0 * q->strides[q->ndim - 2],
                  rows, q->strides[q->ndim - 2], g->k);
  if (kt->strides[kt->ndim - 2] == 1)
    prefetch_runs((const float *)kt->data + cpu_matmul_item_offset(kt, g->n_batch, g->batch, item),
                  g->n, kt->strides[kt->ndim - 1], g->k);
  if (v->strides[v->ndim - 1] == 1)
    prefetch_runs((const float *)v->data + cpu_matmul_item_offset(v, g->n_batch, g->batch, item),
                  g->n, v->strides[v->ndim - 2], g->d);
}

static void attention_part(void *arg, int part) {
  const at_job *j = arg;
  const at_geometry *g = j->g;
  const mx_host_tensor *q = j->q, *kt = j->kt, *v = j->v, *mask = j->mask;
  float *scores = j->out + g->out_floats + part * g->slot_floats;
  float *mask_row = scores + (long)g->block_rows * g->n; /* a strided mask row, gathered */
  long ldc = g->heads_last ? (long)g->batch[1] * g->d : g->d, first, last;
  long next_first = 0, next_last = 0; /* the part this thread most likely takes next */
  if (part + 1 < j->parts)
    cpu_workers_tapered_range(g->items * g->blocks, j->parts, part + 1, &next_first, &next_last);
  /* more units than parts (MiniLM b8: 96 heads in 16 parts): a share's last parts are short */
  cpu_workers_tapered_range(g->items * g->blocks, j->parts, part, &first, &last);
  for (long unit = first; unit < last; unit++) {
    if (unit + 1 < last) prefetch_unit(j, unit + 1);
    else if (next_first < next_last) prefetch_unit(j, next_first);
    int row0, rows;
    long item = unit_item(g, unit, &row0, &rows);
    const float *qi = (const float *)q->data +
                      cpu_matmul_item_offset(q, g->n_batch, g->batch, item) +
                      row0 * q->strides[q->ndim - 2];
    cpu_sgemm(rows, g->n, g->k, 1.0f, qi, q->strides[q->ndim - 2], q->strides[q->ndim - 1],
             (const float *)kt->data + cpu_matmul_item_offset(kt, g->n_batch, g->batch, item),
             kt->strides[kt->ndim - 2], kt->strides[kt->ndim - 1], 0.0f, scores, g->n);
    for (int r = 0; r < rows; r++) {
      const float *m = NULL;
      if (g->masked) {
        m = (const float *)mask->data + mask_offset(mask, g, item, row0 + r);
        long step = mask->strides[mask->ndim - 1];
        if (step != 1) {
          for (int i = 0; i < g->n; i++) mask_row[i] = m[i * step];
          m = mask_row;
        }
      }
      cpu_softmax_row(scores + (long)r * g->n, scores + (long)r * g->n, g->n, g->scale, m);
    }
    long out_at = g->heads_last
                      ? item / g->batch[1] * g->m * ldc + item % g->batch[1] * g->d
                      : item * g->m * ldc;
    cpu_sgemm(rows, g->d, g->n, 1.0f, scores, g->n, 1,
             (const float *)v->data + cpu_matmul_item_offset(v, g->n_batch, g->batch, item),
             v->strides[v->ndim - 2], v->strides[v->ndim - 1], 0.0f,
             j->out + out_at + row0 * ldc, ldc);
  }
}

/* in: queries [..., M, K], transposed keys [..., K, N], values [..., N, D], the mask when one was
 * folded in; any strides (views of the heads are not copied first). */
static void attention(const mx_host_tensor *in, int n_in, const mx_host_tensor *out,
                      const void *params) {
  const at_geometry *g = params;
  at_job j = {g, &in[0], &in[1], &in[2], n_in > 3 ? &in[3] : NULL, (float *)out->data, 1};
  long units = g->items * g->blocks;
  j.parts = units < g->slots ? (int)units : g->slots;
  cpu_workers_run(attention_part, &j, j.parts);
}

/* The output's batch axes: q's and kt's broadcast; v's must fit in them. False where they do not
 * broadcast or v would widen them. */
static bool batch_of(mx_array q, mx_array kt, mx_array v, at_geometry *g) {
  int rq = mx_ndim(q), rk = mx_ndim(kt), rank = rq > rk ? rq : rk;
  if (mx_ndim(v) > rank) return false;
  g->n_batch = rank - 2, g->items = 1;
  for (int i = 0; i < g->n_batch; i++) {
    int from_end = rank - i, dq = from_end <= rq ? mx_dim(q, -from_end) : 1;
    int dk = from_end <= rk ? mx_dim(kt, -from_end) : 1;
    int dv = from_end <= mx_ndim(v) ? mx_dim(v, -from_end) : 1;
    if (dq != dk && dq != 1 && dk != 1) return false;
    g->batch[i] = dq > dk ? dq : dk;
    if (dv != 1 && dv != g->batch[i]) return false;
    g->items *= g->batch[i];
  }
  return true;
}

/* The kernel's geometry for float32 q [..., M, K], kt [..., K, N], v [..., N, D]: its blocks,
 * scratch and output, all within an int's count of floats (MLX's shapes are ints). False where
 * it does not apply. */
static bool geometry_of(mx_array q, mx_array kt, mx_array v, at_geometry *g) {
  mx_array all[3] = {q, kt, v};
  for (int i = 0; i < 3; i++)
    if (mx_dtype_of(all[i]) != MX_FLOAT32 || mx_ndim(all[i]) < 2) return false;
  *g = (at_geometry){mx_dim(q, -2), mx_dim(kt, -1), mx_dim(q, -1), mx_dim(v, -1)};
  if (mx_dim(kt, -2) != g->k || mx_dim(v, -2) != g->n || g->m <= 0 || g->n <= 0 || g->k <= 0 ||
      g->d <= 0 || !batch_of(q, kt, v, g) || g->items <= 0)
    return false;
  int threads = cpu_workers_available();
  long cap = BLOCK_FLOATS / g->n > MIN_BLOCK_ROWS ? BLOCK_FLOATS / g->n : MIN_BLOCK_ROWS;
  long blocks = (g->m + cap - 1) / cap;
  /* enough blocks that every core has one, when the items alone are fewer */
  if (g->items * blocks < threads) blocks = (threads + g->items - 1) / g->items;
  if (blocks > g->m) blocks = g->m;
  g->block_rows = (int)((g->m + blocks - 1) / blocks);
  g->blocks = (g->m + g->block_rows - 1) / g->block_rows;
  double units = (double)g->items * g->blocks, m = g->m;
  int parts = cpu_workers_parts(); /* a scratch block a part, a few parts a thread (workers.h) */
  g->slots = units < parts ? (int)units : parts;
  double out = (double)g->items * m * g->d, slot = ((double)g->block_rows + 1) * g->n;
  if (out + g->slots * slot > INT_MAX || (double)g->items * m * g->n > (double)LONG_MAX / 2)
    return false;
  g->out_floats = (long)out, g->slot_floats = (long)slot;
  return true;
}

bool cpu_attention_applies(const tr_ctx *t, mx_array q, mx_array kt, mx_array v) {
  at_geometry g;
  return t->mx->device == MX_DEVICE_CPU && t->trace != TR_TRACE_SHAPELESS &&
         cpu_host_kernels_enabled() && cpu_sgemm_own_serves() && q && kt && v &&
         geometry_of(q, kt, v, &g);
}

int cpu_attention_build(tr_ctx *t, mx_array q, mx_array kt, mx_array v, mx_array mask,
                        float scale, bool heads_last, mx_array *y) {
  at_geometry g;
  if (!geometry_of(q, kt, v, &g)) return tr_fail(t, "attention's operands do not fit its kernel");
  g.scale = scale, g.masked = mask != NULL;
  g.heads_last = heads_last && g.n_batch == 2;
  int size = (int)(g.out_floats + g.slots * g.slot_floats);
  mx_array ins[4] = {q, kt, v, mask}, flat;
  TR_TRY(mx_host_kernel(t->mx, &flat, "attention", attention, &g, sizeof g, ins, mask ? 4 : 3,
                        &size, 1, MX_FLOAT32, MX_HOST_STRIDED_INPUTS));
  int start = 0, stop = (int)g.out_floats, step = 1, shape[MX_MAX_RANK];
  TR_TRY(mx_slice(t->mx, y, flat, &start, &stop, &step, 1));
  for (int i = 0; i < g.n_batch; i++) shape[i] = g.batch[i];
  shape[g.n_batch] = g.m, shape[g.n_batch + 1] = g.d;
  if (!g.heads_last) return mx_reshape(t->mx, y, *y, shape, g.n_batch + 2);
  static const int merged_to_split[4] = {0, 2, 1, 3};
  int merged[4] = {g.batch[0], g.m, g.batch[1], g.d};
  TR_TRY(mx_reshape(t->mx, y, *y, merged, 4));
  return mx_transpose(t->mx, y, *y, merged_to_split, 4);
}
