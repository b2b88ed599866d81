"""Small decoder LLMs in the exact forms exporters write, with random weights and no downloads.

This module owns the generator of test decoders: ONNX graphs built with onnx.helper that spell a
decoder as onnxruntime-genai's model builder exports it for the CPU with int4 weights: int4
MatMulNBits (block 32, implicit zero point 8, accuracy_level 4) for every projection and the
lm_head; SimplifiedLayerNormalization for the first norm and SkipSimplifiedLayerNormalization
for the others (its fourth output carrying the residual); GroupQueryAttention with packed QKV
(separate q/k/v where q/k norms need them) and in-op rotary from cos/sin caches;
seqlens_k and total_sequence_length computed in the graph from attention_mask (ReduceSum, Sub,
Cast; Shape, Gather, Cast); past_key_values.N.key/value inputs and present.N.key/value outputs
in BNSH; the token embedding a Gather of a float table, or, with tied embeddings, a
GatherBlockQuantized of a Reshape of the lm_head's int4 weight. The families:

- qwen2: packed QKV with a bias (MatMulNBits then Add), tied embeddings;
- qwen3: separate q/k/v projections, per-head RMS norm of q and k as the builder spells it
  (Reshape, SimplifiedLayerNormalization over the head, Reshape) before the attention, or
  (`qk_norm_fused=True`) as ORT's CUDA fusion leaves it: the weights as the op's inputs 14, 15;
- llama: packed QKV, no bias;
- phi: packed QKV, partial rotary (cos/sin caches narrower than head / 2);
- gptoss: GPT-OSS's attention (qkv bias, a sink logit per head, a sliding window on alternating
  layers) over a dense SwiGLU MLP (its mixture of experts is not generated);
- gemma2: embeddings scaled by sqrt(hidden), four norms a layer, GELU (FastGelu), attention
  softcap and query scale, a sliding window on alternating layers (their caches full-length,
  or with `window_cache=C` window-sized ones the op evicts from: sliding_window_cache), final
  logit softcap.

With `lengths_inputs=True` the graph takes seqlens_k and total_sequence_length as inputs
instead of attention_mask (the mask's width grows every step; these keep their shapes).
Activations, scales, norms, caches and logits are float32 as the CPU export writes them, or
float16 (`dtype="float16"`) as the CUDA flavour does. The same model runs with either KV
convention: a growing past (present = past + the new rows)
or onnxruntime-genai's shared buffer (past and present of one capacity; `DecoderRun` feeds
either). Weights are random but scaled so activations stay near unit size through the layers.
The module needs the onnx package, which the wheel does not require: importing it is the
caller's choice.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

MS = "com.microsoft"


@dataclasses.dataclass(frozen=True)
class DecoderConfig:
    family: str
    hidden: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 16
    intermediate: int = 128
    vocab: int = 96
    max_len: int = 64
    block_size: int = 32
    rope_theta: float = 10000.0
    rotary_dim: int = 0  # 0: the whole head
    qkv_bias: bool = False
    qk_norm: bool = False
    qk_norm_fused: bool = False  # the norm weights as the op's inputs 14, 15 (ORT's CUDA fusion)
    head_sinks: bool = False  # a learned sink logit per head (GroupQueryAttention's head_sink)
    tied_embeddings: bool = False
    gemma: bool = False  # embedding scale, four norms, GELU
    attn_softcap: float = 0.0
    final_softcap: float = 0.0
    query_scale: float = 0.0  # 0: 1/sqrt(head_dim)
    sliding_window: int = -1  # on even layers, as Gemma 2 alternates
    window_cache: int = 0  # > 0: the sliding layers' caches hold this many rows, evicted in the op
    accuracy_level: int = 4
    epsilon: float = 1e-6
    dtype: str = "float32"  # the activations' type: "float16" as the CUDA flavour exports
    lengths_inputs: bool = False  # seqlens_k and total_sequence_length fed, not attention_mask
    seed: int = 0

    @property
    def rot(self) -> int:
        return self.rotary_dim or self.head_dim

    def windowed(self, layer: int) -> bool:
        """Whether `layer` keeps a window-sized cache (sliding_window_cache)."""
        return self.window_cache > 0 and self.sliding_window > 0 and layer % 2 == 0

    @property
    def np_dtype(self):
        return np.dtype(self.dtype)

    @property
    def onnx_dtype(self) -> int:
        return {"float32": TP.FLOAT, "float16": TP.FLOAT16}[self.dtype]


FAMILIES = {
    "qwen2": dict(qkv_bias=True, tied_embeddings=True),
    "qwen3": dict(qk_norm=True),
    "llama": dict(),
    "phi": dict(rotary_dim=16, head_dim=32),  # ORT wants rotary_dim / 2 a multiple of 8
    "gptoss": dict(qkv_bias=True, head_sinks=True, sliding_window=4),
    "gemma2": dict(gemma=True, attn_softcap=2.0, final_softcap=3.0, query_scale=1 / math.sqrt(24),
                   sliding_window=4),
}


def config(family: str, **overrides) -> DecoderConfig:
    """A small configuration of `family` (FAMILIES), with any field overridden."""
    if family not in FAMILIES:
        raise ValueError(f"unknown decoder family {family!r}; known: {sorted(FAMILIES)}")
    return DecoderConfig(family=family, **{**FAMILIES[family], **overrides})


def quantize_int4(w: np.ndarray, bs: int, dtype=np.float32):
    """w [N, K] (K a multiple of bs) as MatMulNBits stores it, symmetric with the implicit zero
    point 8: (B uint8 [N, K/bs, bs/2], scales [N, K/bs] in `dtype`, the dequantized weight)."""
    n, k = w.shape
    blocks = w.reshape(n, k // bs, bs)
    scales = (np.maximum(np.abs(blocks).max(-1), 1e-8) / 7.0).astype(dtype).astype(np.float32)
    q = np.clip(np.round(blocks / scales[..., None]) + 8, 0, 15).astype(np.uint8)
    packed = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)
    deq = ((q.astype(np.float32) - 8) * scales[..., None]).reshape(n, k)
    return packed, scales.astype(dtype), deq


class _Graph:
    def __init__(self, cfg: DecoderConfig):
        self.cfg = cfg
        self.rng = np.random.default_rng(cfg.seed)
        self.nodes, self.inits = [], []

    def init(self, name, array):
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op, ins, outs, name, domain="", **attrs):
        self.nodes.append(helper.make_node(op, ins, outs, name=name, domain=domain, **attrs))
        return outs[0] if len(outs) == 1 else outs

    def values(self, a):
        """a in the activations' type."""
        return np.asarray(a, np.float32).astype(self.cfg.np_dtype)

    def weight(self, n, k, gain=1.0):
        return (self.rng.standard_normal((n, k)) * gain / math.sqrt(k)).astype(np.float32)

    def matmul_nbits(self, name, x, n, k, w=None, quantized=None):
        cfg = self.cfg
        b, scales, _ = quantized or quantize_int4(self.weight(n, k) if w is None else w,
                                                 cfg.block_size, cfg.np_dtype)
        ins = [x, self.init(name + ".weight_Q4", b), self.init(name + ".weight_scales",
                                                               scales.reshape(-1))]
        return self.node("MatMulNBits", ins, [name + "/output_0"], name, MS, K=k, N=n, bits=4,
                         block_size=cfg.block_size, accuracy_level=cfg.accuracy_level)

    def norm_weight(self, name, d):
        return self.init(name, self.values(1 + 0.1 * self.rng.standard_normal(d)))

    def rms(self, name, x, d):
        return self.node("SimplifiedLayerNormalization", [x, self.norm_weight(name + ".weight", d)],
                         [name + "/output_0"], name, axis=-1, epsilon=self.cfg.epsilon,
                         stash_type=1)

    def skip_rms(self, name, x, skip, d):
        """(normed, input + skip) as the builder takes them: outputs 0 and 3."""
        outs = [name + "/output_0", "", "", name + "/output_3"]
        self.node("SkipSimplifiedLayerNormalization",
                  [x, skip, self.norm_weight(name + ".weight", d)], outs, name, MS,
                  epsilon=self.cfg.epsilon)
        return outs[0], outs[3]


