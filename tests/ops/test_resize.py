"""Resize and Upsample rows (src/ops/resize.c) against ORT's CPU provider: nearest with every
nearest_mode and coordinate transform (indices must agree exactly), linear over 1-5 axes,
cubic (cubic_coeff_a, exclude_outside), tf_crop_and_resize with roi and extrapolation_value,
half_pixel_symmetric, scales vs sizes, axes and keep_aspect_ratio_policy, antialias, every opset
row (Upsample 7 and 9, Resize 10, 11, 13, 18, 19), float16/bfloat16 (bfloat16 against the float32
model on CPU), integer nearest, the PP-OCRv4 detector's form, a computed sizes input, and the
declined forms with their reasons."""
import json

import numpy as np
import pytest
from onnx import TensorProto, helper

import mlx_harness as harness
import ops_common as oc
from ops_common import BF16, F16, F32

F = TensorProto.FLOAT


def resize_model(elem, x_shape, attrs=None, scales=None, sizes=None, roi=None, opset=19,
                 op="Resize", const=True):
    """A single Resize (or Upsample) node; scales/sizes/roi are initializers (const) or graph
    inputs fed by the caller. Inputs the opset lacks are left out; absent optional ones are ''."""
    attrs = dict(attrs or {})
    inputs, inits, names = [("x", elem, x_shape)], [], ["x"]

    def add(name, value, dtype):
        if value is None:
            names.append("")
            return
        arr = np.asarray(value, dtype)
        names.append(name)
        if const:
            inits.append((name, arr))
        else:
            inputs.append((name, helper.np_dtype_to_tensor_dtype(arr.dtype), arr.shape))

    if op == "Upsample" and opset < 9:
        attrs["scales"] = [float(s) for s in scales]
    elif opset < 11:
        add("scales", scales, np.float32)
    else:
        add("roi", roi if roi is not None else ([] if opset < 13 else None), np.float32)
        add("scales", scales if scales is not None else ([] if opset < 13 else None), np.float32)
        if sizes is not None:
            add("sizes", sizes, np.int64)
    while names and names[-1] == "":
        names.pop()
    node = helper.make_node(op, names, ["y"], name="n", **attrs)
    return harness.make_model([node], inputs, [("y", elem, None)], initializers=inits,
                              opset=opset)


def x_feed(shape, dtype=np.float32, seed=0):
    return {"x": harness.rand(shape, dtype, low=-3, high=3, seed=seed)}


def check(build, shape, dtype=F32, seed=0, scale=1.0):
    return oc.check(build, x_feed(shape, seed=seed), dtype, scale=scale)


# --- nearest ----------------------------------------------------------------------------
NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
CTMS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn"]
SCALES = {"up2": [1, 1, 2, 2], "up-odd": [1, 1, 1.7, 2.5], "down": [1, 1, 0.6, 0.45],
          "mixed": [1, 1, 0.8, 1.5]}


@pytest.mark.parametrize("scales", list(SCALES), ids=str)
@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("nearest", NEAREST_MODES)
def test_nearest_modes(nearest, ctm, scales):
    attrs = dict(mode="nearest", nearest_mode=nearest, coordinate_transformation_mode=ctm)
    check(lambda e: resize_model(e, (1, 2, 6, 7), attrs, SCALES[scales], opset=12),
          (1, 2, 6, 7))


@pytest.mark.parametrize("sizes", [[1, 2, 9, 4], [2, 3, 3, 11], [1, 2, 1, 1]], ids=str)
@pytest.mark.parametrize("ctm", ["half_pixel", "align_corners", "asymmetric"])
def test_nearest_sizes(ctm, sizes):
    attrs = dict(mode="nearest", coordinate_transformation_mode=ctm)
    shape = (sizes[0], sizes[1], 6, 7)
    check(lambda e: resize_model(e, shape, attrs, sizes=sizes, opset=13), shape)


@pytest.mark.parametrize("shape,scales", [((7,), [1.6]), ((7,), [0.5]), ((5,), [1.0]),
                                          ((3, 5), [2, 0.7]), ((2, 3, 4, 5, 6), [1, 1.5, 1, 0.5, 2])],
                         ids=str)
def test_nearest_ranks(shape, scales):
    attrs = dict(mode="nearest", coordinate_transformation_mode="half_pixel")
    check(lambda e: resize_model(e, shape, attrs, scales), shape)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32], ids=str)
