"""The gradient-handling flags of ``gradcli eval`` (docs/commands.md, "eval"; issue 3), through
real processes.

``--wrt``, ``--grad-output``, ``--clip-norm`` / ``--norm-type`` and ``--clip-value`` on the
tutorial's ``a*b+b`` with a = [3, 4], b = [5, 6] (gradients [5, 6] and [4, 5], total 2-norm
sqrt(102)). Expected numbers are torch.nn.utils.clip_grad_norm_'s, printed in float64.
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any

import harness
import numpy as np
import pytest
from harness import Run, strict_loads

TUTORIAL = ("a*b+b", "a=[3,4]", "b=[5,6]")
SQRT102 = math.sqrt(102.0)
SCALE = 1.0 / (SQRT102 + 1e-6)  # 0.0990147...


@functools.cache
def run(*args: str, stdin: str | None = None) -> Run:
    """``python -m gradcli ARGS`` at the repository root, wide and without colour (cached)."""
    return harness.run(*args, stdin=stdin, columns=200)


def ev(*args: str) -> Run:
    return run("eval", *TUTORIAL, *args)


def close(actual: Any, expected: Any, tol: float = 1e-12) -> None:
    np.testing.assert_allclose(np.asarray(actual, dtype=float), expected, rtol=tol, atol=tol)


# --------------------------------------------------------------------------------------
# --wrt
# --------------------------------------------------------------------------------------


def test_default_every_input_requires_grad() -> None:
    r = ev("--json").json
    assert r["inputs"]["a"] == {"shape": [2], "value": [3.0, 4.0], "requires_grad": True,
                                "grad": [5.0, 6.0]}  # fmt: skip
    assert r["inputs"]["b"]["grad"] == [4.0, 5.0]
    assert r["reduction"] == "sum"
    assert r["clip"] is None


def test_wrt_one_input_makes_the_other_a_constant() -> None:
    r = ev("--wrt", "a", "--json")
    assert r.code == 0
    j = r.json
    assert j["inputs"]["a"]["requires_grad"] is True
    assert j["inputs"]["a"]["grad"] == [5.0, 6.0]
    assert j["inputs"]["b"]["requires_grad"] is False
    assert j["inputs"]["b"]["grad"] is None
    assert j["inputs"]["b"]["value"] == [5.0, 6.0]


def test_wrt_constant_is_shown_as_constant_in_the_table() -> None:
    r = ev("--wrt", "a")
    assert r.code == 0
    assert "constant" in r.row("b")
    assert "constant" not in r.row("a")
    assert "[5. 6.]" in r.row("a")


def test_wrt_both_in_any_order_and_with_spaces() -> None:
    for wrt in ("a,b", "b,a", "a, b"):
        j = ev("--wrt", wrt, "--json").json
        assert j["inputs"]["a"]["grad"] == [5.0, 6.0]
        assert j["inputs"]["b"]["grad"] == [4.0, 5.0]


def test_wrt_input_the_output_does_not_depend_on_gets_zeros() -> None:
    j = run("eval", "a*2", "a=[3,4]", "u=[1,2,3]", "--wrt", "a,u", "--json").json
    assert j["inputs"]["a"]["grad"] == [2.0, 2.0]
    assert j["inputs"]["u"]["grad"] == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("wrt", ["c", "a,zeta", "A"])
def test_wrt_unknown_name_is_a_usage_error_naming_it(wrt: str) -> None:
    unknown = wrt.split(",")[-1]
    r = ev("--wrt", wrt)
    r.assert_usage_error(unknown)
    assert r.stdout == ""
    j = ev("--wrt", wrt, "--json")
    assert j.code == 2
    err = j.json["error"]
    assert err["kind"] == "name"
    assert unknown in err["message"]


# --------------------------------------------------------------------------------------
# --grad-output and the reduction
# --------------------------------------------------------------------------------------


def test_grad_output_is_a_vector_jacobian_product() -> None:
    # c = a*b + b; dc/da = b, dc/db = a + 1; weighted by [1, 2].
    r = ev("--grad-output", "[1,2]", "--json")
    assert r.code == 0
    j = r.json
    assert j["inputs"]["a"]["grad"] == [5.0, 12.0]
    assert j["inputs"]["b"]["grad"] == [4.0, 10.0]
    assert j["reduction"] is None
    assert j["output"] == {"shape": [2], "value": [20.0, 30.0]}


def test_grad_output_of_ones_is_the_sum() -> None:
    j = ev("--grad-output", "[1,1]", "--json").json
    assert j["inputs"]["a"]["grad"] == [5.0, 6.0]
    assert j["reduction"] is None


def test_grad_output_as_a_constant_expression() -> None:
    j = ev("--grad-output", "ones(2) * 2", "--json").json
    assert j["inputs"]["a"]["grad"] == [10.0, 12.0]


def test_grad_output_matrix() -> None:
    j = run("eval", "W @ x", "W=[[1,2],[3,4]]", "x=[1,1]", "--grad-output", "[1,-1]", "--json").json
    assert j["inputs"]["W"]["grad"] == [[1.0, 1.0], [-1.0, -1.0]]
    assert j["inputs"]["x"]["grad"] == [-2.0, -2.0]


@pytest.mark.parametrize("grad_output", ["[1,2,3]", "[[1,2]]", "1"])
def test_grad_output_of_the_wrong_shape_names_both_shapes(grad_output: str) -> None:
    got = str(np.shape(json.loads(grad_output)))  # "(3,)", "(1, 2)", "()"
    r = ev("--grad-output", grad_output)
    assert r.code == 1  # a shape error (docs/json.md, "Exit codes and error kinds": exit 1)
    assert "Traceback" not in r.stderr
    assert got in r.stderr
    assert "(2,)" in r.stderr
    j = ev("--grad-output", grad_output, "--json")
    assert j.code == 1
    err = j.json["error"]
    assert err["kind"] == "shape"
    assert got in err["message"] and "(2,)" in err["message"]


def test_grad_output_on_a_scalar_output() -> None:
    j = run("eval", "sum(a*b)", "a=[3,4]", "b=[5,6]", "--grad-output", "2", "--json").json
    assert j["inputs"]["a"]["grad"] == [10.0, 12.0]
    assert j["reduction"] is None
    r = run("eval", "sum(a*b)", "a=[3,4]", "b=[5,6]", "--grad-output", "[1,2]", "--json")
    assert r.code == 1
    assert r.json["error"]["kind"] == "shape"
    assert "(2,)" in r.json["error"]["message"] and "()" in r.json["error"]["message"]


def test_reduction_sum_even_for_one_element_and_null_for_a_scalar() -> None:
    assert run("eval", "a*b", "a=[3]", "b=[5]", "--json").json["reduction"] == "sum"
    assert run("eval", "sum(a*b)", "a=[3]", "b=[5]", "--json").json["reduction"] is None
    assert run("eval", "a*b", "a=3", "b=5", "--json").json["reduction"] is None


def test_table_caption_states_the_reduction() -> None:
    assert "sum()" in ev().caption()
    assert "sum()" not in ev("--grad-output", "[1,2]").caption()


# --------------------------------------------------------------------------------------
# --clip-norm and --norm-type
# --------------------------------------------------------------------------------------


def test_clip_norm_tutorial() -> None:
    r = ev("--clip-norm", "1", "--json")
    assert r.code == 0
    j = r.json
    clip = j["clip"]
    assert set(clip) == {"max_norm", "norm_type", "total_norm", "scale"}
    assert clip["max_norm"] == 1.0
    assert clip["norm_type"] == 2.0
    close(clip["total_norm"], SQRT102)  # 10.0995...: the norm before clipping
    close(clip["scale"], SCALE)
    close(clip["scale"], 0.09901474449374685)
    close(j["inputs"]["a"]["grad"], [0.49507372246873427, 0.5940884669624811])
    close(j["inputs"]["b"]["grad"], [0.3960589779749874, 0.49507372246873427])
    assert j["reduction"] == "sum"


def test_clip_norm_table_shows_clipped_grads_and_the_caption_says_so() -> None:
    r = ev("--clip-norm", "1")
    assert r.code == 0
    assert "[0.4951 0.5941]" in r.row("a")
    assert "[0.3961 0.4951]" in r.row("b")
    caption = r.caption()
    assert "clip" in caption
    assert "10.0995" in caption  # the total norm before clipping
    assert "0.099" in caption  # the scale


def test_clip_norm_not_needed_gives_scale_one() -> None:
    j = ev("--clip-norm", "100", "--json").json
    assert j["clip"]["scale"] == 1.0
    close(j["clip"]["total_norm"], SQRT102)
    assert j["inputs"]["a"]["grad"] == [5.0, 6.0]
    assert j["inputs"]["b"]["grad"] == [4.0, 5.0]
    caption = ev("--clip-norm", "100").caption()
    assert "10.0995" in caption


def test_clip_norm_zero_zeroes_the_gradients() -> None:
    j = ev("--clip-norm", "0", "--json").json
    assert j["clip"]["scale"] == 0.0
    assert j["inputs"]["a"]["grad"] == [0.0, 0.0]
    assert j["inputs"]["b"]["grad"] == [0.0, 0.0]


@pytest.mark.parametrize("spelling", ["inf", "Infinity", "INF"])
def test_norm_type_inf(spelling: str) -> None:
    j = ev("--clip-norm", "1", "--norm-type", spelling, "--json").json
    clip = j["clip"]
    assert clip["norm_type"] in ("inf", "Infinity")  # strict JSON: a non-finite is a string
    assert clip["total_norm"] == 6.0  # the largest |gradient|
    close(clip["scale"], 1.0 / (6.0 + 1e-6))
    close(j["inputs"]["a"]["grad"], [0.8333331944444676, 0.9999998333333611])
    close(j["inputs"]["b"]["grad"], [0.6666665555555741, 0.8333331944444676])


@pytest.mark.parametrize(
    ("p", "total", "a_grad"),
    [
        ("1", 20.0, [0.2499999875000006, 0.29999998500000075]),
        ("3", 8.092672334566455, [0.6178428058677922, 0.7414113670413507]),
        ("0.5", 79.5954050913377, [0.06281769571302113, 0.07538123485562537]),
    ],
)
def test_norm_type_p(p: str, total: float, a_grad: list[float]) -> None:
    j = ev("--clip-norm", "1", "--norm-type", p, "--json").json
    assert j["clip"]["norm_type"] == float(p)
    close(j["clip"]["total_norm"], total)
    close(j["inputs"]["a"]["grad"], a_grad)


def test_norm_type_without_clip_norm_clips_nothing() -> None:
    j = ev("--norm-type", "inf", "--json").json
    assert j["clip"] is None
    assert j["inputs"]["a"]["grad"] == [5.0, 6.0]


def test_clip_norm_counts_only_the_wrt_inputs() -> None:
    j = ev("--wrt", "a", "--clip-norm", "1", "--json").json
    close(j["clip"]["total_norm"], math.sqrt(61.0))
    close(j["inputs"]["a"]["grad"], [0.6401843176972772, 0.7682211812367328])
    assert j["inputs"]["b"]["grad"] is None


def test_clip_norm_of_a_vector_jacobian_product() -> None:
    # grads [5, 12] and [4, 10]: total sqrt(25 + 144 + 16 + 100) = sqrt(285).
    j = ev("--grad-output", "[1,2]", "--clip-norm", "1", "--json").json
    close(j["clip"]["total_norm"], math.sqrt(285.0))
    s = 1.0 / (math.sqrt(285.0) + 1e-6)
    close(j["inputs"]["a"]["grad"], [5 * s, 12 * s])
    close(j["inputs"]["b"]["grad"], [4 * s, 10 * s])


# --------------------------------------------------------------------------------------
# --clip-value
# --------------------------------------------------------------------------------------


def test_clip_value() -> None:
    r = ev("--clip-value", "4.5", "--json")
    assert r.code == 0
    j = r.json
    assert j["clip"] == {"clip_value": 4.5}
    assert j["inputs"]["a"]["grad"] == [4.5, 4.5]
    assert j["inputs"]["b"]["grad"] == [4.0, 4.5]


def test_clip_value_clamps_negative_gradients_too() -> None:
    j = run("eval", "a*b", "a=[3,-4]", "b=[-5,6]", "--clip-value", "4.5", "--json").json
    assert j["inputs"]["a"]["grad"] == [-4.5, 4.5]
    assert j["inputs"]["b"]["grad"] == [3.0, -4.0]


def test_clip_value_beyond_float32_clamps_nothing_and_warns_nothing() -> None:
    # 1e300 is inf as a float32 (torch refuses the cast; NumPy would warn on every call)
    import warnings

    import gradcli

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = gradcli.evaluate("sum(x * y)", {"x": [1, -2], "y": [3e38, 2]}, dtype="float32",
                             clip_value=1e300)  # fmt: skip
    assert r.grads["x"].tolist() == [np.float32(3e38), 2.0]
    assert r.grads["y"].tolist() == [1.0, -2.0]
    assert r.warnings == []


@pytest.mark.parametrize(("norm_type", "grad"), [(2.0, 0.0), (1.0, 0.0), ("inf", 1.0)])
def test_clip_norm_of_overflowing_float32_gradients_is_counted_not_warned(
    norm_type: Any, grad: float
) -> None:
    # the total norm overflows to inf (scale 0), as in torch; NumPy's warning is counted
    import warnings

    import gradcli

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = gradcli.evaluate("sum(x * y)", {"x": [1, -2], "y": [3e38, 3e38]}, dtype="float32",
                             clip_norm=1.0, norm_type=norm_type)  # fmt: skip
    assert r.grads["x"].tolist() == pytest.approx([grad, grad], rel=1e-6)  # torch 2.13
    assert any("overflow" in w for w in r.warnings), r.warnings


def test_clip_value_table_and_caption() -> None:
    r = ev("--clip-value", "4.5")
    assert r.code == 0
    assert "[4.5 4.5]" in r.row("a")
    caption = r.caption()
    assert "4.5" in caption
    assert re.search(r"clip|clamp", caption)


# --------------------------------------------------------------------------------------
# Intermediates are never clipped
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("flags", [("--clip-norm", "1"), ("--clip-value", "0.5")])
def test_clipping_leaves_intermediates_unclipped(flags: tuple[str, str]) -> None:
    j = run("eval", "h = a*b; h + b", "a=[3,4]", "b=[5,6]", *flags, "--json").json
    assert j["intermediates"]["h"]["grad"] == [1.0, 1.0]
    assert j["intermediates"]["h"]["value"] == [15.0, 24.0]
    if flags[0] == "--clip-norm":
        close(j["clip"]["total_norm"], SQRT102)
        close(j["inputs"]["a"]["grad"], [0.49507372246873427, 0.5940884669624811])
    else:
        assert j["inputs"]["a"]["grad"] == [0.5, 0.5]


# --------------------------------------------------------------------------------------
# Usage errors: exit 2
# --------------------------------------------------------------------------------------


def test_clip_norm_and_clip_value_together_is_a_usage_error() -> None:
    r = ev("--clip-norm", "1", "--clip-value", "2")
    r.assert_usage_error()
    assert r.stdout == ""
    assert "clip" in r.stderr
    j = ev("--clip-norm", "1", "--clip-value", "2", "--json")
    assert j.code == 2
    assert j.json["error"]["kind"] == "input"


@pytest.mark.parametrize("flag", ["--clip-norm", "--clip-value"])
@pytest.mark.parametrize("limit", ["-1", "-0.5", "nan", "inf", "-inf"])
def test_negative_or_non_finite_limits_are_usage_errors(flag: str, limit: str) -> None:
    named = flag[2:].replace("-", ".")  # the message names the option: clip_norm, --clip-norm
    r = ev(flag, limit, "--json")  # (one process a case: the message also goes to stderr)
    r.assert_usage_error()
    assert re.search(named, r.stderr), r.stderr
    assert r.json["error"]["kind"] == "input"
    assert re.search(named, r.json["error"]["message"])


@pytest.mark.parametrize("p", ["0", "-2", "abc", "nan"])
def test_bad_norm_type_is_a_usage_error(p: str) -> None:
    r = ev("--clip-norm", "1", "--norm-type", p)
    r.assert_usage_error("norm")


# --------------------------------------------------------------------------------------
# The same through a JSON request (eval -) and a batch line
# --------------------------------------------------------------------------------------

REQUEST = {"expr": "a*b+b", "inputs": {"a": [3, 4], "b": [5, 6]}}


def test_request_with_clip_norm_and_norm_type_inf() -> None:
    req = {**REQUEST, "clip_norm": 1, "norm_type": "inf", "wrt": ["a", "b"]}
    j = run("eval", "-", "--json", stdin=json.dumps(req)).json
    assert j["clip"]["total_norm"] == 6.0
    close(j["inputs"]["a"]["grad"], [0.8333331944444676, 0.9999998333333611])


def test_request_with_wrt_and_grad_output() -> None:
    req = {**REQUEST, "wrt": ["b"], "grad_output": [1, 2]}
    j = run("eval", "-", "--json", stdin=json.dumps(req)).json
    assert j["inputs"]["a"]["grad"] is None
    assert j["inputs"]["b"]["grad"] == [4.0, 10.0]
    assert j["reduction"] is None


def test_request_with_both_clips_is_an_input_error() -> None:
    req = {**REQUEST, "clip_norm": 1, "clip_value": 1, "id": 7}
    r = run("eval", "-", "--json", stdin=json.dumps(req))
    assert r.code == 2
    assert r.json["id"] == 7
    assert r.json["error"]["kind"] == "input"


def test_batch_lines_with_clipping() -> None:
    lines = [
        {**REQUEST, "clip_norm": 1, "id": 1},
        {**REQUEST, "clip_value": 4.5, "id": 2},
        {**REQUEST, "clip_norm": -1, "id": 3},
    ]
    r = run("batch", stdin="".join(json.dumps(x) + "\n" for x in lines))
    out = [strict_loads(line) for line in r.stdout.splitlines()]
    assert [o["id"] for o in out] == [1, 2, 3]
    close(out[0]["clip"]["scale"], SCALE)
    assert out[1]["inputs"]["a"]["grad"] == [4.5, 4.5]
    assert out[2]["error"]["kind"] == "input"
    assert r.code == 1  # a failed line


def test_clipping_never_touches_a_binding_that_names_an_input() -> None:
    # `h = x` binds the input itself; docs/commands.md, "eval": only input gradients are clipped
    import gradcli

    r = gradcli.evaluate("h = x; sum(h*3)", {"x": [3.0, 4.0]}, clip_value=0.5)
    assert r.grads["x"].tolist() == [0.5, 0.5]
    assert r.intermediates["h"][1].tolist() == [3.0, 3.0]
    r = gradcli.evaluate("h = x; sum(h*3)", {"x": [3.0, 4.0]}, clip_norm=1.0)
    assert r.intermediates["h"][1].tolist() == [3.0, 3.0]
