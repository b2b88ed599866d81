/*
 * The fused LinearAttention recurrence for NVIDIA GPUs, as CUDA source that MLX compiles at run
 * time (fast::cuda_kernel through mx_kernel_new / mx_kernel_call; NVRTC, cached per process for
 * each distinct set of input dtypes and NPL). ssm_attention.c launches it; the semantics are
 * those of the composed path there (shared/spec/ssm-ops.md, LinearAttention).
 *
 * Mapping: one warp (32 lanes) per (batch b, state head h, value column j), warps numbered
 * w = (b * H + h) * dv + j over a 1-D grid of 32 * B * H * dv threads in blocks of 128 (4 warps:
 * neighbouring columns of one head, so their key/query/decay reads hit the same cache lines and
 * their strided state reads and writes share sectors). Lane l keeps S[l + 32 m, j] for
 * m < NPL = ceil(dk / 32) in float32 registers (rows >= dk are masked to zero), so dk <= 512
 * needs at most 16 state registers a lane; time runs sequentially in the loop. Per step: the
 * state decays by exp(g) (per key row, or one scalar per head) to S', r = k . S'[:, j] is
 * reduced across the warp with xor shuffles (every lane gets the sum), the delta rules take
 * d = beta (v_j - r) (else d = v_j), S = S' + k d, and lane 0 writes o = scale q . S[:, j] for
 * each of the G query heads that read this state. For the first of them o is computed as
 * q . S' + (q . k) d (the same sum, in another order: float32 rounding differs at the 1e-7
 * level), whose two dot products reduce in the same shuffle rounds as r, so a step waits on one
 * warp reduction rather than two; the other query heads (Hq > H: G = Hq / H, heads h G + 1 ..
 * h G + G - 1) reduce q . S after the update. Hq < H: G = 1 and the query head is h / (H / Hq).
 * The key head is h / (H / Hk). The working state is float32; with `round_state` it is rounded
 * to the state dtype after each step (exactly where the composition rounds its carried state),
 * else (dk 257..512 with bfloat16) only the stores are rounded. The next step's keys,
 * exp(decay), first query row, value and beta are loaded while the current step computes.
 * Registers (ptxas, sm_90a): about 56 a thread for dk <= 32, 88 for dk 128, 135 for dk 257..288,
 * 216 for dk 512 (16 state + 2 x 48 prefetched values), with no spills; at dk 512 two blocks of
 * 128 fit an SM. state_window W: zero slots first, then the states after each of the last
 * min(T, W) steps, oldest first; the past state read is slot W - 1.
 *
 * Inputs q, k, v [B, T, heads * d] keep their ONNX layout and dtype (MLX makes them
 * row-contiguous); absent past/decay/beta are one-element dummies the flags say not to read.
 * Geometry comes in as an int32 `params` array (layout: enum la_param in ssm_attention.c), so
 * one compiled kernel serves every shape; only NPL (a template constant, it sizes the register
 * arrays) and the dtypes select a compilation.
 */
#include "ops/ssm_attention_cuda.h"