def test_nearest_integers(dtype):
    attrs = dict(mode="nearest", coordinate_transformation_mode="pytorch_half_pixel")
    shape = (1, 3, 5, 4)
    m = resize_model(harness.onnx_type(dtype), shape, attrs, [1, 1, 1.5, 0.75])
    harness.check_against_cpu(m, x_feed(shape, dtype))


@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
def test_nearest_half(dtype):
    attrs = dict(mode="nearest", nearest_mode="floor", coordinate_transformation_mode="asymmetric")
    check(lambda e: resize_model(e, (1, 3, 5, 4), attrs, [1, 1, 2, 3]), (1, 3, 5, 4), dtype)


def test_ppocr_det_form():
    """PP-OCRv4 det: opset 12, empty roi, constant scales [1,1,2,2], nearest asymmetric floor
    (the repeat fast path), after an Add, so the pair is compiled shape-keyed."""
    attrs = dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    res = helper.make_node("Resize", ["a", "roi", "scales"], ["y"], name="n", **attrs)
    add = helper.make_node("Add", ["x", "x"], ["a"], name="add")
    m = harness.make_model([add, res], [("x", F, (1, 8, "H", "W"))], [("y", F, None)],
                           initializers=[("roi", np.zeros(0, np.float32)),
                                         ("scales", np.array([1, 1, 2, 2], np.float32))],
                           opset=12)
    harness.check_against_cpu(m, x_feed((1, 8, 5, 7)))
    oc.check_compiled(m, [x_feed((1, 8, 5, 7)), x_feed((1, 8, 12, 4))], path="keyed")


def test_ppocr_det_model_resizes_claimed(tmp_path):
    """Every Resize node of the real PP-OCRv4 detector is claimed."""
    import json
    import os

    import onnx
    import onnxruntime as ort

    path = os.path.join(os.path.dirname(ort.__file__), "..", "rapidocr_onnxruntime", "models",
                        "ch_PP-OCRv4_det_infer.onnx")
    if not os.path.exists(path):
        pytest.skip("rapidocr_onnxruntime's detector is not installed")
    model = onnx.load(path)
    names = [n.name for n in model.graph.node if n.op_type == "Resize"]
    report = tmp_path / "partition.json"
    harness.mlx_session(model, allow_cpu=True, provider_options={"report_file": str(report)})
    declined = {d["name"] for d in json.loads(report.read_text())["declined"]}
    assert names and not declined.intersection(names)


# --- linear and cubic ---------------------------------------------------------------------
ALL_CTMS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
            "tf_half_pixel_for_nn", "half_pixel_symmetric"]


@pytest.mark.parametrize("scales", list(SCALES), ids=str)
@pytest.mark.parametrize("ctm", ALL_CTMS)
@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_linear_cubic_4d(mode, ctm, scales):
    attrs = dict(mode=mode, coordinate_transformation_mode=ctm)
    check(lambda e: resize_model(e, (2, 2, 6, 7), attrs, SCALES[scales]), (2, 2, 6, 7),
          scale=3)


INT_FACTORS = {"x3-half": [1, 1, 3, 0.5], "half-x4": [1, 1, 0.5, 4], "quarter": [1, 1, 0.25, 0.5],
               "x2-x5": [1, 1, 2, 5]}


@pytest.mark.parametrize("scales", list(INT_FACTORS), ids=str)
@pytest.mark.parametrize("ctm", ALL_CTMS)
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_integer_factors(mode, ctm, scales):
    """Integer growth or shrink factors: the periodic form (strided slices and interleaved
    phases instead of gathers) where the plan allows it."""
    attrs = dict(mode=mode, coordinate_transformation_mode=ctm)
    check(lambda e: resize_model(e, (1, 2, 8, 8), attrs, INT_FACTORS[scales]), (1, 2, 8, 8),
          scale=3)


@pytest.mark.parametrize("nearest", NEAREST_MODES)
@pytest.mark.parametrize("scales", list(INT_FACTORS), ids=str)
def test_integer_factors_nearest_modes(scales, nearest):
    attrs = dict(mode="nearest", nearest_mode=nearest)
    check(lambda e: resize_model(e, (1, 2, 8, 8), attrs, INT_FACTORS[scales]), (1, 2, 8, 8))


