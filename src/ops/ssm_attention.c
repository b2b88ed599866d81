/*
 * LinearAttention (com.microsoft, and ai.onnx from opset 27): recurrent linear attention with a
 * dk x dv matrix state per head, under four update rules (linear, gated, delta, gated_delta).
 * The recurrence is composed of MLX ops exactly as written, one time step after another: decay
 * the state by exp(g) (gated rules; g per head or per key dim), r = k^T S, d = beta (v - r) for
 * delta rules (else d = v), S += k (outer) d, o = scale q^T S. No chunked/WY shortcut is taken:
 * zero or weak decay and unnormalised keys are legal. Key heads (Hk dividing H) are repeated to
 * the H states; with Hq > H each state is read by Hq / H query heads, with Hq < H each query head
 * reads H / Hq states. Arithmetic is float32; the state carried between steps has the state
 * dtype (past_state's, else present_state's, else the query's) except that for dk in 257..512
 * with bfloat16 anywhere it stays float32 and only stores are rounded; the ai.onnx form always
 * carries float32 (its function body computes in float32). state_window W keeps the
 * states after the last min(T, W) steps, oldest first, zero-padded in front, and reads slot
 * W - 1 of the past. T (the unroll length) is read from the shapes, so the row compiles keyed on
 * shape. On the GPU (MLX's CUDA backend), la_fast_path() runs the whole recurrence as one
 * custom kernel instead (ssm_attention_cuda.c: one warp per state column, time scanned in
 * registers), for T > 1 and dk <= 512; elsewhere (CPU, Metal: creating the kernel fails
 * cleanly there) and with ONNXRUNTIME_EP_MLX_NO_LINEAR_ATTENTION_SCAN=1 this composition runs.
 * Each node notes its path (mlx_fused "gpu_scan", or composed) for the run record.
 */
#include "ops/families.h"
#include "ops/ssm_attention_cuda.h"
#include "plan/translate.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { LA_LINEAR, LA_GATED, LA_DELTA, LA_GATED_DELTA, LA_UNKNOWN };
enum { LA_MAX_WINDOW = 8 };
enum { LA_IN_Q, LA_IN_K, LA_IN_V, LA_IN_PAST, LA_IN_DECAY, LA_IN_BETA };

static int la_rule(const ir_node *n) {
  static const char *names[] = {"linear", "gated", "delta", "gated_delta"};
  const char *s = ir_attr_string(n, "update_rule", "gated_delta");
  for (int i = 0; i < LA_UNKNOWN; i++)
    if (strcmp(s, names[i]) == 0) return i;
  return LA_UNKNOWN;
}

static bool la_gated(int rule) { return rule == LA_GATED || rule == LA_GATED_DELTA; }
static bool la_delta(int rule) { return rule == LA_DELTA || rule == LA_GATED_DELTA; }
static bool la_contrib(const ir_node *n) { return strcmp(n->domain, "com.microsoft") == 0; }

static bool la_is_float(int t) { return t == IR_FLOAT || t == IR_FLOAT16 || t == IR_BFLOAT16; }

/* dims[i] of v equals want where both are known. */
static bool la_dim_ok(const ir_value *v, int i, int64_t want) {
  return v->rank <= i || v->dims[i] < 0 || want < 0 || v->dims[i] == want;
}

/* A [B, T, X] input (decay or beta): type, rank, batch/time agreement, last dim in {a, b}. */
static bool la_aux_ok(const ir_value *v, const ir_value *q, const char *what, int64_t a,
                      int64_t b, const char *shapes, op_why why) {
  if (v->elem_type != q->elem_type)
    return op_decline(why, "%s must have the query's type %s (is %s)", what,
                      ir_elem_name(q->elem_type), ir_elem_name(v->elem_type));
  if (v->rank != 3) return op_decline(why, "%s must be %s (has rank %d)", what, shapes, v->rank);
  if (!la_dim_ok(v, 0, q->dims[0]) || !la_dim_ok(v, 1, q->dims[1]))
    return op_decline(why, "%s's batch and time dims must match the query's", what);
  int64_t last = v->dims[2];
  if (last >= 0 && last != a && last != b)
    return op_decline(why, "%s must be %s (last dim is %lld)", what, shapes, (long long)last);
  return true;
}

static bool la_state_ok(const ir_value *s, const int64_t *want, int rank, const char *what,
                        op_why why) {
  if (s->rank != rank)
    return op_decline(why, "%s must have rank %d (has %d)", what, rank, s->rank);
  for (int i = 0; i < rank; i++)
    if (!la_dim_ok(s, i, want[i]))
      return op_decline(why, "%s dim %d is %lld, expected %lld", what, i, (long long)s->dims[i],
                        (long long)want[i]);
  return true;
}

