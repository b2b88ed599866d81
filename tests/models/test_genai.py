"""onnxruntime-genai (the version pinned in deps/pins.env) generates with the MLX EP.

Each test writes a model folder as onnxruntime-genai's model builder leaves it for the CPU with
int4 weights: a decoder of python/onnxruntime_ep_mlx/decoders.py (the builder's input and
output names, GroupQueryAttention over one shared KV buffer) and a genai_config.json (the
builder's decoder section; search.past_present_share_buffer true). Token ids are fed with
Generator.append_tokens, so no tokenizer is needed. genai then drives the session as it does
a real model: its own attention_mask, its own cache buffers, its own greedy search.

The reference is the same folder on genai's default provider (ORT's CPU provider) with the
MatMulNBits nodes at accuracy_level 0: ORT's CPU kernel at the exported level 4 quantizes
activations to int8 (~0.75% of max|y|), the EP always computes as level 0 does, and both then
differ only in summation order (measured at most 6e-6 in these logits of standard deviation
~2; 1e-4 as in tests/ops/test_llm_decoders.py). Greedy tokens must be equal.

Proof the EP ran: the MLX folder's session options carry session.disable_cpu_ep_fallback (a
node left to ORT's CPU provider fails the session), the partition report (report_file,
passed through genai's provider options) has every node claimed in one group, and the run
record (stats_file) counts the group's runs with no fallback or failure.

eos: min_length = max_length keeps genai from stopping early on a random model's eos token,
so every entry produces NEW_TOKENS tokens.
"""
import gc
import json
import os

import numpy as np
import onnx
import pytest

import onnxruntime_ep_mlx as mlx
from onnxruntime_ep_mlx import decoders as D

# genai sends usage telemetry and keeps an offline queue of it under ~/.cache unless this is set
# before it loads (its src/telemetry); the tests write nothing outside their own folders.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
try:
    import onnxruntime_genai as og
except ImportError as e:  # not installed, or no wheel for this platform (see scripts/setup.sh)
    pytest.skip(f"onnxruntime_genai is not importable ({e}); scripts/setup.sh installs the "
                "pinned version", allow_module_level=True)

NEW_TOKENS = 16
ATOL = 1e-4
PAD, BOS, EOS = 0, 1, 2
PROMPT = [5, 17, 42, 3, 9, 60]
_registered = False


def register():
    """Registers the plugin with genai's ONNX Runtime (once per process: genai refuses a second
    registration under the same name)."""
    global _registered
    if not _registered:
        og.register_execution_provider_library(mlx.REGISTRATION_NAME, mlx.library_path())
        _registered = True


def model_folder(path, cfg, accuracy_level=None, session_options=None, provider_options=None):
    """Writes model.onnx and genai_config.json (the builder's keys for a decoder) into `path`."""
    path.mkdir(parents=True, exist_ok=True)
    model = D.build(cfg)
    if accuracy_level is not None:
        model = D.with_accuracy_level(model, accuracy_level)
    onnx.save(model, str(path / "model.onnx"))
    config = {
        "model": {
            "type": cfg.family,
            "bos_token_id": BOS, "eos_token_id": EOS, "pad_token_id": PAD,
            "vocab_size": cfg.vocab,
            "context_length": cfg.max_len,
            "decoder": {
                "session_options": {"log_id": "onnxruntime-genai",
                                    "provider_options": provider_options or [],
                                    **(session_options or {})},
                "filename": "model.onnx",
                "head_size": cfg.head_dim,
                "hidden_size": cfg.hidden,
                "num_attention_heads": cfg.heads,
                "num_key_value_heads": cfg.kv_heads,
                "num_hidden_layers": cfg.layers,
                "inputs": {"input_ids": "input_ids", "attention_mask": "attention_mask",
                           "past_key_names": "past_key_values.%d.key",
                           "past_value_names": "past_key_values.%d.value"},
                "outputs": {"logits": "logits", "present_key_names": "present.%d.key",
                            "present_value_names": "present.%d.value"},
            },
        },
        "search": {"do_sample": False, "num_beams": 1, "max_length": cfg.max_len,
                   "past_present_share_buffer": True},
    }
    (path / "genai_config.json").write_text(json.dumps(config, indent=1))
    return str(path)


def generate(config, prompts):
    """Greedy generation of NEW_TOKENS tokens after each of `prompts` (a [B, S] list, right-
    padded with PAD as genai's tokenizer pads a batch); returns (tokens [B, NEW_TOKENS], the
    logits genai chose each token from [NEW_TOKENS, B, V])."""
    model = og.Model(config)
    params = og.GeneratorParams(model)
    length = len(prompts[0]) + NEW_TOKENS
    params.set_search_options(do_sample=False, batch_size=len(prompts), max_length=length,
                              min_length=length)
    generator = og.Generator(model, params)
    generator.append_tokens(np.array(prompts, np.int32))
    tokens, logits = [], []
    while not generator.is_done():
        logits.append(np.array(generator.get_logits()).reshape(len(prompts), -1))
        generator.generate_next_token()
        tokens.append(np.array(generator.get_next_tokens()))
    del generator, params, model
    gc.collect()  # the EP writes its run record when genai's session is released
    return np.array(tokens).T, np.array(logits)