@pytest.mark.parametrize("shape,scales", [((6, 7), [1.5, 0.6]), ((4, 5, 6), [1.5, 0.5, 2]),
                                          ((1, 2, 4, 5, 6), [1, 1, 2, 0.5, 1.3]),
                                          ((1, 5, 6, 3), [1, 2, 0.7, 1])], ids=str)
@pytest.mark.parametrize("ctm", ["half_pixel", "align_corners", "asymmetric"])
def test_linear_ranks(shape, scales, ctm):
    attrs = dict(mode="linear", coordinate_transformation_mode=ctm)
    check(lambda e: resize_model(e, shape, attrs, scales), shape, scale=3)


@pytest.mark.parametrize("a", [-0.75, -0.5])
@pytest.mark.parametrize("exclude", [0, 1])
@pytest.mark.parametrize("shape,scales", [((6, 7), [1.6, 0.7]), ((1, 2, 5, 6), [1, 1, 2.2, 0.8])],
                         ids=str)
def test_cubic_coefficients(shape, scales, exclude, a):
    attrs = dict(mode="cubic", cubic_coeff_a=a, exclude_outside=exclude)
    check(lambda e: resize_model(e, shape, attrs, scales), shape, scale=3)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
def test_linear_cubic_half(mode, dtype):
    attrs = dict(mode=mode, coordinate_transformation_mode="pytorch_half_pixel")
    check(lambda e: resize_model(e, (1, 2, 6, 5), attrs, [1, 1, 1.5, 0.8]), (1, 2, 6, 5), dtype,
          scale=5)


# --- tf_crop_and_resize -----------------------------------------------------------------
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("roi", [[0, 0, 0.2, 0.1, 1, 1, 0.9, 0.7], [0, 0, -0.3, 0.4, 1, 1, 1.2, 0.8]],
                         ids=["inside", "outside"])
@pytest.mark.parametrize("extrapolation", [0.0, -7.5])
def test_crop_and_resize(mode, roi, extrapolation):
    attrs = dict(mode=mode, coordinate_transformation_mode="tf_crop_and_resize",
                 extrapolation_value=extrapolation)
    check(lambda e: resize_model(e, (1, 2, 6, 7), attrs, sizes=[1, 2, 5, 4], roi=roi),
          (1, 2, 6, 7), scale=3)


def test_crop_and_resize_scales_and_single_output():
    attrs = dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize")
    check(lambda e: resize_model(e, (1, 1, 6, 7), attrs, sizes=[1, 1, 1, 5],
                                 roi=[0, 0, 0.25, 0.1, 1, 1, 0.75, 0.9]), (1, 1, 6, 7))
    check(lambda e: resize_model(e, (1, 1, 6, 7), attrs, [1, 1, 0.5, 1.5],
                                 roi=[0, 0, 0.1, 0.2, 1, 1, 0.8, 0.6]), (1, 1, 6, 7))


# --- opset 18/19: axes, keep_aspect_ratio_policy, antialias ---------------------------------
@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
@pytest.mark.parametrize("axes", [None, [2, 3], [3, 2]], ids=str)
def test_sizes_policy_axes(policy, axes):
    # without axes the policy scales N and C too, which ORT's linear kernel rejects
    attrs = dict(mode="linear" if axes else "nearest", keep_aspect_ratio_policy=policy)
    sizes = [9, 5] if axes else [1, 2, 9, 5]
    if axes:
        attrs["axes"] = axes
    check(lambda e: resize_model(e, (1, 2, 6, 7), attrs, sizes=sizes, opset=18), (1, 2, 6, 7),
          scale=3)


@pytest.mark.parametrize("axes", [[2, 3], [3], [-2]], ids=str)
def test_scales_with_axes(axes):
    scales = {2: 1.5, 3: 0.6}
    attrs = dict(mode="nearest", axes=axes)
    sc = [scales[a % 4] for a in axes]
    check(lambda e: resize_model(e, (1, 2, 6, 7), attrs, sc, opset=18), (1, 2, 6, 7))


def test_crop_roi_with_axes():
    attrs = dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize", axes=[3, 2],
                 extrapolation_value=2.0)
    check(lambda e: resize_model(e, (1, 2, 6, 7), attrs, sizes=[5, 4], roi=[0.1, -0.2, 0.9, 0.8],
                                 opset=18), (1, 2, 6, 7))


@pytest.mark.parametrize("scales", [[1, 1, 0.5, 0.3], [1, 1, 0.6, 1.7], [1, 1, 0.26, 0.77]],
                         ids=str)