def _rotary_caches(cfg: DecoderConfig):
    half = cfg.rot // 2
    inv = 1.0 / (cfg.rope_theta ** (np.arange(half) * 2.0 / cfg.rot))
    ang = np.arange(cfg.max_len)[:, None] * inv[None, :]
    return np.cos(ang).astype(cfg.np_dtype), np.sin(ang).astype(cfg.np_dtype)


def _lengths(g: _Graph):
    """seqlens_k and total_sequence_length from attention_mask, as the builder computes them."""
    g.init("/model/constants/axes_1", np.array([1], np.int64))
    g.init("/model/constants/one", np.array(1, np.int64))
    g.init("/model/constants/index_1", np.array(1, np.int64))
    p = "/model/attn_mask_reformat/attn_mask_subgraph"
    s = g.node("ReduceSum", ["attention_mask", "/model/constants/axes_1"], [p + "/ReduceSum/out"],
               p + "/ReduceSum", keepdims=0)
    s = g.node("Sub", [s, "/model/constants/one"], [p + "/Sub/out"], p + "/Sub")
    seqlens = g.node("Cast", [s, ], [p + "/seqlens_k"], p + "/Cast", to=TP.INT32)
    sh = g.node("Shape", ["attention_mask"], [p + "/Shape/out"], p + "/Shape")
    t = g.node("Gather", [sh, "/model/constants/index_1"], [p + "/Gather/out"], p + "/Gather",
               axis=0)
    total = g.node("Cast", [t], [p + "/total_seq_len"], p + "/Cast_1", to=TP.INT32)
    return seqlens, total


