"""The Dask backend against the NumPy one: the whole function table on inputs split into
many chunks, broadcasting across chunk boundaries, what is refused, and that nothing is
computed before the end."""

from __future__ import annotations

import sys
from typing import Any

import dask.array as da
import numpy as np
import pytest
from test_compiled import CASES

import gradcli
from gradcli import lazy
from gradcli.errors import InputError

#: two float64 elements a chunk: every array of the cases is split on every axis
TINY = 16
#: functions Dask cannot compute lazily here (docs/dask.md, "What is refused")
REFUSED = ("det", "inv", "solve")


def _close(got: Any, want: Any, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, what
    same_nan = np.isnan(got) == np.isnan(want)
    assert same_nan.all(), what
    finite = np.isfinite(want)
    assert (got[~finite & ~np.isnan(want)] == want[~finite & ~np.isnan(want)]).all(), what
    err = np.abs(got[finite] - want[finite])
    assert (err <= 1e-12 * np.abs(want[finite]) + 1e-300).all(), (
        f"{what}: largest difference {err.max() if err.size else 0}"
    )


def assert_as_numpy(got: gradcli.Result, want: gradcli.Result, what: str) -> None:
    _close(got.value, want.value, f"{what}: value")
    assert list(got.grads) == list(want.grads)
    for name, g in want.grads.items():
        if g is None:
            assert got.grads[name] is None
        else:
            _close(got.grads[name], g, f"{what}: gradient of {name}")
    assert list(got.intermediates) == list(want.intermediates)
    for name, (v, g) in want.intermediates.items():
        gv, gg = got.intermediates[name]
        _close(gv, v, f"{what}: binding {name}")
        assert (gg is None) == (g is None)
        if g is not None:
            _close(gg, g, f"{what}: gradient of binding {name}")
    for name, v in want.inputs.items():
        _close(got.inputs[name], v, f"{what}: input {name}")
    assert (got.reduction, got.notes, got.warnings) == (want.reduction, want.notes, want.warnings)


LAZY_CASES = [(t, i) for t, i in CASES if not any(f"{f}(" in t for f in REFUSED)]


@pytest.mark.parametrize(("text", "inputs"), LAZY_CASES, ids=[t for t, _ in LAZY_CASES])
def test_every_function_gives_numpys_numbers_on_many_chunks(
    text: str, inputs: dict[str, Any]
) -> None:
    want = gradcli.evaluate(text, inputs)
    got = lazy.evaluate(text, inputs, chunks=TINY)
    assert_as_numpy(got, want, text)


@pytest.mark.parametrize("text", ["det(M)", "sum(inv(M))", "sum(solve(M, v))"])
def test_linear_algebra_on_a_chunked_matrix_is_refused_by_name(text: str) -> None:
    name = text.split("(")[0] if not text.startswith("sum") else text[4:].split("(")[0]
    m = np.eye(4) * 2
    with pytest.raises(InputError, match=f"`{name}` is not available with the Dask backend"):
        lazy.evaluate(text, {"M": m, "v": np.ones(4)}, chunks=TINY)


@pytest.mark.parametrize(
    ("text", "inputs"),
    [
        ("sum(W * b)", {"W": np.arange(35.0).reshape(5, 7) / 9, "b": np.linspace(-1, 1, 7)}),
        ("sum(tanh(c + r) ** 2)", {"c": np.linspace(0, 1, 6)[:, None], "r": np.ones((1, 5))}),
        ("sum(W @ x + b)", {"W": np.ones((6, 5)) / 3, "x": np.arange(5.0), "b": np.ones((6,))}),
        ("mean(x, axis=0) * 3", {"x": np.arange(42.0).reshape(6, 7) / 7}),
        (
            "sum(softmax(x, axis=1) * y)",
            {"x": np.arange(30.0).reshape(5, 6) / 5, "y": np.arange(6.0)},
        ),
    ],
)
def test_broadcasting_and_reductions_across_chunk_boundaries(
    text: str, inputs: dict[str, Any]
) -> None:
    want = gradcli.evaluate(text, inputs)
    for chunks in (8, 24, 40):  # one element, three, five: boundaries fall everywhere
        assert_as_numpy(lazy.evaluate(text, inputs, chunks=chunks), want, f"{text} {chunks}")


#: the parts of a Counted read so far (module level: Dask may copy the array object)
READS: list[Any] = []


class Counted:
    """An array that notes every read of a part of it."""

    shape, dtype, ndim = (40,), np.dtype("float64"), 1

    def __getitem__(self, key: Any) -> Any:
        READS.append(key)
        return np.arange(40.0)[key]


def test_the_graph_is_made_without_computing_a_chunk() -> None:
    a = da.from_array(Counted(), chunks=8, asarray=True)
    READS.clear()  # (Dask read an empty part for the array's type)
    built = lazy.build("sum(tanh(a) * exp(-a**2))", {"a": a}, chunks=64)
    assert READS == []  # the forward and backward graphs exist; nothing was read
    assert built.run.grads["a"].chunks == ((8,) * 5,)
    r = lazy.evaluate("sum(tanh(a) * exp(-a**2))", {"a": a}, chunks=64)
    want = gradcli.evaluate("sum(tanh(a) * exp(-a**2))", {"a": np.arange(40.0)})
    assert_as_numpy(r, want, "a lazy input")
    # the value's pass reads each chunk once; the gradients' pass reads each once more,
    # the input's value for the result sharing that read
    assert sorted(READS) == sorted([(slice(i, i + 8),) for i in range(0, 40, 8)] * 2)


def test_the_seed_of_a_sum_is_broadcast_in_chunks_not_as_one() -> None:
    built = lazy.build("sum(a * b + b)", {"a": np.ones(1000), "b": np.ones(1000)}, chunks=800)
    # 100 elements a chunk, as the inputs: no chunk of the whole length
    assert built.run.grads["a"].chunks == ((100,) * 10,)
    assert built.run.grads["b"].chunks == ((100,) * 10,)


def test_floating_point_errors_are_counted_as_warnings() -> None:
    x = np.array([-1.0, 2.0, -3.0, 4.0, 0.0, 1e308])
    want = gradcli.evaluate("sum(log(x) + x * 10)", {"x": x})
    got = lazy.evaluate("sum(log(x) + x * 10)", {"x": x}, chunks=TINY)
    kinds = sorted(w.split(" in ")[0] for w in want.warnings)
    assert sorted(w.split(" in ")[0] for w in got.warnings) == kinds
    assert "invalid value encountered" in kinds and "overflow encountered" in kinds


def test_repeated_integer_indices_are_refused_rather_than_computed() -> None:
    with pytest.raises(InputError, match="repeated integers"):
        lazy.evaluate("sum(x[[0, 2, 0]])", {"x": np.arange(4.0)}, chunks=TINY)
    with pytest.raises(InputError, match="repeated integers"):
        lazy.evaluate("sum(x[[1, -3]])", {"x": np.arange(4.0)}, chunks=TINY)
    r = lazy.evaluate("sum(x[[2, 0]] * 3)", {"x": np.arange(4.0)}, chunks=TINY)
    assert r.grads["x"].tolist() == [3.0, 0.0, 3.0, 0.0]


def test_float32_and_wrt_and_grad_output_as_numpy() -> None:
    inputs = {"a": np.linspace(-1, 1, 9), "b": np.linspace(0, 2, 9)}
    for kwargs in (
        {"dtype": "float32"},
        {"wrt": ["b"]},
        {"grad_output": np.linspace(1, 2, 9).tolist()},
    ):
        want = gradcli.evaluate("tanh(a) * b", inputs, **kwargs)
        got = lazy.evaluate("tanh(a) * b", inputs, chunks=TINY, **kwargs)
        assert_as_numpy(got, want, str(kwargs))


def test_a_missing_dask_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gradcli.autograd.dask_backend", None)
    with pytest.raises(InputError, match=r"pip install 'gradcli\[dask\]'"):
        lazy.require_dask()


def test_clipping_is_refused_until_it_is_lazy() -> None:
    with pytest.raises(InputError, match="clipping is not available with the Dask backend"):
        lazy.evaluate("sum(a*a)", {"a": np.ones(3)}, clip_norm=1.0)


@pytest.mark.parametrize("text", ["128MB", "64MiB", "1e6", 4096])
def test_chunk_sizes(text: Any) -> None:
    assert isinstance(lazy.parse_chunks(text), int)


@pytest.mark.parametrize("text", ["lots", "0", -3, True])
def test_bad_chunk_sizes_are_input_errors(text: Any) -> None:
    with pytest.raises(InputError, match="chunks"):
        lazy.parse_chunks(text)