/* --- translation helpers ------------------------------------------------------------------ */
typedef struct la_geom {
  int rule, b, t, hq, hk, h, dk, dv, group, window;
  float scale;
  mx_dtype out_dtype, state_dtype, carry_dtype; /* carry: the state kept between steps */
} la_geom;

/* Working inputs, time-major and float32: q [T,B,H,G,dk], k [T,B,H,dk], v [T,B,H,1,dv],
 * eg = exp(decay) [T,B,H,dk|1,1], beta [T,B,H|1,1,1]. */
typedef struct la_inputs {
  mx_array q, k, v, eg, beta;
} la_inputs;

/* Run-time shape checks shared by both paths: decay [B, T, H | H*dk] (per_key: H*dk) for gated
 * rules, beta [B, T, 1 | H] (hb: its last dim) for delta rules. */
static int la_aux_shapes(tr_ctx *t, const la_geom *g, bool *per_key, int *hb) {
  int B = g->b, T = g->t, H = g->h;
  *per_key = false;
  *hb = 1;
  if (la_gated(g->rule)) {
    mx_array d = tr_in(t, LA_IN_DECAY);
    if (!d || mx_ndim(d) != 3 || mx_dim(d, 0) != B || mx_dim(d, 1) != T)
      return tr_fail(t, "decay must be [B=%d, T=%d, H or H*dk]", B, T);
    if (mx_dim(d, 2) != H && mx_dim(d, 2) != H * g->dk)
      return tr_fail(t, "decay's last dim %d is neither H = %d nor H*dk = %d", mx_dim(d, 2), H,
                     H * g->dk);
    *per_key = mx_dim(d, 2) == H * g->dk;
  }
  if (la_delta(g->rule)) {
    mx_array b = tr_in(t, LA_IN_BETA);
    if (!b || mx_ndim(b) != 3 || mx_dim(b, 0) != B || mx_dim(b, 1) != T)
      return tr_fail(t, "beta must be [B=%d, T=%d, 1 or H]", B, T);
    *hb = mx_dim(b, 2);
    if (*hb != 1 && *hb != H)
      return tr_fail(t, "beta's last dim %d is neither 1 nor H = %d", *hb, H);
  }
  return MX_OK;
}

/* past_state, when given, is [W, B, H, dk, dv] with a window, else [B, H, dk, dv]. */
static int la_past_shape(tr_ctx *t, const la_geom *g, mx_array past) {
  int want[5], r = 0;
  if (g->window) want[r++] = g->window;
  want[r++] = g->b;
  want[r++] = g->h;
  want[r++] = g->dk;
  want[r++] = g->dv;
  if (mx_ndim(past) != r || memcmp(mx_shape(past), want, sizeof(int) * (size_t)r) != 0)
    return tr_fail(t, "past_state must be [%sB=%d, H=%d, dk=%d, dv=%d]", g->window ? "W, " : "",
                   g->b, g->h, g->dk, g->dv);
  return MX_OK;
}

/* --- the GPU fast path ---------------------------------------------------------------------- */
/* The kernel's int32 `params` input (read in la_scan, ssm_attention_cuda.c). */
enum la_param {
  LA_P_B, LA_P_T, LA_P_H, LA_P_HQ, LA_P_HK, LA_P_DK, LA_P_DV, LA_P_G, LA_P_QREP, LA_P_KREP,
  LA_P_W, LA_P_HB, LA_P_FLAGS, LA_P_SCALE, LA_P_COUNT
};
enum { LA_F_GATED = 1, LA_F_PER_KEY = 2, LA_F_DELTA = 4, LA_F_PAST = 8, LA_F_ROUND = 16 };
enum {
  /* T == 1 (decode) stays composed, as the spec has it: measured on an H200 (MLX 0.32.4 CUDA),
   * the kernel was no faster there (single node 2.20 ms fused vs 2.10 composed; hybrid decoder
   * 17.2 vs 17.3 ms), both dominated by the run's input/output copies. */
  LA_FAST_MIN_T = 2,
  LA_FAST_MAX_DK = 512,  /* 16 state registers a lane */
  LA_BLOCK_THREADS = 128 /* 4 warps: 4 neighbouring value columns of one head */
};

/* The kernel handle, made on first use and shared by every node and session of the process.
 * Translators run under the EP's process-wide MLX lock, so no other lock guards it. It is never
 * freed, on purpose: it holds only the kernel's names and source (a few KB) and lives as long
 * as the process, as MLX's cache of the modules compiled from it does; a plan cannot own it
 * because one compiled module serves every plan. la_kernel_failed remembers that MLX has no
 * CUDA backend (CPU or Metal builds), so later nodes go straight to the composition. */