def _attention(g: _Graph, i: int, x: str, seqlens: str, total: str) -> str:
    cfg = g.cfg
    d, nq, nkv, h = cfg.hidden, cfg.heads, cfg.kv_heads, cfg.head_dim
    p = f"/model/layers.{i}/attn"
    if cfg.qk_norm:  # separate projections: the norm needs q and k apart
        q = g.matmul_nbits(p + "/q_proj/MatMul", x, nq * h, d)
        k = g.matmul_nbits(p + "/k_proj/MatMul", x, nkv * h, d)
        v = g.matmul_nbits(p + "/v_proj/MatMul", x, nkv * h, d)
        if cfg.qk_norm_fused:  # the same weights, drawn in the same order, given to the op
            norms = [g.norm_weight(f"{p}/{nm}_norm/SimplifiedLayerNormalization.weight", h)
                     for nm in ("q", "k")]
        g.init(p + "/heads_shape", np.array([0, 0, -1, h], np.int64))
        g.init(p + "/flat_shape", np.array([0, 0, -1], np.int64))
        for nm in ("q", "k") if not cfg.qk_norm_fused else ():
            src = q if nm == "q" else k
            r = g.node("Reshape", [src, p + "/heads_shape"], [f"{p}/{nm}_norm/Reshape/out"],
                       f"{p}/{nm}_norm/Reshape")
            r = g.rms(f"{p}/{nm}_norm/SimplifiedLayerNormalization", r, h)
            r = g.node("Reshape", [r, p + "/flat_shape"], [f"{p}/{nm}_norm/Reshape_1/out"],
                       f"{p}/{nm}_norm/Reshape_1")
            q, k = (r, k) if nm == "q" else (q, r)
        qkv = [q, k, v]
    else:
        packed = g.matmul_nbits(p + "/qkv_proj/MatMul", x, (nq + 2 * nkv) * h, d)
        if cfg.qkv_bias:
            bias = g.init(p + "/qkv_proj/bias",
                          g.values(0.1 * g.rng.standard_normal((nq + 2 * nkv) * h)))
            packed = g.node("Add", [packed, bias], [p + "/qkv_proj/Add/out"],
                            p + "/qkv_proj/Add")
        qkv = [packed, "", ""]
    attrs = dict(num_heads=nq, kv_num_heads=nkv, do_rotary=1, rotary_interleaved=0,
                 local_window_size=cfg.sliding_window if i % 2 == 0 else -1,
                 softcap=cfg.attn_softcap, scale=cfg.query_scale)
    if cfg.windowed(i):
        attrs["sliding_window_cache"] = 1
    outs = [p + "/GroupQueryAttention/out", f"present.{i}.key", f"present.{i}.value"]
    ins = qkv + [f"past_key_values.{i}.key", f"past_key_values.{i}.value", seqlens, total,
                 "cos_cache", "sin_cache"]
    if cfg.head_sinks or (cfg.qk_norm and cfg.qk_norm_fused):
        ins += ["", ""]
        ins.append(g.init(p + "/sinks", g.values(g.rng.standard_normal(nq)))
                   if cfg.head_sinks else "")
    if cfg.qk_norm and cfg.qk_norm_fused:
        ins += ["", ""] + norms
        attrs["qk_norm_epsilon"] = cfg.epsilon
    g.node("GroupQueryAttention", ins, outs, p + "/GroupQueryAttention", MS, **attrs)
    return g.matmul_nbits(p + "/o_proj/MatMul", outs[0], d, nq * h)


