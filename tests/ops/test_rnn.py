"""RNN, GRU and LSTM (ai.onnx 7 and 14+) on MLX against ORT's CPU provider: every cell in all three
directions and both layouts, with and without bias, initial states, peepholes (LSTM),
linear_before_reset (GRU) and sequence_lens masking; omitted outputs; declines for clip, custom
activations and LSTM input_forget."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

import ops_common as oc
from mlx_harness import check_against_cpu, cpu_session, make_model, run_on_mlx

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
DIRS = {"forward": 1, "reverse": 1, "bidirectional": 2}


def rnn_case(op, direction="forward", layout=0, bias=True, h0=True, peep=False, seq=None,
             outputs=("Y", "Y_h", "Y_c"), opset=14, t=5, b=3, i=4, h=6, seed=0, **attrs):
    d, g = DIRS[direction], GATES[op]
    rng = np.random.default_rng(seed)
    r = lambda *s: rng.uniform(-0.7, 0.7, s).astype(np.float32)  # noqa: E731
    feeds = {"X": r(*((b, t, i) if layout else (t, b, i)))}
    inits = [("W", r(d, g * h, i)), ("R", r(d, g * h, h))]
    names = ["X", "W", "R", "", "", "", "", ""]
    if bias:
        inits.append(("B", r(d, 2 * g * h)))
        names[3] = "B"
    if seq is not None:
        feeds["seq"] = np.asarray(seq, np.int32)
        names[4] = "seq"
    sshape = (b, d, h) if layout else (d, b, h)
    if h0:
        feeds["h0"] = r(*sshape)
        names[5] = "h0"
        if op == "LSTM":
            feeds["c0"] = r(*sshape)
            names[6] = "c0"
    if peep:
        inits.append(("P", r(d, 3 * h)))
        names[7] = "P"
    while names and names[-1] == "":
        names.pop()
    if op != "LSTM":
        outputs = [o for o in outputs if o != "Y_c"]
    outs = [o if o in outputs else "" for o in ("Y", "Y_h", "Y_c")[: 3 if op == "LSTM" else 2]]
    while outs and outs[-1] == "":
        outs.pop()
    if opset >= 14:
        attrs["layout"] = layout
    node = helper.make_node(op, names, outs, name="n", hidden_size=h, direction=direction,
                            **attrs)
    ins = [(k, TP.INT32 if k == "seq" else TP.FLOAT, list(v.shape)) for k, v in feeds.items()]
    model = make_model([node], ins, [(o, TP.FLOAT, None) for o in outs if o], inits,
                       opset=opset)
    return model, feeds


def check(op, direction="forward", layout=0, **kw):
    """layout 0: against ORT's CPU provider directly. layout 1 (no CPU kernel): the MLX run of
    the batch-major model against the CPU run of the same weights in layout 0, with X, the
    states and the outputs transposed between the two."""
    model, feeds = rnn_case(op, direction, layout, **kw)
    if not layout:
        return check_against_cpu(model, feeds, rtol=1e-4, atol=1e-5)
    ref_model, _ = rnn_case(op, direction, 0, **kw)
    got, placed = run_on_mlx(model, feeds)
    assert placed.get("n") == oc.harness.EP
    ref_feeds = {k: (v.transpose(1, 0, 2) if v.ndim == 3 else v) for k, v in feeds.items()}
    ref = cpu_session(ref_model).run(None, ref_feeds)
    names = [o.name for o in model.graph.output]
    for name, g, r in zip(names, got, ref):
        r = r.transpose(2, 0, 1, 3) if name == "Y" else r.transpose(1, 0, 2)
        assert g.shape == r.shape, (name, g.shape, r.shape)
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
def test_cells(op, direction, layout):
    check(op, direction, layout, peep=op == "LSTM")


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_defaults_opset7(op):
    model, feeds = rnn_case(op, "bidirectional", bias=False, h0=False, opset=7)
    check_against_cpu(model, feeds, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("lbr", [0, 1])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_gru_linear_before_reset(lbr, direction):
    model, feeds = rnn_case("GRU", direction, linear_before_reset=lbr)
    check_against_cpu(model, feeds, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
def test_sequence_lens(op, direction, layout):
    check(op, direction, layout, seq=[5, 2, 3])


@pytest.mark.parametrize("outputs", [("Y",), ("Y_h",), ("Y_c",), ("Y_h", "Y_c")])
def test_optional_outputs(outputs):
    model, feeds = rnn_case("LSTM", "bidirectional", outputs=outputs)
    check_against_cpu(model, feeds, rtol=1e-4, atol=1e-5)


def test_explicit_default_activations():
    model, feeds = rnn_case("LSTM", "bidirectional",
                            activations=["Sigmoid", "Tanh", "Tanh"] * 2)
    check_against_cpu(model, feeds, rtol=1e-4, atol=1e-5)


def test_float16():
    model, feeds = rnn_case("GRU", "bidirectional")
    for v in model.graph.initializer:
        v.CopyFrom(helper.make_tensor(v.name, TP.FLOAT16, v.dims,
                                      np.frombuffer(v.raw_data, np.float32).astype(np.float16)
                                      .view(np.uint16).tolist()))
    for vi in list(model.graph.input) + list(model.graph.output):
        vi.type.tensor_type.elem_type = TP.FLOAT16
    feeds = {k: v.astype(np.float16) for k, v in feeds.items()}
    try:
        oc.harness.cpu_session(model)
    except Exception:
        pytest.skip("ORT's CPU provider has no float16 GRU")
    check_against_cpu(model, feeds, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("op,attrs,reason", [
    ("LSTM", {"clip": 1.0}, "clip"),
    ("GRU", {"activations": ["Relu", "Tanh"]}, "custom activation 'Relu'"),
    ("RNN", {"activations": ["Relu"]}, "custom activation 'Relu'"),
    ("RNN", {"activation_alpha": [0.5]}, "activation_alpha"),
    ("LSTM", {"input_forget": 1}, "input_forget"),
])
def test_declines(op, attrs, reason, tmp_path):
    model, feeds = rnn_case(op, **attrs)
    oc.check_declined(model, feeds, "n", reason, tmp_path, rtol=1e-5, atol=1e-6)
