"""Signal rows (src/ops/signal.c): DFT at opsets 17 (axis attribute) and 20 (axis input) over
real and complex signals, onesided, inverse, dft_length padding and truncation and the inverse
real FFT; STFT with and without a window; the three window generators (periodic, symmetric,
output_datatype); MelWeightMatrix; a constant dft_length keeps a pair compiled shape-keyed while a
computed one makes it eager; and the declines."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

import mlx_harness as harness
import ops_common as oc

I64 = TP.INT64


def dft_model(shape, opset, attrs, dft_length=None, axis=None, elem=TP.FLOAT):
    """DFT with dft_length/axis as initializers (opset 20 takes axis as an input)."""
    names, inits = ["x"], []
    if dft_length is not None or axis is not None:
        names.append("n" if dft_length is not None else "")
        if dft_length is not None:
            inits.append(("n", np.array(dft_length, np.int64)))
    if axis is not None:
        names.append("axis")
        inits.append(("axis", np.array(axis, np.int64)))
    node = helper.make_node("DFT", names, ["y"], name="dft", **attrs)
    return harness.make_model([node], [("x", elem, list(shape))], [("y", elem, None)],
                              initializers=inits, opset=opset)


def numpy_dft(x, axis, n, inverse, onesided):
    """onnx's reference semantics (axis counts the trailing re/im dim too)."""
    z = x[..., 0] if x.shape[-1] == 1 else x[..., 0] + 1j * x[..., 1]
    if inverse and onesided:
        return np.fft.irfft(z, n=n, axis=axis)[..., None].astype(np.float32)
    r = (np.fft.ifft if inverse else np.fft.fft)(z, n=n, axis=axis)
    if onesided:
        r = np.take(r, np.arange(r.shape[axis] // 2 + 1), axis=axis)
    return np.stack([r.real, r.imag], -1).astype(np.float32)


DFT_CASES = [(opset, c, axis, inv, one)
             for opset in (17, 20) for c in (1, 2) for axis in (1, 2, -2, -3)
             for inv, one in ((0, 0), (1, 0), (0, 1))
             if not (one and c == 2) and not (opset == 17 and axis < 0)]


@pytest.mark.parametrize("opset,c,axis,inverse,onesided", DFT_CASES)
def test_dft_against_cpu(opset, c, axis, inverse, onesided):
    """Onesided output of a complex signal is undefined; opset 17 takes non-negative axes."""
    x = harness.rand((2, 6, 5, c))
    attrs = {"inverse": inverse, "onesided": onesided}
    if opset == 17:
        m = dft_model(x.shape, 17, dict(attrs, axis=axis))
    else:
        m = dft_model(x.shape, 20, attrs, axis=axis)
    harness.check_against_cpu(m, {"x": x}, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n", [3, 6, 11])
@pytest.mark.parametrize("c", [1, 2])
def test_dft_length_pads_and_truncates(n, c):
    x = harness.rand((3, 6, c), seed=1)
    m = dft_model(x.shape, 20, {}, dft_length=n, axis=1)
    harness.check_against_cpu(m, {"x": x}, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n", [None, 9, 10])
def test_dft_inverse_real_fft(n):
    """inverse + onesided: the n/2+1 bins of a Hermitian spectrum back to a real signal."""
    spec = harness.rand((2, 6, 3, 2), seed=2)
    m = dft_model(spec.shape, 20, {"inverse": 1, "onesided": 1}, dft_length=n, axis=1)
    want = numpy_dft(spec, 1, n if n is not None else 10, True, True)
    oc.check_ref(m, {"x": spec}, [want], rtol=1e-4, atol=1e-5)


def test_dft_half_types_compute_in_float32():
    x = harness.rand((2, 8, 1), seed=3)
    for dt in (oc.F16, oc.BF16):
        oc.check(lambda e: dft_model(x.shape, 20, {}, axis=1, elem=e), {"x": x}, dt, scale=4)


def test_dft_constant_length_stays_compiled():
    """DFT after an Add with constant dft_length/axis: the pair is compiled shape-keyed."""
    add = helper.make_node("Add", ["x", "x"], ["s"], name="add")
    dft = helper.make_node("DFT", ["s", "n", "axis"], ["y"], name="dft")
    m = harness.make_model([add, dft], [("x", TP.FLOAT, ["B", 8, 1])], [("y", TP.FLOAT, None)],
                           initializers=[("n", np.array(8, np.int64)),
                                         ("axis", np.array(1, np.int64))], opset=20)
    oc.check_compiled(m, [{"x": harness.rand((2, 8, 1))}, {"x": harness.rand((3, 8, 1))}], path="keyed", rtol=1e-4, atol=1e-4)


def test_dft_computed_axis_is_eager():
    add = helper.make_node("Add", ["x", "x"], ["s"], name="add")
    dft = helper.make_node("DFT", ["s", "", "axis"], ["y"], name="dft")
    m = harness.make_model([add, dft], [("x", TP.FLOAT, [2, 8, 1]), ("axis", I64, [])],
                           [("y", TP.FLOAT, None)], opset=20)
    for axis in (0, 1):
        harness.check_against_cpu(m, {"x": harness.rand((2, 8, 1)),
                                      "axis": np.array(axis, np.int64)}, rtol=1e-4, atol=1e-4)


def test_dft_declines_bad_trailing_dim(tmp_path):
    m = dft_model((2, 4, 3), 20, {}, axis=1)
    oc.check_declined(m, None, "dft", "it must be 1 (real) or 2 (complex)", tmp_path)


# --- STFT -------------------------------------------------------------------------------------
def stft_model(length, c, step, window=None, frame_length=None, onesided=None):
    names, inputs, inits = ["x", "step"], [("x", TP.FLOAT, [2, length, c])], [
        ("step", np.array(step, np.int64))]
    if window is not None:
        names.append("w")
        inputs.append(("w", TP.FLOAT, [window]))
    if frame_length is not None:
        if window is None:
            names.append("")
        names.append("fl")
        inits.append(("fl", np.array(frame_length, np.int64)))
    attrs = {} if onesided is None else {"onesided": onesided}
    node = helper.make_node("STFT", names, ["y"], name="stft", **attrs)
    return harness.make_model([node], inputs, [("y", TP.FLOAT, None)], initializers=inits,
                              opset=17)


@pytest.mark.parametrize("step,window,frame_length", [
    (4, 16, None), (3, None, 8), (5, 7, 7), (8, 16, 16)])
@pytest.mark.parametrize("onesided", [None, 0])
def test_stft_real(step, window, frame_length, onesided):
    m = stft_model(40, 1, step, window, frame_length, onesided)
    feeds = {"x": harness.rand((2, 40, 1), seed=4)}
    if window is not None:
        feeds["w"] = np.hanning(window).astype(np.float32)
    harness.check_against_cpu(m, feeds, rtol=1e-4, atol=1e-4)


def test_stft_complex_signal():
    m = stft_model(32, 2, 4, 8, None, 0)
    feeds = {"x": harness.rand((2, 32, 2), seed=5), "w": np.hamming(8).astype(np.float32)}
    harness.check_against_cpu(m, feeds, rtol=1e-4, atol=1e-4)


def test_stft_needs_window_or_frame_length(tmp_path):
    node = helper.make_node("STFT", ["x", "step"], ["y"], name="stft")
    m = harness.make_model([node], [("x", TP.FLOAT, [1, 16, 1])], [("y", TP.FLOAT, None)],
                           initializers=[("step", np.array(4, np.int64))], opset=17)
    oc.check_declined(m, None, "stft", "neither window nor frame_length", tmp_path)


# --- windows ----------------------------------------------------------------------------------
def window_model(op, attrs, size_type=TP.INT64, out=TP.FLOAT):
    node = helper.make_node(op, ["n"], ["y"], name="win", **attrs)
    return harness.make_model([node], [("n", size_type, [])], [("y", out, None)], opset=17)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [None, 0, 1])
@pytest.mark.parametrize("size", [1, 2, 10, 33])
def test_windows(op, periodic, size):
    attrs = {} if periodic is None else {"periodic": periodic}
    m = window_model(op, attrs)
    harness.check_against_cpu(m, {"n": np.array(size, np.int64)}, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["HannWindow", "BlackmanWindow"])
def test_window_int32_size_and_float16_output(op):
    m = window_model(op, {"output_datatype": TP.FLOAT16}, size_type=TP.INT32, out=TP.FLOAT16)
    harness.check_against_cpu(m, {"n": np.array(12, np.int32)}, rtol=2e-3, atol=2e-3)


@pytest.mark.cpu_device
def test_window_double_output():
    m = window_model("HannWindow", {"output_datatype": TP.DOUBLE}, out=TP.DOUBLE)
    got, _, _ = harness.check_against_cpu(m, {"n": np.array(6, np.int64)}, rtol=1e-15,
                                          atol=1e-15)
    assert got[0].dtype == np.float64


# --- MelWeightMatrix --------------------------------------------------------------------------
@pytest.mark.parametrize("bins,dft,rate,lo,hi", [
    (8, 16, 8192, 0.0, 4096.0), (10, 64, 16000, 20.0, 7000.0), (4, 128, 22050, 100.0, 5000.0)])
def test_mel_weight_matrix(bins, dft, rate, lo, hi):
    node = helper.make_node("MelWeightMatrix", ["b", "d", "r", "lo", "hi"], ["y"], name="mel")
    m = harness.make_model([node], [("b", TP.INT64, []), ("d", TP.INT64, []),
                                    ("r", TP.INT64, []), ("lo", TP.FLOAT, []),
                                    ("hi", TP.FLOAT, [])], [("y", TP.FLOAT, None)], opset=17)
    feeds = {"b": np.array(bins, np.int64), "d": np.array(dft, np.int64),
             "r": np.array(rate, np.int64), "lo": np.array(lo, np.float32),
             "hi": np.array(hi, np.float32)}
    harness.check_against_cpu(m, feeds, rtol=1e-5, atol=1e-6)
