"""``batch``'s lane (issue 14, item 2; docs/commands.md, "batch"): a request whose program,
input names and shapes were answered before is answered by replaying the plan and writing
the response straight from the arrays. Its text must be the general way's, byte for byte,
on every kind of request — and the lane must really answer, or these tests prove nothing.
"""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from strategies import programs

from gradcli import batch
from gradcli.batch import run_batch


def _stream(lines: list[str], monkeypatch: pytest.MonkeyPatch, lane: bool, **kw: Any):
    """The responses to ``lines``, and how many the lane answered."""
    answered = []
    answer = batch._Lane.answer

    def counted(self: Any, request: Any) -> Any:
        got = answer(self, request) if lane else None
        answered.append(got is not None)
        return got

    with monkeypatch.context() as m:
        m.setattr(batch._Lane, "answer", counted)
        out: list[str] = []
        failed = run_batch(io.BytesIO(("\n".join(lines) + "\n").encode()), out.append, **kw)
    return out, sum(answered), failed


def _same_both_ways(lines: list[str], monkeypatch: pytest.MonkeyPatch, **kw: Any) -> int:
    fast, n_lane, failed = _stream(lines, monkeypatch, True, **kw)
    slow, n_none, failed_slow = _stream(lines, monkeypatch, False, **kw)
    assert n_none == 0
    assert failed == failed_slow
    assert len(fast) == len(slow)
    for k, (a, b) in enumerate(zip(fast, slow, strict=True)):
        assert a == b, f"line {k + 1}: {lines[k] if k < len(lines) else 'accumulated'}"
    return n_lane


def _request(expr: str, inputs: dict[str, Any], id: Any = 0, **more: Any) -> str:
    return json.dumps({"id": id, "expr": expr, "inputs": inputs, **more})


#: (expr, inputs): each sent four times, with ids of every kind
KINDS: list[tuple[str, dict[str, Any]]] = [
    ("sum(a*b+b)", {"a": [3, 4, 5], "b": [5.0, 6.5, -7.25]}),
    ("a*b+b", {"a": [3, 4], "b": [5, 6]}),  # the implicit sum
    ("x ** 2", {"x": 2.5}),  # 0-d
    ("sum(x)", {"x": []}),  # an empty input
    ("sum(a)", {"a": [1.0, 2.0], "b": [7.0]}),  # an input not used: zeros
    ("sum(exp(a))", {"a": [1000.0, 1.0]}),  # inf in the value and a gradient
    ("sum(log(a))", {"a": [-1.0, 0.0, 2.0]}),  # nan and -inf
    ("sum(a * b)", {"a": [-0.0, 0.0], "b": [-1.0, 1.0]}),  # signed zeros
    ("sum(a)", {"a": [9007199254740993, 2**70, -3]}),  # ints that round, one beyond 2**64
    ("sum(tanh(W @ x))", {"W": [[1.0, -2.0], [0.5, 3.0]], "x": [0.25, -1.0]}),  # 2-D
    ("outer(a, a)", {"a": [1.0, 2.0, 3.0]}),  # a 2-D output
    ("h = a * 2; sum(h * a)", {"a": [1.0, 2.0]}),  # a binding: the general way
    ("2 * 3", {}),  # no inputs, a constant output
    ("sum(inv(M))", {"M": [[1.0, 2.0], [2.0, 4.0]]}),  # singular: an error every time
    ("sum(é * a)", {"é": [1.0], "a": [2.0]}),  # a name beyond ASCII
    ("sum(a * b) # 100% %r %s", {"a": [1.5, 2.0], "b": [0.1, 3.0]}),  # % in the format's text
    ("sum(a * 0.5)", {"a": [1e308, 1.5e308]}),  # finite numbers whose sum is beyond float64
    ("sum(a * b)", {"a": [0.1] * 64, "b": list(range(64))}),  # the longest list formatted
    ("sum(a * b)", {"a": [0.1] * 65, "b": list(range(65))}),  # one more: array by array
]
IDS = [7, "x", None, 2.5, "a\u2028b", "\ud800", True, {"k": [1]}, -0.0, 10**30, "%s%r%%"]