static mx_kernel *la_kernel;
static bool la_kernel_failed;

/* A one-element stand-in for an absent input the kernel will not read (its flags say so). */
static int la_dummy(tr_ctx *t, mx_dtype dt, mx_array *out) {
  int one = 1;
  TR_TRY(tr_scalar(t, out, 0.0, dt));
  return mx_reshape(t->mx, out, *out, &one, 1);
}

/* Builds the kernel's inputs and launches it. A shape error is the node's error; when MLX refuses
 * the launch itself, *refused is set (the caller composes instead). */
static int la_launch(tr_ctx *t, const la_geom *g, mx_array *out, mx_array *present,
                     bool *refused) {
  *refused = false;
  bool per_key, gated = la_gated(g->rule), delta = la_delta(g->rule);
  int hb;
  TR_TRY(la_aux_shapes(t, g, &per_key, &hb));
  mx_array q = tr_in(t, LA_IN_Q), past = tr_in(t, LA_IN_PAST);
  mx_dtype qt = mx_dtype_of(q);
  if (past) TR_TRY(la_past_shape(t, g, past));
  else TR_TRY(la_dummy(t, g->state_dtype, &past));
  mx_array decay = gated ? tr_in(t, LA_IN_DECAY) : NULL;
  mx_array beta = delta ? tr_in(t, LA_IN_BETA) : NULL;
  if (!decay) TR_TRY(la_dummy(t, qt, &decay));
  if (!beta) TR_TRY(la_dummy(t, qt, &beta));

  int32_t p[LA_P_COUNT];
  p[LA_P_B] = g->b, p[LA_P_T] = g->t, p[LA_P_H] = g->h, p[LA_P_HQ] = g->hq;
  p[LA_P_HK] = g->hk, p[LA_P_DK] = g->dk, p[LA_P_DV] = g->dv, p[LA_P_G] = g->group;
  p[LA_P_QREP] = g->hq < g->h ? g->h / g->hq : 1;
  p[LA_P_KREP] = g->h / g->hk;
  p[LA_P_W] = g->window, p[LA_P_HB] = hb;
  p[LA_P_FLAGS] = (gated ? LA_F_GATED : 0) | (per_key ? LA_F_PER_KEY : 0) |
                  (delta ? LA_F_DELTA : 0) | (tr_in(t, LA_IN_PAST) ? LA_F_PAST : 0) |
                  (g->carry_dtype != MX_FLOAT32 ? LA_F_ROUND : 0);
  memcpy(&p[LA_P_SCALE], &g->scale, sizeof(float));
  int np = LA_P_COUNT;
  mx_array params;
  TR_TRY(mx_from_data(t->mx, &params, p, &np, 1, MX_INT32));

  mx_array ins[LA_CUDA_N_IN] = {q, tr_in(t, LA_IN_K), tr_in(t, LA_IN_V), past, decay, beta,
                                params};
  int oshape[3] = {g->b, g->t, g->h * g->group * g->dv};
  int sshape[5], sr = 0;
  if (g->window) sshape[sr++] = g->window;
  sshape[sr++] = g->b, sshape[sr++] = g->h, sshape[sr++] = g->dk, sshape[sr++] = g->dv;
  mx_kernel_output outs[LA_CUDA_N_OUT] = {{oshape, 3, g->out_dtype},
                                          {sshape, sr, g->state_dtype}};
  int grid[3] = {32 * g->b * g->h * g->dv, 1, 1}, block[3] = {LA_BLOCK_THREADS, 1, 1};
  mx_template_arg npl = {"NPL", MX_TEMPLATE_INT, (g->dk + 31) / 32};
  mx_array res[LA_CUDA_N_OUT];
  int rc = mx_kernel_call(t->mx, la_kernel, ins, LA_CUDA_N_IN, outs, LA_CUDA_N_OUT, grid, block,
                          &npl, 1, res);
  if (rc != MX_OK) {
    *refused = true;
    return rc;
  }
  *out = res[0];
  *present = res[1];
  mx_dtype want = tr_out_dtype(t, 1);
  if (mx_dtype_of(*present) != want) TR_TRY(mx_astype(t->mx, present, *present, want));
  return MX_OK;
}

/* The GPU fast path: one warp per (batch, head, value column) scanning time with the state
 * column in registers, for T > 1 and dk <= 512 on the GPU device. Returns true with *rc set
 * when it produced *out and *present (or failed with a shape error the composition would give
 * too), false to fall through to the composition below: not on the GPU, switched off, outside
 * its sizes, no CUDA backend, or MLX refused the launch (the message is dropped; the node's path
 * note says "composed"). Errors from compiling the kernel (NVRTC) arise only at evaluation and
 * fail the run like any evaluation error. */