@pytest.mark.parametrize("exclude", [0, 1])
@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_antialias(mode, exclude, scales):
    attrs = dict(mode=mode, antialias=1, exclude_outside=exclude)
    check(lambda e: resize_model(e, (1, 2, 13, 11), attrs, scales, opset=18), (1, 2, 13, 11),
          scale=3)


def test_antialias_sizes_and_crop():
    attrs = dict(mode="linear", antialias=1, coordinate_transformation_mode="tf_crop_and_resize",
                 extrapolation_value=1.0)
    check(lambda e: resize_model(e, (1, 1, 12, 10), attrs, sizes=[1, 1, 5, 3],
                                 roi=[0, 0, -0.1, 0.2, 1, 1, 0.9, 1.1], opset=18),
          (1, 1, 12, 10), scale=3)


# --- older rows --------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("scales", [[1, 1, 2, 3], [1, 1, 0.5, 0.7], [1, 1, 1.5, 2.5]], ids=str)
def test_resize_10(mode, scales):
    check(lambda e: resize_model(e, (1, 2, 5, 4), dict(mode=mode), scales, opset=10),
          (1, 2, 5, 4), scale=3)


@pytest.mark.parametrize("opset", [7, 9])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("scales", [[1, 1, 2, 3], [1, 1, 1.5, 2.5], [1, 1, 1, 1]], ids=str)
def test_upsample(opset, mode, scales):
    check(lambda e: resize_model(e, (1, 2, 5, 4), dict(mode=mode), scales, opset=opset,
                                 op="Upsample"), (1, 2, 5, 4), scale=3)


@pytest.mark.parametrize("opset", [11, 13, 18, 19])
def test_every_resize_row(opset):
    attrs = dict(mode="cubic", coordinate_transformation_mode="align_corners")
    check(lambda e: resize_model(e, (1, 2, 5, 4), attrs, [1, 1, 1.4, 2], opset=opset),
          (1, 2, 5, 4), scale=3)


def test_identity_and_empty():
    attrs = dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize")
    # same shape: ORT returns X unchanged, even with a cropping roi
    check(lambda e: resize_model(e, (1, 2, 5, 4), attrs, sizes=[1, 2, 5, 4],
                                 roi=[0, 0, 0.2, 0.2, 1, 1, 0.8, 0.8]), (1, 2, 5, 4))
    check(lambda e: resize_model(e, (1, 2, 5, 4), dict(mode="nearest"), [1, 1, 0.1, 2]),
          (1, 2, 5, 4))