def _mlp(g: _Graph, i: int, x: str) -> str:
    cfg = g.cfg
    d, m = cfg.hidden, cfg.intermediate
    p = f"/model/layers.{i}/mlp"
    gate = g.matmul_nbits(p + "/gate_proj/MatMul", x, m, d)
    up = g.matmul_nbits(p + "/up_proj/MatMul", x, m, d)
    if cfg.gemma:
        act = g.node("FastGelu", [gate], [p + "/act_fn/out"], p + "/act_fn/FastGelu", MS)
    else:
        sig = g.node("Sigmoid", [gate], [p + "/act_fn/Sigmoid/out"], p + "/act_fn/Sigmoid")
        act = g.node("Mul", [gate, sig], [p + "/act_fn/Mul/out"], p + "/act_fn/Mul")
    prod = g.node("Mul", [act, up], [p + "/Mul/out"], p + "/Mul")
    return g.matmul_nbits(p + "/down_proj/MatMul", prod, d, m)


def build(cfg: DecoderConfig | str, **overrides) -> onnx.ModelProto:
    """The decoder of `cfg` (a DecoderConfig, or a family name with overrides) as an ONNX model
    (ir 10, ai.onnx 21, com.microsoft 1)."""
    if isinstance(cfg, str):
        cfg = config(cfg, **overrides)
    if cfg.hidden % cfg.block_size or cfg.intermediate % cfg.block_size or \
            (cfg.heads * cfg.head_dim) % cfg.block_size:
        raise ValueError("hidden, intermediate and heads * head_dim must be multiples of the "
                         "block size")
    g = _Graph(cfg)
    d, v = cfg.hidden, cfg.vocab
    cos, sin = _rotary_caches(cfg)
    g.init("cos_cache", cos)
    g.init("sin_cache", sin)
    if cfg.lengths_inputs:
        seqlens, total = "seqlens_k", "total_sequence_length"
    else:
        seqlens, total = _lengths(g)
    lm_w = g.weight(v, d, gain=2.0)
    lm_q = quantize_int4(lm_w, cfg.block_size, cfg.np_dtype)
    if cfg.tied_embeddings:  # the table is the lm_head's int4 weight, viewed [V, D/2]
        g.init("/model/embed_tokens/shape", np.array([v, d // 2], np.int64))
        table = g.node("Reshape", ["lm_head.MatMul.weight_Q4", "/model/embed_tokens/shape"],
                       ["/model/embed_tokens/Reshape/out"], "/model/embed_tokens/Reshape")
        emb = g.node("GatherBlockQuantized",
                     [table, "input_ids", g.init("/model/embed_tokens/scales", lm_q[1])],
                     ["/model/embed_tokens/out"], "/model/embed_tokens/GatherBlockQuantized", MS,
                     bits=4, block_size=cfg.block_size, gather_axis=0, quantize_axis=1)
    else:
        table = g.init("model.embed_tokens.weight",
                       g.values(g.rng.standard_normal((v, d))))
        emb = g.node("Gather", [table, "input_ids"], ["/model/embed_tokens/out"],
                     "/model/embed_tokens/Gather", axis=0)
    if cfg.gemma:
        emb = g.node("Mul", [emb, g.init("/model/embed_tokens/scale",
                                         g.values(math.sqrt(d)))],
                     ["/model/embed_tokens/Mul/out"], "/model/embed_tokens/Mul")
    out, residual = None, emb
    for i in range(cfg.layers):
        p = f"/model/layers.{i}"
        if i == 0:
            x = g.rms(p + "/input_layernorm/SimplifiedLayerNormalization", emb, d)
        else:
            x, residual = g.skip_rms(p + "/input_layernorm/SkipLayerNorm", out, residual, d)
        attn = _attention(g, i, x, seqlens, total)
        if cfg.gemma:
            attn = g.rms(p + "/post_attention_layernorm/SimplifiedLayerNormalization", attn, d)
            x, residual = g.skip_rms(p + "/pre_feedforward_layernorm/SkipLayerNorm", attn,
                                     residual, d)
        else:
            x, residual = g.skip_rms(p + "/post_attention_layernorm/SkipLayerNorm", attn,
                                     residual, d)
        out = _mlp(g, i, x)
        if cfg.gemma:
            out = g.rms(p + "/post_feedforward_layernorm/SimplifiedLayerNormalization", out, d)
    x, _ = g.skip_rms("/model/norm/SkipLayerNorm", out, residual, d)
    logits = g.matmul_nbits("lm_head.MatMul", x, v, d, quantized=lm_q)
    if cfg.final_softcap:
        c = g.init("/lm_head/softcap", g.values(cfg.final_softcap))
        t = g.node("Div", [logits, c], ["/lm_head/Div/out"], "/lm_head/Div")
        t = g.node("Tanh", [t], ["/lm_head/Tanh/out"], "/lm_head/Tanh")
        logits = g.node("Mul", [t, c], ["/lm_head/Mul/out"], "/lm_head/Mul")
    g.nodes.append(helper.make_node("Identity", [logits], ["logits"], name="/lm_head/Identity"))
    # the graph's inputs and outputs, with the builder's names and symbolic dims
    kv_shape = ["batch_size", cfg.kv_heads, "past_sequence_length", cfg.head_dim]
    present_shape = ["batch_size", cfg.kv_heads, "total_sequence_length", cfg.head_dim]
    inputs = [helper.make_tensor_value_info("input_ids", TP.INT64,
                                            ["batch_size", "sequence_length"])]
    if cfg.lengths_inputs:
        inputs += [helper.make_tensor_value_info("seqlens_k", TP.INT32, ["batch_size"]),
                   helper.make_tensor_value_info("total_sequence_length", TP.INT32, [])]
    else:
        inputs.append(helper.make_tensor_value_info("attention_mask", TP.INT64,
                                                    ["batch_size", "total_sequence_length"]))
    outputs = [helper.make_tensor_value_info("logits", cfg.onnx_dtype,
                                             ["batch_size", "sequence_length", v])]
    window_shape = ["batch_size", cfg.kv_heads, "window_cache_length", cfg.head_dim]
    for i in range(cfg.layers):
        for kind in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(
                f"past_key_values.{i}.{kind}", cfg.onnx_dtype,
                window_shape if cfg.windowed(i) else kv_shape))
            outputs.append(helper.make_tensor_value_info(
                f"present.{i}.{kind}", cfg.onnx_dtype,
                window_shape if cfg.windowed(i) else present_shape))
    graph = helper.make_graph(g.nodes, f"{cfg.family}_decoder", inputs, outputs, g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                    helper.make_opsetid(MS, 1)])
    model.ir_version = 10
    return model


def with_accuracy_level(model: onnx.ModelProto, level: int) -> onnx.ModelProto:
    """A copy of `model` whose MatMulNBits nodes have accuracy_level `level` (ORT's CPU kernel
    quantizes activations to int8 at level 4; a reference runs at 0)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for n in out.graph.node:
        for a in n.attribute:
            if a.name == "accuracy_level":
                a.i = level
    return out


class DecoderRun:
    """Feeds one session a prefill and decode steps, as onnxruntime-genai does, holding the
    cache between steps: `shared=False` a growing past (present = past + the new rows);
    `shared=True` one buffer of `capacity` rows fed back as the next past. Batch entries may
    have prompts of their own lengths (right-padded; attention_mask marks the valid tokens,
    whose sum gives seqlens_k)."""

    def __init__(self, session, cfg: DecoderConfig, batch: int, shared: bool, capacity: int = 0):
        self.session, self.cfg, self.shared = session, cfg, shared
        rows = capacity if shared else 0
        if shared and capacity <= 0:
            raise ValueError("the shared buffer needs a capacity")
        zeros = np.zeros((batch, cfg.kv_heads, rows, cfg.head_dim), cfg.np_dtype)
        window = np.zeros((batch, cfg.kv_heads, cfg.window_cache, cfg.head_dim), cfg.np_dtype)
        self.past = {f"past_key_values.{i}.{k}": window if cfg.windowed(i) else zeros
                     for i in range(cfg.layers) for k in ("key", "value")}
        self.lengths = np.zeros(batch, np.int64)

    def step(self, tokens: np.ndarray, lengths=None) -> np.ndarray:
        """Runs `tokens` [B, S] (entry b's first lengths[b] valid, the rest padding; all valid
        when lengths is None) and returns the logits [B, S, V]."""
        tokens = np.asarray(tokens, np.int64)
        b, s = tokens.shape
        new = np.full(b, s) if lengths is None else np.asarray(lengths)
        total = int((self.lengths + new).max())
        feeds = {"input_ids": tokens, **self.past}
        if self.cfg.lengths_inputs:
            feeds["seqlens_k"] = (self.lengths + new - 1).astype(np.int32)
            feeds["total_sequence_length"] = np.array(total, np.int32)
        else:
            feeds["attention_mask"] = (np.arange(total)[None, :] <
                                       (self.lengths + new)[:, None]).astype(np.int64)
        names = [o.name for o in self.session.get_outputs()]
        got = dict(zip(names, self.session.run(None, feeds)))
        for i in range(self.cfg.layers):
            for k in ("key", "value"):
                self.past[f"past_key_values.{i}.{k}"] = got[f"present.{i}.{k}"]
        self.lengths = self.lengths + new
        return got["logits"]