static bool la_fast_path(tr_ctx *t, const la_geom *g, mx_array *out, mx_array *present, int *rc) {
  if (!t->fast_kernels || t->mx->device != MX_DEVICE_GPU || la_kernel_failed ||
      g->t < LA_FAST_MIN_T || g->dk > LA_FAST_MAX_DK)
    return false;
  if ((long long)g->b * g->h * g->dv > INT_MAX / 32) return false; /* grid counts threads in int */
  if (!la_kernel && mx_kernel_new(t->mx, &la_kernel, "linear_attention_scan", la_cuda_inputs,
                                  LA_CUDA_N_IN, la_cuda_outputs, LA_CUDA_N_OUT, la_cuda_source,
                                  la_cuda_header) != MX_OK) {
    la_kernel_failed = true;
    t->mx->error[0] = '\0';
    return false;
  }
  bool refused;
  *rc = la_launch(t, g, out, present, &refused);
  if (refused) {
    t->mx->error[0] = '\0';
    *rc = MX_OK;
    return false;
  }
  if (*rc == MX_OK) tr_note_path(t, TR_PATH_MLX_FUSED, "gpu_scan", 0, "fused GPU scan");
  return true;
}

static int la_f32(tr_ctx *t, mx_array *a) {
  if (mx_dtype_of(*a) != MX_FLOAT32) TR_TRY(mx_astype(t->mx, a, *a, MX_FLOAT32));
  return MX_OK;
}

/* [B, T, ...] -> [T, B, ...] as contiguous float32, reshaped to `shape` (given in [B, T] order,
 * rank n). */
static int la_time_major(tr_ctx *t, mx_array a, const int *shape, int n, mx_array *out) {
  int perm[MX_MAX_RANK];
  TR_TRY(la_f32(t, &a));
  TR_TRY(mx_reshape(t->mx, &a, a, shape, n));
  perm[0] = 1;
  perm[1] = 0;
  for (int i = 2; i < n; i++) perm[i] = i;
  TR_TRY(mx_transpose(t->mx, &a, a, perm, n));
  return mx_contiguous(t->mx, out, a);
}

/* Repeats axis `axis` of a (extent e) `times` times in place: [.., e, ..] -> [.., e*times, ..],
 * each entry repeated consecutively (entry i serves outputs i*times .. i*times + times - 1). */
static int la_repeat(tr_ctx *t, mx_array *a, int axis, int times) {
  if (times == 1) return MX_OK;
  int n = mx_ndim(*a), ex[MX_MAX_RANK + 1], bc[MX_MAX_RANK + 1], res[MX_MAX_RANK];
  for (int i = 0, j = 0; i < n; i++) {
    ex[j] = bc[j] = mx_dim(*a, i);
    j++;
    if (i == axis) {
      ex[j] = 1;
      bc[j] = times;
      j++;
    }
    res[i] = mx_dim(*a, i) * (i == axis ? times : 1);
  }
  TR_TRY(mx_reshape(t->mx, a, *a, ex, n + 1));
  TR_TRY(mx_broadcast_to(t->mx, a, *a, bc, n + 1));
  return mx_reshape(t->mx, a, *a, res, n);
}

static int la_prepare(tr_ctx *t, const la_geom *g, la_inputs *in) {
  int B = g->b, T = g->t, H = g->h;
  mx_array q = tr_in(t, LA_IN_Q), k = tr_in(t, LA_IN_K), v = tr_in(t, LA_IN_V);
  /* keys: [T,B,Hk,dk] -> [T,B,H,dk] */
  int ks[4] = {B, T, g->hk, g->dk};
  TR_TRY(la_time_major(t, k, ks, 4, &in->k));
  TR_TRY(la_repeat(t, &in->k, 2, H / g->hk));
  /* queries: [T,B,Hq,dk] -> [T,B,H,G,dk] */
  int qs[4] = {B, T, g->hq, g->dk};
  TR_TRY(la_time_major(t, q, qs, 4, &in->q));
  if (g->hq < H) TR_TRY(la_repeat(t, &in->q, 2, H / g->hq));
  int q5[5] = {T, B, H, g->group, g->dk};
  TR_TRY(mx_reshape(t->mx, &in->q, in->q, q5, 5));
  int vs[5] = {B, T, H, 1, g->dv};
  TR_TRY(la_time_major(t, v, vs, 5, &in->v));
  in->eg = in->beta = NULL;
  bool per_key;
  int hb;
  TR_TRY(la_aux_shapes(t, g, &per_key, &hb));
  if (la_gated(g->rule)) {
    int ds[5] = {B, T, H, per_key ? g->dk : 1, 1};
    TR_TRY(la_time_major(t, tr_in(t, LA_IN_DECAY), ds, 5, &in->eg));
    TR_TRY(mx_unary(t->mx, &in->eg, MX_EXP, in->eg));
  }
  if (la_delta(g->rule)) {
    int bs[5] = {B, T, hb, 1, 1};
    TR_TRY(la_time_major(t, tr_in(t, LA_IN_BETA), bs, 5, &in->beta));
  }
  return MX_OK;
}

