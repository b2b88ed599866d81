"""A Qwen3.5-style hybrid decoder stack with random weights, for tests and benchmarks of the
state-space operators: GatedDeltaNet blocks built from the com.microsoft fused operators

    x -> MatMul -> CausalConvWithState (channels-last, silu) -> q | k | v
    x -> MatMul -> a, b -> LinearAttentionGate -> decay, beta
    LinearAttention(q, k, v, state, decay, beta) -> GatedRMSNorm(., z = x W_z) -> MatMul W_o
    GatedAdd(x, ., gate = x W_gate)

interleaved (every `attn_every`-th layer) with a full-attention layer over a KV cache written by
TensorScatter and computed from standard ops (MatMul, Softmax, Reshape, Transpose, Add, Mul),
with an additive mask fed as an input. Every recurrent, convolution and cache state is a graph
input and its successor a graph output, as in a decode loop.

    python bench/hybrid_decoder.py --size tiny --out /tmp/tiny.onnx
    python bench/hybrid_decoder.py --size realistic --batch 1 --tokens 1 --bench
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


@dataclass(frozen=True)
class Config:
    hidden: int = 2048
    la_heads: int = 16        # LinearAttention value heads (kv_num_heads = H)
    la_key_heads: int = 16    # key heads, dividing la_heads
    la_query_heads: int = 16  # q_num_heads
    dk: int = 128
    dv: int = 128
    conv_kernel: int = 4
    attn_heads: int = 16      # full-attention layer heads (no GQA)
    attn_head_dim: int = 128
    cache: int = 256          # KV-cache capacity (tokens)
    layers: int = 4
    attn_every: int = 4       # layer i is full attention when (i + 1) % attn_every == 0
    update_rule: str = "gated_delta"
    circular_cache: bool = False
    seed: int = 0


SIZES = {
    "tiny": Config(hidden=32, la_heads=4, la_key_heads=2, la_query_heads=2, dk=8, dv=6,
                   attn_heads=2, attn_head_dim=8, cache=16, layers=4, attn_every=2),
    "small": Config(hidden=512, la_heads=8, la_key_heads=4, la_query_heads=4, dk=64, dv=64,
                    attn_heads=8, attn_head_dim=64, cache=128),
    "realistic": Config(),
}


class _Builder:
    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.rng = np.random.default_rng(cfg.seed)
        self.nodes, self.inits, self.inputs, self.outputs = [], [], [], []
        self.count = 0

    def name(self, stem):
        self.count += 1
        return f"{stem}_{self.count}"

    def weight(self, stem, shape, scale):
        n = self.name(stem)
        w = self.rng.standard_normal(shape, dtype=np.float32)
        w *= np.float32(scale)
        self.inits.append(numpy_helper.from_array(w, n))
        return n

    def const(self, stem, value, dtype=np.float32):
        n = self.name(stem)
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype), n))
        return n

    def node(self, op, ins, n_out=1, domain="", **attrs):
        name = self.name(op.lower())
        outs = [f"{name}_out{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op, ins, outs, name=name, domain=domain, **attrs))
        return outs if n_out > 1 else outs[0]

    def matmul(self, x, n_in, n_out, scale=None):
        w = self.weight("w", (n_in, n_out), scale if scale is not None else 1 / np.sqrt(n_in))
        return self.node("MatMul", [x, w])

    # --- a GatedDeltaNet block ------------------------------------------------------------------
    def linear_attention_layer(self, x, i):
        c = self.cfg
        qk = c.la_query_heads * c.dk
        kk = c.la_key_heads * c.dk
        vv = c.la_heads * c.dv
        conv_c = qk + kk + vv
        carry = c.conv_kernel - 1
        conv_state = f"conv_state_{i}"
        rec_state = f"rec_state_{i}"
        self.inputs += [helper.make_tensor_value_info(conv_state, F, ["batch", carry, conv_c]),
                        helper.make_tensor_value_info(rec_state, F,
                                                      ["batch", c.la_heads, c.dk, c.dv])]
        # entries ~ 1/sqrt(dk), so beta * |k|^2 stays below 2 (a stable delta rule)
        mixed = self.matmul(x, c.hidden, conv_c, scale=1 / np.sqrt(c.hidden * c.dk))
        conv_w = self.weight("conv_w", (conv_c, 1, c.conv_kernel), 0.5)
        conv_b = self.weight("conv_b", (conv_c,), 0.1)
        conv_y, conv_present = self.node(
            "CausalConvWithState", [mixed, conv_w, conv_b, conv_state], 2,
            domain="com.microsoft", channels_last=1, activation="silu")
        q = self.node("Slice", [conv_y, self.const("s", [0], np.int64),
                                self.const("e", [qk], np.int64), self.const("a", [2], np.int64)])
        k = self.node("Slice", [conv_y, self.const("s", [qk], np.int64),
                                self.const("e", [qk + kk], np.int64),
                                self.const("a", [2], np.int64)])
        v = self.node("Slice", [conv_y, self.const("s", [qk + kk], np.int64),
                                self.const("e", [conv_c], np.int64),
                                self.const("a", [2], np.int64)])
        a = self.matmul(x, c.hidden, c.la_heads)
        b = self.matmul(x, c.hidden, c.la_heads)
        dt_bias = self.weight("dt_bias", (c.la_heads,), 0.5)
        decay_scale = self.const("decay_scale",
                                 -np.exp(self.rng.uniform(-2, 0.5, c.la_heads)).astype(np.float32))
        decay, beta = self.node("LinearAttentionGate", [a, dt_bias, decay_scale, b], 2,
                                domain="com.microsoft")
        rule = c.update_rule
        ins = [q, k, v, rec_state,
               decay if rule in ("gated", "gated_delta") else "",
               beta if rule in ("delta", "gated_delta") else ""]
        while ins[-1] == "":
            ins.pop()
        o, rec_present = self.node("LinearAttention", ins, 2, domain="com.microsoft",
                                   q_num_heads=c.la_query_heads, kv_num_heads=c.la_heads,
                                   update_rule=rule)
        ho = max(c.la_query_heads, c.la_heads)
        z = self.matmul(x, c.hidden, ho * c.dv)
        norm_w = self.const("norm_w", 1 + 0.1 * self.rng.standard_normal(c.dv))
        y = self.node("GatedRMSNorm", [o, norm_w, z], domain="com.microsoft", epsilon=1e-6)
        out = self.matmul(y, ho * c.dv, c.hidden)
        gate = self.matmul(x, c.hidden, 1)
        res = self.node("GatedAdd", [x, out, gate], domain="com.microsoft")
        self.outputs += [helper.make_tensor_value_info(conv_present, F, None),
                         helper.make_tensor_value_info(rec_present, F, None)]
        self.rename_output(conv_present, f"present_conv_state_{i}")
        self.rename_output(rec_present, f"present_rec_state_{i}")
        return res

    # --- a full-attention block over a TensorScatter KV cache -----------------------------------
    def attention_layer(self, x, i):
        c = self.cfg
        h, d = c.attn_heads, c.attn_head_dim
        past_k, past_v = f"past_key_{i}", f"past_value_{i}"
        self.inputs += [helper.make_tensor_value_info(n, F, ["batch", h, c.cache, d])
                        for n in (past_k, past_v)]
        heads = self.const("heads", [0, 0, h, d], np.int64)

        def split_heads(t):
            t = self.node("Reshape", [t, heads])
            return self.node("Transpose", [t], perm=[0, 2, 1, 3])  # [B, H, T, d]

        q = split_heads(self.matmul(x, c.hidden, h * d))
        k = split_heads(self.matmul(x, c.hidden, h * d))
        v = split_heads(self.matmul(x, c.hidden, h * d))
        mode = "circular" if c.circular_cache else "linear"
        k_all = self.node("TensorScatter", [past_k, k, "write_indices"], mode=mode, axis=2)
        v_all = self.node("TensorScatter", [past_v, v, "write_indices"], mode=mode, axis=2)
        kt = self.node("Transpose", [k_all], perm=[0, 1, 3, 2])
        scores = self.node("MatMul", [q, kt])
        scores = self.node("Mul", [scores, self.const("scale", 1 / np.sqrt(d))])
        scores = self.node("Add", [scores, "attention_mask"])
        probs = self.node("Softmax", [scores], axis=-1)
        ctx = self.node("MatMul", [probs, v_all])
        ctx = self.node("Transpose", [ctx], perm=[0, 2, 1, 3])
        ctx = self.node("Reshape", [ctx, self.const("merge", [0, 0, h * d], np.int64)])
        out = self.matmul(ctx, h * d, c.hidden)
        self.outputs += [helper.make_tensor_value_info(k_all, F, None),
                         helper.make_tensor_value_info(v_all, F, None)]
        self.rename_output(k_all, f"present_key_{i}")
        self.rename_output(v_all, f"present_value_{i}")
        return self.node("Add", [x, out])

    def rename_output(self, old, new):
        for n in self.nodes:
            n.output[:] = [new if o == old else o for o in n.output]
            n.input[:] = [new if o == old else o for o in n.input]
        for o in self.outputs:
            if o.name == old:
                o.name = new


def is_attention(cfg: Config, layer: int) -> bool:
    return (layer + 1) % cfg.attn_every == 0


def build(cfg: Config) -> onnx.ModelProto:
    b = _Builder(cfg)
    b.inputs.append(helper.make_tensor_value_info("hidden", F, ["batch", "tokens", cfg.hidden]))
    if any(is_attention(cfg, i) for i in range(cfg.layers)):
        b.inputs += [helper.make_tensor_value_info("write_indices", TensorProto.INT64, ["batch"]),
                     helper.make_tensor_value_info("attention_mask", F,
                                                   ["batch", 1, "tokens", cfg.cache])]
    x = "hidden"
    for i in range(cfg.layers):
        x = b.attention_layer(x, i) if is_attention(cfg, i) else b.linear_attention_layer(x, i)
    b.outputs.insert(0, helper.make_tensor_value_info("output", F, None))
    b.rename_output(x, "output")
    graph = helper.make_graph(b.nodes, "hybrid_decoder", b.inputs, b.outputs, b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10
    return model


def feeds(cfg: Config, batch: int = 1, tokens: int = 1, past: int = 0, seed: int = 1):
    """Inputs for one call: `tokens` new tokens after `past` cached ones (random states)."""
    rng = np.random.default_rng(seed)
    f = {"hidden": rng.standard_normal((batch, tokens, cfg.hidden)).astype(np.float32)}
    qk = cfg.la_query_heads * cfg.dk
    conv_c = qk + cfg.la_key_heads * cfg.dk + cfg.la_heads * cfg.dv
    has_attention = False
    for i in range(cfg.layers):
        if is_attention(cfg, i):
            has_attention = True
            shape = (batch, cfg.attn_heads, cfg.cache, cfg.attn_head_dim)
            f[f"past_key_{i}"] = rng.standard_normal(shape).astype(np.float32)
            f[f"past_value_{i}"] = rng.standard_normal(shape).astype(np.float32)
        else:
            f[f"conv_state_{i}"] = (rng.standard_normal((batch, cfg.conv_kernel - 1, conv_c))
                                    * 0.5).astype(np.float32)
            f[f"rec_state_{i}"] = (rng.standard_normal((batch, cfg.la_heads, cfg.dk, cfg.dv))
                                   * 0.1).astype(np.float32)
    if has_attention:
        if not cfg.circular_cache and past + tokens > cfg.cache:
            raise ValueError(f"{past} + {tokens} tokens exceed the cache of {cfg.cache}")
        f["write_indices"] = np.full(batch, past, np.int64)
        visible = np.arange(cfg.cache)[None, :] <= (past + np.arange(tokens))[:, None]
        mask = np.where(visible, 0.0, -1e9).astype(np.float32)
        f["attention_mask"] = np.broadcast_to(mask, (batch, 1, tokens, cfg.cache)).copy()
    return f


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", choices=sorted(SIZES), default="tiny")
    p.add_argument("--layers", type=int)
    p.add_argument("--rule", choices=["linear", "gated", "delta", "gated_delta"])
    p.add_argument("--out", help="write the model here")
    p.add_argument("--bench", action="store_true", help="time MLX EP against ORT's CPU provider")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--tokens", type=int, default=1)
    p.add_argument("--past", type=int, default=0)
    p.add_argument("--runs", type=int, default=5)
    a = p.parse_args(argv)
    cfg = SIZES[a.size]
    if a.layers:
        cfg = replace(cfg, layers=a.layers)
    if a.rule:
        cfg = replace(cfg, update_rule=a.rule)
    model = build(cfg)
    if a.out:
        onnx.save(model, a.out)
        print(f"wrote {a.out}: {len(model.graph.node)} nodes")
    if a.bench:
        import onnxruntime as ort

        from onnxruntime_ep_mlx import compare
        f = feeds(cfg, a.batch, a.tokens, a.past)
        data = model.SerializeToString()
        cpu = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
        mlx_s, _ = compare.mlx_session(data, report=False)
        on, total = compare.coverage(mlx_s)
        t_cpu, _, out_cpu = compare.time_runs(cpu, f, runs=a.runs)
        t_mlx, _, out_mlx = compare.time_runs(mlx_s, f, runs=a.runs)
        print(f"{a.size}: batch {a.batch}, {a.tokens} token(s) after {a.past}; "
              f"MLX {on}/{total} nodes; CPU {t_cpu:.2f} ms, MLX {t_mlx:.2f} ms; max |diff| "
              f"{compare.max_abs_diff(out_mlx, out_cpu):.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