def on_cpu(folder):
    config = og.Config(folder)
    config.clear_providers()  # genai's default: ORT's CPU provider alone
    return config


def on_mlx(folder, **provider_options):
    """The calls the README shows: register, clear_providers, append_provider, options."""
    register()
    config = og.Config(folder)
    config.clear_providers()
    config.append_provider(mlx.EP_NAME)
    for key, value in provider_options.items():
        config.set_provider_option(mlx.EP_NAME, key, str(value))
    return config


NO_CPU_FALLBACK = {"session.disable_cpu_ep_fallback": "1"}


def mlx_and_cpu(tmp_path, cfg, prompts, provider_options=None):
    """Generates on the MLX EP (the exported folder, no CPU fallback, report and run record
    written) and on ORT's CPU provider (the reference folder); checks tokens and logits;
    returns (MLX tokens, partition report, run record)."""
    report, stats = tmp_path / "report.json", tmp_path / "stats.json"
    mine = model_folder(tmp_path / "mlx", cfg, session_options=NO_CPU_FALLBACK)
    ref = model_folder(tmp_path / "cpu", cfg, accuracy_level=0)
    got, got_logits = generate(on_mlx(mine, report_file=report, stats_file=stats,
                                      **(provider_options or {})), prompts)
    want, want_logits = generate(on_cpu(ref), prompts)
    assert got.shape == want.shape == (len(prompts), NEW_TOKENS)
    diff = float(np.abs(got_logits - want_logits).max())
    print(f"{cfg.family} batch {len(prompts)}: tokens {got.tolist()}, max |logit diff| {diff:.2e}")
    np.testing.assert_allclose(got_logits, want_logits, rtol=0, atol=ATOL)
    np.testing.assert_array_equal(got, want)
    rep, record = json.loads(report.read_text()), json.loads(stats.read_text())
    check_ran_on_mlx(rep, record, NEW_TOKENS)
    return got, rep, record


def check_ran_on_mlx(rep, record, steps):
    """Every node claimed in one group, which ran once per generated token (genai runs the
    model once per step: the prompt, then each new token but the last), never failing over to
    ORT's CPU provider, and traced twice: the prompt, then one variant for every decode step."""
    assert not rep["declined"], rep["declined"]
    assert rep["claimed"] == rep["nodes"] and rep["groups"] == 1, rep
    [g] = record["groups"]
    assert g["runs"] == steps and g["fallbacks"] == 0 and g["failures"] == 0, g
    assert g["compiled_runs"] + g["eager_runs"] == g["runs"], g
    # genai widens attention_mask every step: the plan's prologue turns it into lengths before
    # the compiled call, so the prompt traces once and every decode step reuses one variant
    assert g["path"] == "keyed" and g["traces"] == 2, g
    assert g["unkeyed_inputs"] == ["attention_mask"], g


@pytest.mark.parametrize("family", sorted(D.FAMILIES))
def test_genai_greedy_matches_cpu(tmp_path, family):
    tokens, _, _ = mlx_and_cpu(tmp_path, D.config(family), [PROMPT])
    # a random model may settle on one token; it must still have produced the requested count
    assert tokens.shape == (1, NEW_TOKENS)


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_genai_batch_of_two_right_padded(tmp_path, family):
    """Two prompts of different lengths in one batch, the shorter right-padded with pad_token_id
    (as genai pads a batch): equal to the CPU provider, and the padded entry's tokens equal its
    own generation alone (the padding changes nothing)."""
    cfg = D.config(family)
    short = [9, 10, 11, 12]
    tokens, _, _ = mlx_and_cpu(tmp_path, cfg, [PROMPT, short + [PAD] * (len(PROMPT) - len(short))])
    alone, _ = generate(on_mlx(model_folder(tmp_path / "alone", cfg)), [short])
    np.testing.assert_array_equal(tokens[1], alone[0])


def test_genai_provider_options_from_genai_config(tmp_path):
    """The EP chosen and configured by genai_config.json alone (session_options.provider_options,
    as the builder's folders carry them for other EPs): no provider calls on the Config."""
    register()
    report = tmp_path / "report.json"
    folder = model_folder(tmp_path / "mlx", D.config("llama"), session_options=NO_CPU_FALLBACK,
                          provider_options=[{mlx.EP_NAME: {"report_file": str(report)}}])
    tokens, _ = generate(og.Config(folder), [PROMPT])
    assert tokens.shape == (1, NEW_TOKENS)
    rep = json.loads(report.read_text())
    assert not rep["declined"] and rep["claimed"] == rep["nodes"] and rep["groups"] == 1, rep