/* Row `step` of a time-major array, without the time axis. */
static int la_step(tr_ctx *t, mx_array a, int step, mx_array *out) {
  int n = mx_ndim(a), start[MX_MAX_RANK], stop[MX_MAX_RANK], strides[MX_MAX_RANK];
  for (int i = 0; i < n; i++) start[i] = 0, stop[i] = mx_dim(a, i), strides[i] = 1;
  start[0] = step;
  stop[0] = step + 1;
  TR_TRY(mx_slice(t->mx, out, a, start, stop, strides, n));
  return mx_reshape(t->mx, out, *out, mx_shape(a) + 1, n - 1);
}

static int la_zeros(tr_ctx *t, mx_array *out, const int *shape, int n, mx_dtype dt) {
  mx_array zero;
  TR_TRY(tr_scalar(t, &zero, 0.0, dt));
  return mx_full(t->mx, out, shape, n, zero);
}

/* The initial state [B,H,dk,dv] (float32 view of the carry) from past_state (slot W-1). */
static int la_initial_state(tr_ctx *t, const la_geom *g, mx_array *s) {
  int shape[4] = {g->b, g->h, g->dk, g->dv};
  mx_array past = tr_in(t, LA_IN_PAST);
  if (!past) return la_zeros(t, s, shape, 4, g->carry_dtype);
  TR_TRY(la_past_shape(t, g, past));
  if (g->window) TR_TRY(la_step(t, past, g->window - 1, &past));
  *s = past;
  if (mx_dtype_of(past) != g->carry_dtype) TR_TRY(mx_astype(t->mx, s, past, g->carry_dtype));
  return MX_OK;
}

/* One step of the recurrence on the float32 state s [B,H,dk,dv]; returns the output row
 * o [B, 1, H*G*dv] (unscaled). */
static int la_one_step(tr_ctx *t, const la_geom *g, const la_inputs *in, int step, mx_array *s,
                       mx_array *o) {
  int B = g->b, H = g->h;
  mx_array kt, vt, qt, d, upd;
  TR_TRY(la_step(t, in->k, step, &kt));
  TR_TRY(la_step(t, in->v, step, &vt)); /* [B,H,1,dv] */
  if (in->eg) {
    mx_array e;
    TR_TRY(la_step(t, in->eg, step, &e));
    TR_TRY(mx_binary(t->mx, s, MX_MULTIPLY, *s, e));
  }
  if (la_delta(g->rule)) {
    mx_array krow, r, bt;
    int rs[4] = {B, H, 1, g->dk};
    TR_TRY(mx_reshape(t->mx, &krow, kt, rs, 4));
    TR_TRY(mx_matmul(t->mx, &r, krow, *s)); /* r = k^T S: [B,H,1,dv] */
    TR_TRY(la_step(t, in->beta, step, &bt));
    TR_TRY(mx_binary(t->mx, &d, MX_SUBTRACT, vt, r));
    TR_TRY(mx_binary(t->mx, &d, MX_MULTIPLY, bt, d));
  } else {
    d = vt;
  }
  mx_array kcol;
  int cs[4] = {B, H, g->dk, 1};
  TR_TRY(mx_reshape(t->mx, &kcol, kt, cs, 4));
  TR_TRY(mx_binary(t->mx, &upd, MX_MULTIPLY, kcol, d)); /* k (outer) d */
  TR_TRY(mx_binary(t->mx, s, MX_ADD, *s, upd));
  TR_TRY(la_step(t, in->q, step, &qt)); /* [B,H,G,dk] */
  TR_TRY(mx_matmul(t->mx, o, qt, *s));   /* [B,H,G,dv] */
  int os[3] = {B, 1, H * g->group * g->dv};
  return mx_reshape(t->mx, o, *o, os, 3);
}

