"""The benchmark's models and their inputs: real models from installed packages (cached outside
git where they are built), plus a one-node graph that measures per-Run overhead. Each entry
returns (model path or bytes, feeds)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

from onnxruntime_ep_mlx import minilm


def _package_file(package: str, *parts: str) -> str:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {package} is not installed (run `make setup`)")
    path = Path(list(spec.submodule_search_locations)[0]).joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(path)
    return str(path)


def minilm_case(batch: int, seq: int = 128):
    path = str(minilm.ensure_model())
    sentences = (minilm.SENTENCES * ((batch + 3) // 4))[:batch]
    ids, mask = minilm.tokenize(sentences, max_length=seq, pad_to=seq)
    return path, {"input_ids": ids, "attention_mask": mask}


def ocr_case(kind: str, batch: int = 1):
    rng = np.random.default_rng(0)
    files = {"det": ("ch_PP-OCRv4_det_infer.onnx", (batch, 3, 640, 640)),
             "rec": ("ch_PP-OCRv4_rec_infer.onnx", (batch, 3, 48, 320)),
             "cls": ("ch_ppocr_mobile_v2.0_cls_infer.onnx", (batch, 3, 48, 192))}
    name, shape = files[kind]
    path = _package_file("rapidocr_onnxruntime", "models", name)
    return path, {"x": rng.standard_normal(shape).astype(np.float32)}


def silero_case():
    path = _package_file("silero_vad", "data", "silero_vad.onnx")
    rng = np.random.default_rng(0)
    return path, {"input": rng.standard_normal((1, 512)).astype(np.float32) * 0.1,
                  "state": np.zeros((2, 1, 128), np.float32),
                  "sr": np.array(16000, np.int64)}


def magika_case():
    path = _package_file("magika", "models", "standard_v3_3", "model.onnx")
    rng = np.random.default_rng(0)
    return path, {"bytes": rng.integers(0, 257, size=(1, 2048)).astype(np.int32)}


def one_node_case():
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["c"], name="add")], "one_node",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 1]),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 1])],
                          [helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, 1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    one = np.ones((1, 1), np.float32)
    return m.SerializeToString(), {"a": one, "b": one}


CASES = {
    "one-node Add 1x1 (per-Run overhead)": one_node_case,
    "all-MiniLM-L6-v2 b1 s128": lambda: minilm_case(1),
    "all-MiniLM-L6-v2 b8 s128": lambda: minilm_case(8),
    "PP-OCRv4 det 1x3x640x640": lambda: ocr_case("det"),
    "PP-OCRv4 rec 1x3x48x320": lambda: ocr_case("rec"),
    "PP-OCR cls 1x3x48x192": lambda: ocr_case("cls"),
    "silero-vad 1x512": silero_case,
    "magika standard_v3_3 1x2048": magika_case,
}

# Batch 8 of the OCR models: where a GPU should pull ahead. Only the GPU benchmark
# (bench/gpu/providers.py) runs them; on this project's 2-core CI machine they would take minutes.
GPU_CASES = dict(CASES, **{
    "PP-OCRv4 det b8 8x3x640x640": lambda: ocr_case("det", 8),
    "PP-OCRv4 rec b8 8x3x48x320": lambda: ocr_case("rec", 8),
})