def test_the_lane_writes_the_general_ways_text_for_every_kind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = [
        _request(expr, inputs, IDS[(i + k) % len(IDS)])
        for i, (expr, inputs) in enumerate(KINDS)
        for k in range(4)
    ]
    assert _same_both_ways(lines, monkeypatch) >= 20


@pytest.mark.parametrize("id", ["\ud800", ["x", {"k": "\udfff"}], "é", [float("nan"), 1e300]])
def test_an_id_the_general_way_writes_in_ascii_is_left_to_it(
    id: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lone surrogate anywhere in the id makes the whole response ASCII (the program's
    "é" escaped too): the lane's request from the third time must be written the same."""
    lines = [_request("sum(é * a)", {"é": [1.0], "a": [2.0]}, k) for k in range(2)]
    lines += [_request("sum(é * a)", {"é": [1.0], "a": [2.0]}, id)] * 2
    _same_both_ways(lines, monkeypatch)


def test_options_names_and_bad_values_go_the_general_way(monkeypatch: pytest.MonkeyPatch) -> None:
    good = {"a": [1.0, 2.0], "b": [3.0, 4.0]}
    lines = [_request("sum(a*b)", good, i) for i in range(3)]
    lines += [
        _request("sum(a*b)", good, 3, wrt=["a"]),
        _request("sum(a*b)", good, 4, dtype="float32"),
        _request("sum(a*b)", good, 5, clip_norm=0.1),
        _request("sum(a*b)", good, 6, grad_output=2.0),
        _request("sum(a*b)", {"a": [1.0, True], "b": [3.0, 4.0]}, 7),
        _request("sum(a*b)", {"a": [1.0, "nan"], "b": [3.0, 4.0]}, 8),
        _request("sum(a*b)", {"a": [1.0, 2.0], "b": [3.0]}, 9),
        _request("sum(a*b)", {"b": [1.0, 2.0], "a": [3.0, 4.0]}, 10),  # names in another order
        _request("sum(a*b)", {"a": [1.0, 2.0, 3.0], "b": [3.0, 4.0, 5.0]}, 11),  # new shapes
        json.dumps({"id": 12, "expr": "sum(a*b)", "inputs": good, "unknown": 1}),
        json.dumps({"expr": "sum(a*b)", "inputs": good}),  # no id
        "[1, 2]",
    ]
    lines += [_request("sum(a*b)", good, 20 + i) for i in range(3)]
    assert _same_both_ways(lines, monkeypatch) >= 4


def test_accumulate_adds_the_lanes_gradients_as_the_general_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(3)
    lines = [
        _request("sum(tanh(a) * b)", {"a": rng.normal(size=3).tolist(), "b": [1.0, 2.0, 3.0]}, i)
        for i in range(12)
    ]
    assert _same_both_ways(lines, monkeypatch, accumulate=True) >= 9


def _json_value(a: np.ndarray) -> Any:
    """An input as a request writes it (NaN and Infinity as JSON's tokens)."""
    return a.tolist()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_programs_through_the_lane(p: Any) -> None:
    mp = pytest.MonkeyPatch()
    try:
        lines = []
        for k in range(4):
            shifted = {n: v * (1 + k / 8) - k / 16 for n, v in p.inputs.items()}
            lines.append(_request(p.text, {n: _json_value(v) for n, v in shifted.items()}, k))
        _same_both_ways(lines, mp)
    finally:
        mp.undo()


def test_an_id_too_deep_to_write_back_fails_its_line_only() -> None:
    """An id nested hundreds deep with a NaN in it cannot be written (json recurses): that
    line gets an error with a null id, and the stream goes on (found by review)."""
    deep = "[" * 600 + "NaN" + "]" * 600
    lines = [
        '{"id": ' + deep + ', "expr": "sum(a)", "inputs": {"a": [1.0]}}',
        '{"id": 2, "expr": "sum(a)", "inputs": {"a": [1.0]}}',
    ]
    out: list[str] = []
    failed = run_batch(io.BytesIO(("\n".join(lines) + "\n").encode()), out.append)
    assert failed == 1 and len(out) == 2
    first = json.loads(out[0])
    assert first["id"] is None and first["input_line"] == 1
    assert first["error"]["kind"] == "input" and "id" in first["error"]["message"]
    assert json.loads(out[1])["id"] == 2