static int la_present(tr_ctx *t, const la_geom *g, mx_array *kept, int n_kept, mx_array last,
                      mx_array *present) {
  if (!g->window) {
    *present = last;
  } else if (g->t == 0 && tr_in(t, LA_IN_PAST)) {
    *present = tr_in(t, LA_IN_PAST);
  } else {
    int one[5] = {1, g->b, g->h, g->dk, g->dv};
    mx_array slots[LA_MAX_WINDOW + 1];
    int count = 0, empty = g->window - n_kept;
    if (empty > 0) {
      one[0] = empty;
      TR_TRY(la_zeros(t, &slots[count++], one, 5, g->carry_dtype));
      one[0] = 1;
    }
    for (int i = 0; i < n_kept; i++) TR_TRY(mx_reshape(t->mx, &slots[count++], kept[i], one, 5));
    TR_TRY(mx_concatenate(t->mx, present, slots, (size_t)count, 0));
  }
  mx_dtype want = tr_out_dtype(t, 1);
  if (mx_dtype_of(*present) != want) TR_TRY(mx_astype(t->mx, present, *present, want));
  return MX_OK;
}

static int la_geometry(tr_ctx *t, const ir_node *n, la_geom *g) {
  mx_array q = tr_in(t, LA_IN_Q), k = tr_in(t, LA_IN_K), v = tr_in(t, LA_IN_V);
  memset(g, 0, sizeof *g);
  g->rule = la_rule(n);
  g->hq = (int)ir_attr_int(n, "q_num_heads", 0);
  g->h = (int)ir_attr_int(n, "kv_num_heads", 0);
  g->window = (int)ir_attr_int(n, "state_window", 0);
  if (mx_ndim(q) != 3 || mx_ndim(k) != 3 || mx_ndim(v) != 3 || g->hq <= 0 || g->h <= 0)
    return tr_fail(t, "query, key and value must be [B, T, hidden]");
  g->b = mx_dim(q, 0);
  g->t = mx_dim(q, 1);
  for (int i = 0; i < 2; i++)
    if (mx_dim(k, i) != mx_dim(q, i) || mx_dim(v, i) != mx_dim(q, i))
      return tr_fail(t, "the batch and time dims of query (%d, %d), key (%d, %d) and value "
                        "(%d, %d) must agree", mx_dim(q, 0), mx_dim(q, 1), mx_dim(k, 0),
                     mx_dim(k, 1), mx_dim(v, 0), mx_dim(v, 1));
  int qh = mx_dim(q, 2), kh = mx_dim(k, 2), vh = mx_dim(v, 2);
  if ((g->hq % g->h && g->h % g->hq) || !qh || qh % g->hq)
    return tr_fail(t, "query hidden %d does not split into q_num_heads %d", qh, g->hq);
  g->dk = qh / g->hq;
  if (!kh || kh % g->dk || g->h % (kh / g->dk))
    return tr_fail(t, "key hidden %d is not a number of dk = %d heads dividing %d", kh, g->dk,
                   g->h);
  g->hk = kh / g->dk;
  if (!vh || vh % g->h)
    return tr_fail(t, "value hidden %d does not split into kv_num_heads %d", vh, g->h);
  g->dv = vh / g->h;
  g->group = g->hq > g->h ? g->hq / g->h : 1;
  float scale = ir_attr_float(n, "scale", 0.0f);
  g->scale = scale != 0.0f ? scale : (float)(1.0 / sqrt((double)g->dk));
  g->out_dtype = tr_out_dtype(t, 0);
  mx_array past = tr_in(t, LA_IN_PAST);
  g->state_dtype = past ? mx_dtype_of(past) : tr_out_dtype(t, 1);
  bool bf16 = mx_dtype_of(q) == MX_BFLOAT16 || g->state_dtype == MX_BFLOAT16 ||
              g->out_dtype == MX_BFLOAT16 || tr_out_dtype(t, 1) == MX_BFLOAT16;
  /* ai.onnx's LinearAttention is defined by a float32 function body whose only store is the
   * final present_state (it has no state_window): its state is carried in float32 whatever the
   * declared dtypes. The contrib form keeps the typed state of ssm-ops.md. */
  bool standard = !t->node->domain[0] || strcmp(t->node->domain, "ai.onnx") == 0;
  g->carry_dtype = standard || (bf16 && g->dk > 256 && g->dk <= 512) ? MX_FLOAT32
                                                                     : g->state_dtype;
  return MX_OK;
}