/* Helpers and the scan, before the kernel (MLX puts the header above its generated signature). */
const char la_cuda_header[] =
    "/* Element access in float32 whatever the stored type; stores round to nearest even. */\n"
    "__device__ __forceinline__ float la_f(float x) { return x; }\n"
    "__device__ __forceinline__ float la_f(__half x) { return __half2float(x); }\n"
    "__device__ __forceinline__ float la_f(__nv_bfloat16 x) { return __bfloat162float(x); }\n"
    "__device__ __forceinline__ void la_put(float *p, float x) { *p = x; }\n"
    "__device__ __forceinline__ void la_put(__half *p, float x) { *p = __float2half_rn(x); }\n"
    "__device__ __forceinline__ void la_put(__nv_bfloat16 *p, float x) {\n"
    "  *p = __float2bfloat16_rn(x);\n"
    "}\n"
    "/* x rounded to the element type of p (p only names the type). */\n"
    "__device__ __forceinline__ float la_round(const float *, float x) { return x; }\n"
    "__device__ __forceinline__ float la_round(const __half *, float x) {\n"
    "  return __half2float(__float2half_rn(x));\n"
    "}\n"
    "__device__ __forceinline__ float la_round(const __nv_bfloat16 *, float x) {\n"
    "  return __bfloat162float(__float2bfloat16_rn(x));\n"
    "}\n"
    "/* Sums over the 32 lanes, in every lane (three at once: their shuffles interleave, so the\n"
    " * three cost about the latency of one). */\n"
    "__device__ __forceinline__ float la_warp_sum(float x) {\n"
    "#pragma unroll\n"
    "  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);\n"
    "  return x;\n"
    "}\n"
    "__device__ __forceinline__ void la_warp_sum3(float &a, float &b, float &c) {\n"
    "#pragma unroll\n"
    "  for (int o = 16; o > 0; o >>= 1) {\n"
    "    a += __shfl_xor_sync(0xffffffffu, a, o);\n"
    "    b += __shfl_xor_sync(0xffffffffu, b, o);\n"
    "    c += __shfl_xor_sync(0xffffffffu, c, o);\n"
    "  }\n"
    "}\n"
    "\n"
    "/* Run-time geometry, from the int32 `params` input (enum la_param in ssm_attention.c). */\n"
    "struct la_dims {\n"
    "  int B, T, H, HQ, HK, DK, DV, G, QREP, KREP, W, HB;\n"
    "  bool gated, per_key, delta, has_past, round_state;\n"
    "  float scale;\n"
    "};\n"
    "\n"
    "/* One time step's inputs for one lane, in float32: its keys (and exp(decay)) for key rows\n"
    " * lane + 32 m, the first query head's row, this column's value and beta. */\n"
    "template <int NPL>\n"
    "struct la_step {\n"
    "  float k[NPL], e[NPL], q[NPL];\n"
    "  float v, beta;\n"
    "};\n"
    "\n"
    "template <int NPL, typename TQ, typename TK, typename TV, typename TD, typename TB>\n"
    "__device__ __forceinline__ void la_load(la_step<NPL> &r, const la_dims &d, const TQ *q,\n"
    "                                        const TK *k, const TV *v, const TD *decay,\n"
    "                                        const TB *beta, int b, int t, int h, int j,\n"
    "                                        int lane) {\n"
    "  const long long bt = (long long)b * d.T + t;\n"
    "  const TK *krow = k + (bt * d.HK + h / d.KREP) * d.DK;\n"
    "  const TQ *qrow = q + (bt * d.HQ + (h * d.G) / d.QREP) * d.DK;\n"
    "#pragma unroll\n"
    "  for (int m = 0; m < NPL; m++) {\n"
    "    const int i = lane + 32 * m;\n"
    "    r.k[m] = i < d.DK ? la_f(krow[i]) : 0.0f;\n"
    "    r.q[m] = i < d.DK ? la_f(qrow[i]) : 0.0f;\n"
    "  }\n"
    "  if (d.gated && d.per_key) {\n"
    "    const TD *drow = decay + (bt * d.H + h) * d.DK;\n"
    "#pragma unroll\n"
    "    for (int m = 0; m < NPL; m++) {\n"
    "      const int i = lane + 32 * m;\n"
    "      r.e[m] = i < d.DK ? expf(la_f(drow[i])) : 1.0f;\n"
    "    }\n"
    "  } else {\n"
    "    const float e = d.gated ? expf(la_f(decay[bt * d.H + h])) : 1.0f;\n"
    "#pragma unroll\n"
    "    for (int m = 0; m < NPL; m++) r.e[m] = e;\n"
    "  }\n"
    "  r.v = la_f(v[(bt * d.H + h) * d.DV + j]);\n"
    "  r.beta = d.delta ? la_f(beta[bt * d.HB + (d.HB == 1 ? 0 : h)]) : 0.0f;\n"
    "}\n"
    "\n"
    "/* The scan of one warp: state column S[:, j] of head h in batch b, rows lane + 32 m in\n"
    " * registers (float32), time sequential. See ssm_attention_cuda.c for the mapping. */\n"
    "template <int NPL, typename TQ, typename TK, typename TV, typename TP, typename TD,\n"
    "          typename TB, typename TO, typename TS>\n"
    "__device__ __forceinline__ void la_scan(const TQ *q, const TK *k, const TV *v,\n"
    "                                        const TP *past, const TD *decay, const TB *beta,\n"
    "                                        const int *params, TO *out, TS *present) {\n"
    "  la_dims d;\n"
    "  d.B = params[0]; d.T = params[1]; d.H = params[2]; d.HQ = params[3]; d.HK = params[4];\n"
    "  d.DK = params[5]; d.DV = params[6]; d.G = params[7]; d.QREP = params[8];\n"
    "  d.KREP = params[9];\n"
    "  d.W = params[10]; d.HB = params[11];\n"
    "  const int flags = params[12];\n"
    "  d.gated = flags & 1; d.per_key = flags & 2; d.delta = flags & 4; d.has_past = flags & 8;\n"
    "  d.round_state = flags & 16;\n"
    "  d.scale = __int_as_float(params[13]);\n"
    "\n"
    "  const int lane = threadIdx.x & 31;\n"
    "  const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;\n"
    "  /* whole warps leave together (blockDim.x is a multiple of 32), so shuffles stay full */\n"
    "  if (warp >= (long long)d.B * d.H * d.DV) return;\n"
    "  const int j = (int)(warp % d.DV);\n"
    "  const long long bh = warp / d.DV;\n"
    "  const int h = (int)(bh % d.H), b = (int)(bh / d.H);\n"
    "  const long long plane = (long long)d.B * d.H * d.DK * d.DV; /* one [B,H,dk,dv] state */\n"
    "  const long long col = bh * d.DK * d.DV + j;                  /* S[0, j] of this head */\n"
    "\n"
    "  float s[NPL];\n"
    "  const long long past_at = (d.W > 0 ? (long long)(d.W - 1) * plane : 0) + col;\n"
    "#pragma unroll\n"
    "  for (int m = 0; m < NPL; m++) {\n"
    "    const int i = lane + 32 * m;\n"
    "    s[m] = (d.has_past && i < d.DK) ? la_f(past[past_at + (long long)i * d.DV]) : 0.0f;\n"
    "  }\n"
    "  /* state_window: slots before the first kept step are zeros */\n"
    "  const int kept = d.T < d.W ? d.T : d.W;\n"
    "  for (int slot = 0; slot < d.W - kept; slot++) {\n"
    "#pragma unroll\n"
    "    for (int m = 0; m < NPL; m++) {\n"
    "      const int i = lane + 32 * m;\n"
    "      if (i < d.DK) la_put(present + slot * plane + col + (long long)i * d.DV, 0.0f);\n"
    "    }\n"
    "  }\n"
    "\n"
    "  const int OH = d.H * d.G; /* output heads: max(Hq, H) */\n"
    "  la_step<NPL> cur, nxt;\n"
    "  la_load(cur, d, q, k, v, decay, beta, b, 0, h, j, lane);\n"
    "  for (int t = 0; t < d.T; t++) {\n"
    "    if (t + 1 < d.T) la_load(nxt, d, q, k, v, decay, beta, b, t + 1, h, j, lane);\n"
    "    if (d.gated) {\n"
    "#pragma unroll\n"
    "      for (int m = 0; m < NPL; m++) s[m] *= cur.e[m];\n"
    "    }\n"
    "    /* r = k.S and the first query head's q.S' and q.k reduce together from the decayed\n"
    "     * state S': its output q.(S' + k d) = q.S' + (q.k) d then needs no reduction after the\n"
    "     * update, which leaves one reduction on the step's critical path instead of two. */\n"
    "    float r = 0.0f, qs = 0.0f, qk = 0.0f;\n"
    "#pragma unroll\n"
    "    for (int m = 0; m < NPL; m++) {\n"
    "      r = fmaf(cur.k[m], s[m], r);\n"
    "      qs = fmaf(cur.q[m], s[m], qs);\n"
    "      qk = fmaf(cur.q[m], cur.k[m], qk);\n"
    "    }\n"
    "    la_warp_sum3(r, qs, qk);\n"
    "    const float delta = d.delta ? cur.beta * (cur.v - r) : cur.v;\n"
    "#pragma unroll\n"
    "    for (int m = 0; m < NPL; m++) s[m] = fmaf(cur.k[m], delta, s[m]);\n"
    "    const long long bt = (long long)b * d.T + t;\n"
    "    const float o = fmaf(qk, delta, qs);\n"
    "    if (lane == 0) la_put(out + (bt * OH + h * d.G) * d.DV + j, d.scale * o);\n"
    "    /* Hq > H (then QREP is 1): the other query heads read the updated state */\n"
    "    for (int g = 1; g < d.G; g++) {\n"
    "      const TQ *qrow = q + (bt * d.HQ + h * d.G + g) * d.DK;\n"
    "      float acc = 0.0f;\n"
    "#pragma unroll\n"
    "      for (int m = 0; m < NPL; m++) {\n"
    "        const int i = lane + 32 * m;\n"
    "        if (i < d.DK) acc = fmaf(la_f(qrow[i]), s[m], acc);\n"
    "      }\n"
    "      acc = la_warp_sum(acc);\n"
    "      if (lane == 0) la_put(out + (bt * OH + h * d.G + g) * d.DV + j, d.scale * acc);\n"
    "    }\n"
    "    if (d.round_state) {\n"
    "#pragma unroll\n"
    "      for (int m = 0; m < NPL; m++) s[m] = la_round(present, s[m]);\n"
    "    }\n"
    "    if (d.W > 0 && t >= d.T - d.W) {\n"
    "      const long long at = (long long)(d.W - d.T + t) * plane + col;\n"
    "#pragma unroll\n"
    "      for (int m = 0; m < NPL; m++) {\n"
    "        const int i = lane + 32 * m;\n"
    "        if (i < d.DK) la_put(present + at + (long long)i * d.DV, s[m]);\n"
    "      }\n"
    "    }\n"
    "    if (t + 1 < d.T) cur = nxt;\n"
    "  }\n"
    "  if (d.W == 0) {\n"
    "#pragma unroll\n"
    "    for (int m = 0; m < NPL; m++) {\n"
    "      const int i = lane + 32 * m;\n"
    "      if (i < d.DK) la_put(present + col + (long long)i * d.DV, s[m]);\n"
    "    }\n"
    "  }\n"
    "}\n";

/* The kernel body: MLX generates the signature from the names in la_cuda_inputs/outputs. */
const char la_cuda_source[] =
    "  la_scan<NPL>(q, k, v, past, decay, beta, params, out, present);\n";

const char *const la_cuda_inputs[LA_CUDA_N_IN] = {"q", "k", "v", "past", "decay", "beta", "params"};
const char *const la_cuda_outputs[LA_CUDA_N_OUT] = {"out", "present"};