def test_sizes_from_shape_compiled():
    """sizes computed from X's shape (Shape -> Mul -> Concat) are folded per input shape, so the
    group still compiles (shape-keyed) without host reads."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape", start=2),  # opset 15
             helper.make_node("Mul", ["s", "two"], ["hw"], name="mul"),
             helper.make_node("Concat", ["nc", "hw"], ["sizes"], name="cat", axis=0),
             helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], name="n", mode="linear")]
    m = harness.make_model(nodes, [("x", F, (1, 2, "H", "W"))], [("y", F, None)],
                           initializers=[("two", np.array([2, 3], np.int64)),
                                         ("nc", np.array([1, 2], np.int64))], opset=15)
    harness.check_against_cpu(m, x_feed((1, 2, 4, 5)), rtol=1e-5, atol=1e-5)
    oc.check_compiled(m, [x_feed((1, 2, 4, 5)), x_feed((1, 2, 3, 2))], path="keyed",
                      rtol=1e-5, atol=1e-5)


def test_scales_fed_at_run_time():
    """scales as a graph input: read on the host every run, so the group falls back to eager
    (and stays correct)."""
    import gc

    m = resize_model(F, (1, 2, 4, 5), dict(mode="nearest"), [1, 1, 1.5, 2], const=False)
    feeds = dict(x_feed((1, 2, 4, 5)), scales=np.array([1, 1, 1.5, 2], np.float32))
    harness.check_against_cpu(m, feeds)
    add = helper.make_node("Add", ["x", "x"], ["a"], name="add")
    res = helper.make_node("Resize", ["a", "", "scales"], ["y"], name="n", mode="linear")
    m = harness.make_model([add, res], [("x", F, (1, 2, 4, 5)), ("scales", F, (4,))],
                           [("y", F, None)], opset=13)
    rec = harness.Recorded(m)
    cpu = harness.cpu_session(m)
    for sc in ([1, 1, 1.5, 2], [1, 1, 0.5, 3]):
        feeds = dict(x_feed((1, 2, 4, 5)), scales=np.array(sc, np.float32))
        np.testing.assert_allclose(rec.session.run(None, feeds)[0], cpu.run(None, feeds)[0],
                                   rtol=1e-5, atol=1e-5)
    group = rec.close()["groups"][0]
    assert group["path"] == "keyed" and group["turned_eager"], group
    assert group["eager_runs"] == 2 and group["host_reads"] == 2, group


# --- declines ----------------------------------------------------------------------------
def test_integer_linear_declined(tmp_path):
    m = resize_model(TensorProto.INT32, (1, 1, 4, 4), dict(mode="linear"), [1, 1, 2, 2])
    oc.check_declined(m, x_feed((1, 1, 4, 4), np.int32), "n", "only nearest takes integers",
                      tmp_path)


@pytest.mark.parametrize("attrs,opset,reason", [
    (dict(mode="nearest", antialias=1), 18, "antialias applies to linear and cubic"),
    (dict(mode="linear", exclude_outside=1), 19, "exclude_outside needs mode cubic"),
    (dict(mode="linear", coordinate_transformation_mode="half_pixel_symmetric"), 18,
     "not defined in opset 18"),
    (dict(mode="cubic"), 10, "mode 'cubic' is not one of nearest, linear"),
    (dict(mode="linear", keep_aspect_ratio_policy="not_larger", axes=[-2, -1]), 18,
     "negative axes"),
    (dict(mode="nearest", nearest_mode="round"), 13, "nearest_mode 'round'"),
], ids=["aa-nearest", "exclude-linear", "symmetric-18", "cubic-10", "policy-negative-axes",
        "nearest-mode"])
def test_declined_attributes(tmp_path, attrs, opset, reason):
    if "axes" in attrs:
        m = resize_model(F, (1, 1, 4, 4), attrs, sizes=[8, 6], opset=opset)
    else:
        m = resize_model(F, (1, 1, 4, 4), attrs, [1, 1, 2, 2], opset=opset)
    assert reason in oc.declined_reasons(m, tmp_path).get("n", "")


@pytest.mark.parametrize("op,opset,scales,reason", [
    ("Resize", 13, [1, 1, 0, 2], "scale 0 is not > 0"),
    ("Upsample", 9, [1, 1, 0.5, 2], "scale 0.5 is not >= 1"),
    ("Upsample", 7, [1, 1, 0.5, 2], "scale 0.5 is not >= 1"),
], ids=["zero", "upsample-9", "upsample-7"])
def test_bad_scales_declined(tmp_path, op, opset, scales, reason):
    m = resize_model(F, (1, 1, 4, 4), dict(mode="nearest"), scales, opset=opset, op=op)
    assert reason in oc.declined_reasons(m, tmp_path)["n"]


@pytest.mark.parametrize("scales", [[1, 1, np.inf, 1], [1, 1, 2, np.inf], [1, 1, np.nan, 2],
                                    [1, 1, 1e30, 1], [1, 1, 1e10, 1]], ids=str)
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_scales_not_finite_or_too_large_fail_naming_the_node(mode, scales):
    """ORT's CPU kernel rejects a scale that is not finite (and cannot allocate 1e10x); we took
    inf * length to an empty axis and 1e30 * length through an undefined conversion. A computed
    scale fails the run naming the node (the session goes on); a constant one is declined."""
    import ops_failures as of
    m = resize_model(TensorProto.FLOAT, [1, 1, 2, 2], {"mode": mode}, scales=scales, const=False)
    x = x_feed((1, 1, 2, 2))["x"]
    # ORT's CPU provider is asked only about scales that are not finite: for 1e10 it tries to
    # allocate 256 GiB, which AddressSanitizer (make asan) turns into an abort
    of.rejects_then_runs(m, {"x": x, "scales": np.array(scales, np.float32)},
                         {"x": x, "scales": np.array([1, 1, 2, 3], np.float32)},
                         cpu_errs=not np.all(np.isfinite(scales)))


def test_constant_infinite_scale_declined(tmp_path):
    m = resize_model(TensorProto.FLOAT, [1, 1, 2, 2], {"mode": "nearest"},
                     scales=[1, 1, np.inf, 1])
    assert "finite" in oc.declined_reasons(m, tmp_path)["n"]