/* --- claim and translation -------------------------------------------------------------- */
static bool claim_la(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  if (n->n_inputs < 3 || n->n_inputs > 6 || n->n_outputs != 2 || !ir_output(g, n, 0) ||
      !ir_output(g, n, 1))
    return op_decline(why, "LinearAttention takes 3-6 inputs and exactly 2 outputs (output and "
                           "present_state)");
  bool contrib = la_contrib(n);
  int64_t window = ir_attr_int(n, "state_window", 0);
  if (!contrib && ir_find_attr(n, "state_window"))
    return op_decline(why, "state_window is not part of the ai.onnx form of LinearAttention (use "
                           "the com.microsoft form)");
  if (window < 0 || window > LA_MAX_WINDOW)
    return op_decline(why, "state_window %lld is outside 0..%d", (long long)window,
                      LA_MAX_WINDOW);
  int rule = la_rule(n);
  if (rule == LA_UNKNOWN)
    return op_decline(why, "update_rule '%s' is not one of linear, gated, delta, gated_delta",
                      ir_attr_string(n, "update_rule", ""));
  int64_t hq = ir_attr_int(n, "q_num_heads", 0), h = ir_attr_int(n, "kv_num_heads", 0);
  if (hq <= 0 || h <= 0)
    return op_decline(why, "q_num_heads and kv_num_heads must be positive (are %lld and %lld)",
                      (long long)hq, (long long)h);
  if (hq % h != 0 && h % hq != 0)
    return op_decline(why, "q_num_heads %lld and kv_num_heads %lld: one must divide the other",
                      (long long)hq, (long long)h);
  if (!contrib && hq % h != 0)
    return op_decline(why, "the ai.onnx form needs q_num_heads (%lld) to be a multiple of "
                           "kv_num_heads (%lld)", (long long)hq, (long long)h);
  const ir_value *q = ir_input(g, n, LA_IN_Q), *k = ir_input(g, n, LA_IN_K);
  const ir_value *v = ir_input(g, n, LA_IN_V), *past = ir_input(g, n, LA_IN_PAST);
  const ir_value *decay = ir_input(g, n, LA_IN_DECAY), *beta = ir_input(g, n, LA_IN_BETA);
  const ir_value *out = ir_output(g, n, 0), *pres = ir_output(g, n, 1);
  if (!q || !k || !v) return op_decline(why, "LinearAttention needs query, key and value");
  if (k->elem_type != q->elem_type || v->elem_type != q->elem_type || !la_is_float(q->elem_type))
    return op_decline(why, "query, key and value must share one float type (are %s, %s, %s)",
                      ir_elem_name(q->elem_type), ir_elem_name(k->elem_type),
                      ir_elem_name(v->elem_type));
  if (q->rank != 3 || k->rank != 3 || v->rank != 3)
    return op_decline(why, "query, key and value must be [B, T, hidden] (ranks %d, %d, %d)",
                      q->rank, k->rank, v->rank);
  int64_t qh = q->dims[2], kh = k->dims[2], vh = v->dims[2];
  if (qh < 0 || kh < 0 || vh < 0)
    return op_decline(why, "the hidden (last) dims of query, key and value must be static");
  if (qh == 0 || qh % hq != 0)
    return op_decline(why, "query hidden %lld is not a positive multiple of q_num_heads %lld",
                      (long long)qh, (long long)hq);
  int64_t dk = qh / hq;
  if (kh == 0 || kh % dk != 0)
    return op_decline(why, "key hidden %lld is not a positive multiple of the head size dk = %lld",
                      (long long)kh, (long long)dk);
  int64_t hk = kh / dk;
  if (h % hk != 0)
    return op_decline(why, "%lld key heads do not divide kv_num_heads %lld", (long long)hk,
                      (long long)h);
  if (!contrib && hk != h)
    return op_decline(why, "the ai.onnx form needs exactly kv_num_heads (%lld) key heads (key "
                           "has %lld)", (long long)h, (long long)hk);
  if (vh == 0 || vh % h != 0)
    return op_decline(why, "value hidden %lld is not a positive multiple of kv_num_heads %lld",
                      (long long)vh, (long long)h);
  int64_t dv = vh / h;
  for (int i = 0; i < 2; i++)
    if (!la_dim_ok(k, i, q->dims[i]) || !la_dim_ok(v, i, q->dims[i]) ||
        !la_dim_ok(v, i, k->dims[i]))
      return op_decline(why, "the batch and time dims of query, key and value must agree");
  if (out->elem_type != IR_UNDEFINED && out->elem_type != q->elem_type)
    return op_decline(why, "output must have the query's type %s (declared %s)",
                      ir_elem_name(q->elem_type), ir_elem_name(out->elem_type));
  int64_t oh = (hq > h ? hq : h) * dv;
  if (out->rank > 0 && (out->rank != 3 || !la_dim_ok(out, 2, oh)))
    return op_decline(why, "output must be [B, T, %lld] (max(q_num_heads, kv_num_heads) * dv)",
                      (long long)oh);
  if (la_gated(rule) && !decay)
    return op_decline(why, "update_rule '%s' needs decay (input 4)",
                      ir_attr_string(n, "update_rule", "gated_delta"));
  if (la_gated(rule) &&
      !la_aux_ok(decay, q, "decay", h, h * dk, "[B, T, H] or [B, T, H*dk]", why))
    return false;
  if (la_delta(rule) && !beta)
    return op_decline(why, "update_rule '%s' needs beta (input 5)",
                      ir_attr_string(n, "update_rule", "gated_delta"));
  if (la_delta(rule) && !la_aux_ok(beta, q, "beta", 1, h, "[B, T, 1] or [B, T, H]", why))
    return false;
  const ir_value *states[2] = {past, pres};
  static const char *snames[2] = {"past_state", "present_state"};
  for (int i = 0; i < 2; i++) {
    const ir_value *s = states[i];
    if (!s || s->elem_type == IR_UNDEFINED) continue;
    if (contrib && s->elem_type != q->elem_type)
      return op_decline(why, "the com.microsoft form keeps %s in the query type %s (is %s)",
                        snames[i], ir_elem_name(q->elem_type), ir_elem_name(s->elem_type));
    if (!la_is_float(s->elem_type))
      return op_decline(why, "%s must be a float type (is %s)", snames[i],
                        ir_elem_name(s->elem_type));
  }
  if (past && pres && pres->elem_type != IR_UNDEFINED && pres->elem_type != past->elem_type)
    return op_decline(why, "present_state (%s) must have past_state's type (%s)",
                      ir_elem_name(pres->elem_type), ir_elem_name(past->elem_type));
  int64_t want[5];
  int srank = 0;
  if (window) want[srank++] = window;
  want[srank++] = q->dims[0];
  want[srank++] = h;
  want[srank++] = dk;
  want[srank++] = dv;
  if (past && past->rank > 0 && !la_state_ok(past, want, srank, "past_state", why)) return false;
  if (pres->rank > 0 && !la_state_ok(pres, want, srank, "present_state", why)) return false;
  return true;
}

static int translate_la(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  la_geom g;
  TR_TRY(la_geometry(t, n, &g));
  mx_array out = NULL, present = NULL;
  int rc = MX_OK;
  if (la_fast_path(t, &g, &out, &present, &rc)) {
    if (rc != MX_OK) return rc;
    TR_TRY(tr_out(t, 0, out));
    return tr_out(t, 1, present);
  }
  tr_note_path(t, TR_PATH_COMPOSED, NULL, 0, "composed");
  mx_array s, kept[LA_MAX_WINDOW];
  int n_kept = 0;
  TR_TRY(la_initial_state(t, &g, &s));
  if (g.t == 0) {
    int os[3] = {g.b, 0, g.h * g.group * g.dv};
    TR_TRY(la_zeros(t, &out, os, 3, g.out_dtype));
  } else {
    la_inputs in;
    TR_TRY(la_prepare(t, &g, &in));
    mx_array *rows = malloc(sizeof(mx_array) * (size_t)g.t);
    if (!rows) return tr_fail(t, "out of memory");
    for (int step = 0; step < g.t && rc == MX_OK; step++) {
      mx_array s32 = s;
      rc = la_f32(t, &s32);
      if (rc == MX_OK) rc = la_one_step(t, &g, &in, step, &s32, &rows[step]);
      /* the carried state is rounded to its dtype after every step (see the top comment) */
      if (rc == MX_OK) rc = mx_astype(t->mx, &s, s32, g.carry_dtype);
      if (rc == MX_OK && g.window && step >= g.t - g.window) kept[n_kept++] = s;
    }
    if (rc == MX_OK) rc = mx_concatenate(t->mx, &out, rows, (size_t)g.t, 1);
    free(rows);
    if (rc != MX_OK) return rc;
    mx_array sc;
    TR_TRY(tr_scalar(t, &sc, g.scale, MX_FLOAT32));
    TR_TRY(mx_binary(t->mx, &out, MX_MULTIPLY, out, sc));
    if (mx_dtype_of(out) != g.out_dtype) TR_TRY(mx_astype(t->mx, &out, out, g.out_dtype));
  }
  TR_TRY(la_present(t, &g, kept, n_kept, s, &present));
  TR_TRY(tr_out(t, 0, out));
  return tr_out(t, 1, present);
}

const op_row ops_ssm_attention_rows[] = {
    {"com.microsoft", "LinearAttention", 1, 1, claim_la, translate_la, OP_SHAPE_KEYED, OP_FLOATS,
     0, "all four update rules, GQA both ways, state_window 0..8; per-step recurrence unrolled "
        "over T, so keyed on shape"},
    {"", "LinearAttention", 27, 27, claim_la, translate_la, OP_SHAPE_KEYED, OP_FLOATS, 0,
     "ai.onnx form: q_num_heads a multiple of kv_num_heads, H key heads, own state type; keyed"},
    OP_ROWS_END,
};
