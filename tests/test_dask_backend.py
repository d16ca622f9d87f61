"""The Dask backend against the NumPy one: the whole function table on inputs split into
many chunks, broadcasting across chunk boundaries, what is refused, and that nothing is
computed before the end."""

from __future__ import annotations

import math
import sys
from typing import Any

import dask.array as da
import numpy as np
import pytest
from harness import run
from test_compiled import CASES

import gradcli
from gradcli import lazy
from gradcli.errors import InputError

#: two float64 elements a chunk: every array of the cases is split on every axis
TINY = 16
#: functions Dask cannot compute lazily here (docs/dask.md, "What is refused")
REFUSED = ("det", "inv", "solve", "slogdet", "cholesky", "pinv")


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
    # one pass computes the value, the gradient and the input's value for the result:
    # each chunk is read once
    assert sorted(READS) == sorted([(slice(i, i + 8),) for i in range(0, 40, 8)])


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
    # the backward pass's own errors are not counted, as NumPy's backward runs quietly:
    # sqrt's derivative at 0 divides by zero (in the same pass as the forward values)
    x = np.array([0.0, 1.0, 4.0, 0.0])
    want = gradcli.evaluate("sum(sqrt(x))", {"x": x})
    assert want.warnings == ["non-finite gradient for x"]
    assert lazy.evaluate("sum(sqrt(x))", {"x": x}, chunks=TINY).warnings == want.warnings


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
    lazy.require_dask()  # imported, as after any evaluation on Dask
    package = sys.modules["gradcli.autograd"]
    monkeypatch.delattr(package, "dask_backend")
    monkeypatch.setitem(sys.modules, "gradcli.autograd.dask_backend", None)
    with pytest.raises(InputError, match=r"pip install 'gradcli\[dask\]'"):
        lazy.require_dask()


CLIPS = [
    {"clip_norm": 1.0},
    {"clip_norm": 0.5, "norm_type": "inf"},
    {"clip_norm": 2.0, "norm_type": 1.5},
    {"clip_norm": 1e9},  # not clipped
    {"clip_value": 0.01},
]


@pytest.mark.parametrize("clip", CLIPS, ids=[str(c) for c in CLIPS])
def test_clipping_in_memory_and_into_zarr_as_numpy(clip: dict[str, Any], tmp_path: Any) -> None:
    inputs = {"a": np.linspace(-2, 2, 300), "b": np.linspace(0, 1, 300), "c": np.ones(3)}
    text = "h = tanh(a) * b; sum(h * h) + sum(c)"
    want = gradcli.evaluate(text, inputs, wrt=["a", "b"], **clip)
    got = lazy.evaluate(text, inputs, wrt=["a", "b"], chunks=256, **clip)
    assert_as_numpy(got, want, str(clip))
    stored = lazy.evaluate_into(str(tmp_path / "o.zarr"), text, inputs, wrt=["a", "b"],
                                chunks=256, **clip)  # fmt: skip
    for n in "ab":
        _close(stored.grads[n].compute(), want.grads[n], f"{clip} {n}")
    _close(stored.intermediates["h"][1].compute(), want.intermediates["h"][1], "h")
    assert stored.clip.keys() == want.clip.keys()
    for k, v in want.clip.items():
        assert stored.clip[k] == pytest.approx(v, rel=1e-12), k
    assert stored.total_grad_norm == pytest.approx(want.total_grad_norm, rel=1e-12)
    assert (stored.notes, stored.warnings) == (want.notes, want.warnings)


@pytest.mark.parametrize("text", ["128MB", "64MiB", "1e6", 4096])
def test_chunk_sizes(text: Any) -> None:
    assert isinstance(lazy.parse_chunks(text), int)


@pytest.mark.parametrize("text", ["lots", "0", -3, True])
def test_bad_chunk_sizes_are_input_errors(text: Any) -> None:
    with pytest.raises(InputError, match="chunks"):
        lazy.parse_chunks(text)


# --- files read and written a chunk at a time ------------------------------------------


def _chunks_of(nbytes: int) -> Any:
    from gradcli.autograd.dask_backend import DASK, chunk_size

    def chunks_for(shape: tuple[int, ...], dtype: Any) -> Any:
        with chunk_size(nbytes):
            return DASK.chunks_for(shape, dtype)

    return chunks_for


@pytest.mark.parametrize("order", ["C", "F"])
def test_an_npy_file_is_read_a_chunk_at_a_time(tmp_path: Any, order: str) -> None:
    from gradcli.io.chunked import lazy_npy

    want = np.asarray(np.arange(600.0).reshape(20, 30) / 7, order=order)
    np.save(tmp_path / "x.npy", want)
    x = lazy_npy(
        str(tmp_path / "x.npy"), name="x", dtype="float64", max_elements=None,
        chunks_for=_chunks_of(400),
    )  # fmt: skip
    assert x.npartitions > 10
    assert (x.compute() == want).all()
    assert lazy_npy(
        str(tmp_path / "x.npy"), name="x", dtype="float32", max_elements=None,
        chunks_for=_chunks_of(400),
    ).compute().dtype == np.float32  # fmt: skip


@pytest.mark.parametrize(
    ("dtype", "order", "shape"),
    [("<f8", "C", (37,)), (">f4", "C", (9, 4, 3)), ("<f8", "F", (9, 4)), ("<i2", "C", (5, 6))],
)
def test_npy_parts_read_as_a_memory_map_reads(
    tmp_path: Any, dtype: str, order: str, shape: tuple[int, ...], monkeypatch: Any
) -> None:
    """Rows of a C-ordered file are read straight into the array; any other part through
    the memory map: the same values, byte order and dtype either way."""
    from gradcli.io.chunked import NpyParts
    from gradcli.io.npfiles import npy_header

    want = np.asarray(np.arange(math.prod(shape)).reshape(shape), dtype=dtype, order=order)
    path = tmp_path / "x.npy"
    np.save(path, want)
    with open(path, "rb") as f:
        _, fortran, file_dtype, offset = npy_header(
            f, size=path.stat().st_size, name="x", shown="x", max_elements=None
        )
    parts = NpyParts(str(path), shape, file_dtype, fortran, offset)
    rows = shape[0]
    keys = [
        tuple(slice(0, n) for n in shape),
        (slice(2, rows - 1), *(slice(0, n) for n in shape[1:])),
        (slice(rows - 1, rows), *(slice(None) for _ in shape[1:])),
        (slice(3, 3), *(slice(0, n) for n in shape[1:])),
        (slice(0, rows, 2), *(slice(0, n) for n in shape[1:])),  # a step: the map
    ]
    if len(shape) > 1:
        keys.append((slice(1, 4), slice(1, 3), *(slice(0, n) for n in shape[2:])))  # the map
    for key in keys:
        got = parts[key]
        assert got.dtype == want.dtype and got.shape == want[key].shape, key
        assert np.array_equal(got, want[key]), key
    # the keys Dask gives for chunks of rows: one run of bytes, read without the map
    chunks = da.from_array(parts, chunks=(2, *shape[1:]), asarray=True, fancy=False)
    with monkeypatch.context() as m:
        if order == "C" or len(shape) == 1:
            m.setattr(np, "memmap", None)  # any use of the map fails
        assert np.array_equal(chunks.compute(scheduler="sync"), want)
    # cut short after the header was read: an input error, not zeros or a crash
    path.write_bytes(path.read_bytes()[: offset + 8])
    with pytest.raises(InputError, match="ends before the data its header gives"):
        parts[tuple(slice(0, n) for n in shape)]


def test_a_bad_npy_file_is_refused_before_any_chunk(tmp_path: Any) -> None:
    from gradcli.errors import LimitError
    from gradcli.io.chunked import lazy_npy

    np.save(tmp_path / "o.npy", np.array([1, "a"], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="Python objects"):
        lazy_npy(str(tmp_path / "o.npy"), name="o", dtype="float64", max_elements=None,
                 chunks_for=_chunks_of(400))  # fmt: skip
    np.save(tmp_path / "t.npy", np.arange(100.0))
    data = (tmp_path / "t.npy").read_bytes()
    (tmp_path / "t.npy").write_bytes(data[:-8])
    with pytest.raises(InputError, match="truncated"):
        lazy_npy(str(tmp_path / "t.npy"), name="t", dtype="float64", max_elements=None,
                 chunks_for=_chunks_of(400))  # fmt: skip
    np.save(tmp_path / "big.npy", np.arange(100.0))
    with pytest.raises(LimitError):
        lazy_npy(str(tmp_path / "big.npy"), name="b", dtype="float64", max_elements=99,
                 chunks_for=_chunks_of(400))  # fmt: skip


def test_zarr_arrays_and_group_members(tmp_path: Any) -> None:
    import zarr

    from gradcli.io.chunked import lazy_zarr

    z = zarr.open_array(str(tmp_path / "a.zarr"), mode="w", shape=(100,), chunks=(16,),
                        dtype="f8")  # fmt: skip
    z[:] = np.arange(100.0)
    g = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    g.create_array("p", shape=(4,), dtype="f4", chunks=(2,))[:] = [1, 2, 3, 4]
    g.create_array("q", shape=(2,), dtype="i8", chunks=(2,))[:] = [5, 6]

    def read(spec: str) -> Any:
        return lazy_zarr(str(tmp_path / spec), name="x", dtype="float64", max_elements=None,
                         chunks_for=_chunks_of(256))  # fmt: skip

    a = read("a.zarr")
    assert all(c % 16 == 0 for c in a.chunks[0][:-1])  # whole chunks of the store
    assert a.compute().tolist() == list(np.arange(100.0))
    assert read("g.zarr:q").compute().tolist() == [5.0, 6.0]
    with pytest.raises(InputError, match="group of 2 arrays"):
        read("g.zarr")
    with pytest.raises(InputError, match='no array "r"'):
        read("g.zarr:r")
    with pytest.raises(InputError, match="no such Zarr store"):
        read("none.zarr")


def test_evaluate_into_a_zarr_group_gives_numpys_numbers(tmp_path: Any) -> None:
    from gradcli.io.chunked import read_zarr_group

    inputs = {"a": np.linspace(-2, 2, 3000), "b": np.linspace(0, 1, 3000)}
    text = "h = tanh(a); sum(h * exp(-b**2))"
    want = gradcli.evaluate(text, inputs)
    out = str(tmp_path / "out.zarr")
    got = lazy.evaluate_into(out, text, inputs, chunks=4096)
    saved = read_zarr_group(out)
    assert sorted(saved) == ["grad_a", "grad_b", "grad_h", "output"]
    _close(saved["output"].compute(), want.value, "output")
    for n in "ab":
        _close(saved[f"grad_{n}"].compute(), want.grads[n], n)
        _close(got.grads[n].compute(), want.grads[n], n)
    _close(saved["grad_h"].compute(), want.intermediates["h"][1], "h")
    assert got.total_grad_norm == pytest.approx(want.total_grad_norm, rel=1e-12)
    assert (got.warnings, got.notes) == (want.warnings, want.notes)
    # a second save replaces the group whole; a failed one leaves it as it was
    lazy.evaluate_into(out, "sum(a * 2)", {"a": np.ones(5)})
    assert sorted(read_zarr_group(out)) == ["grad_a", "output"]
    with pytest.raises(InputError):
        lazy.evaluate_into(out, "sum(x[[0, 0]])", {"x": np.ones(5)})
    assert sorted(read_zarr_group(out)) == ["grad_a", "output"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.zarr"]  # nothing left over


def test_a_nonfinite_gradient_written_to_zarr_is_warned_about(tmp_path: Any) -> None:
    x = np.array([1.0, 0.0, 4.0])
    want = gradcli.evaluate("sum(sqrt(x))", {"x": x})
    got = lazy.evaluate_into(str(tmp_path / "o.zarr"), "sum(sqrt(x))", {"x": x}, chunks=8)
    assert got.warnings == want.warnings
    assert "non-finite gradient for x" in got.warnings


@pytest.mark.parametrize("shape", [(5000,), (40, 30), (3, 500), (7, 8, 30), (2000, 1)])
def test_a_lazy_array_is_shown_as_numpy_summarises_it_reading_only_the_corners(
    shape: tuple[int, ...],
) -> None:
    from gradcli.layout import format_array

    want = np.arange(np.prod(shape), dtype=float).reshape(shape) / 7
    assert format_array(da.from_array(want, chunks=64)) == format_array(want)
    assert format_array(da.from_array(want, chunks=64), precision=2, linewidth=40) == (
        format_array(want, precision=2, linewidth=40)
    )


def test_showing_a_lazy_array_reads_only_the_chunks_at_its_corners() -> None:
    from gradcli.layout import format_array

    a = da.from_array(Counted(), chunks=8, asarray=True)  # 40 elements, 5 chunks
    big = da.concatenate([a] * 50)  # 2,000 elements, 250 chunks
    READS.clear()
    text = format_array(big)
    assert text == format_array(np.concatenate([np.arange(40.0)] * 50))
    assert len(READS) == 2  # the first chunk and the last


# --- the command line --------------------------------------------------------------------


def _numbers(doc: Any) -> dict[str, Any]:
    """A response's output and gradients as arrays, by name."""
    out = {"output": np.asarray(doc["output"]["value"], dtype=float)}
    for name, entry in doc["inputs"].items():
        out[name] = np.asarray(entry["grad"], dtype=float)
    return out


@pytest.fixture
def npy_pair(tmp_path: Any) -> tuple[str, str]:
    rng = np.random.default_rng(15)
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    np.save(a, rng.standard_normal(3000))
    np.save(b, rng.standard_normal(3000))
    return str(a), str(b)


PROGRAM = "sum(tanh(a)*exp(-b**2))"


def test_eval_on_dask_answers_as_eval_on_numpy(npy_pair: tuple[str, str]) -> None:
    a, b = npy_pair
    want = _numbers(run("eval", PROGRAM, f"a=@{a}", f"b=@{b}", "--json").expect(0).json)
    got = run(
        "eval", PROGRAM, f"a=@{a}", f"b=@{b}", "--json", "--backend", "dask", "--chunks", "4KB"
    ).expect(0)
    assert got.stderr == ""
    for name, value in _numbers(got.json).items():
        _close(value, want[name], name)


def test_a_zarr_input_chooses_dask_and_says_so(tmp_path: Any) -> None:
    import zarr

    g = zarr.open_group(str(tmp_path / "d.zarr"), mode="w")
    g.create_array("x", shape=(2000,), dtype="f8", chunks=(256,))[:] = np.linspace(0, 1, 2000)
    r = run("eval", "sum(x * x)", f"x=@{tmp_path / 'd.zarr'}:x", "--json").expect(0)
    assert "evaluated with --backend dask: `x` is read a chunk at a time" in r.stderr
    _close(r.json["inputs"]["x"]["grad"], 2 * np.linspace(0, 1, 2000), "grad")
    quiet = run("eval", "sum(x * x)", f"x=@{tmp_path / 'd.zarr'}:x", "--json", "-q").expect(0)
    assert quiet.stderr == ""
    run("eval", "sum(x)", f"x=@{tmp_path / 'd.zarr'}:x", "--backend", "numpy").assert_usage_error(
        "is a Zarr store", "leave out --backend numpy"
    )


def test_save_zarr_on_dask_writes_a_chunk_at_a_time_and_numpy_can_too(
    npy_pair: tuple[str, str], tmp_path: Any
) -> None:
    from gradcli.io.chunked import read_zarr_group

    a, b = npy_pair
    want = _numbers(run("eval", PROGRAM, f"a=@{a}", f"b=@{b}", "--json").expect(0).json)
    for backend in ("dask", "numpy"):
        out = tmp_path / f"{backend}.zarr"
        run("eval", PROGRAM, f"a=@{a}", f"b=@{b}", "--backend", backend, "--save", str(out)).expect(
            0
        )
        saved = read_zarr_group(str(out))
        assert sorted(saved) == ["grad_a", "grad_b", "output"]
        _close(saved["output"].compute(), want["output"], f"{backend} output")
        _close(saved["grad_a"].compute(), want["a"], f"{backend} grad_a")
        _close(saved["grad_b"].compute(), want["b"], f"{backend} grad_b")


def test_scale_options_without_dask_are_usage_errors(npy_pair: tuple[str, str]) -> None:
    a, b = npy_pair
    run("eval", PROGRAM, f"a=@{a}", f"b=@{b}", "--chunks", "1MB").assert_usage_error(
        "--chunks and --scheduler go with --backend dask"
    )
    run(
        "eval", PROGRAM, f"a=@{a}", f"b=@{b}", "--backend", "dask", "--chunks", "lots"
    ).assert_usage_error("chunks must be a size in bytes")
    run(
        "eval", "sum(x)", "x=[1,2]", "--backend", "dask", "--scheduler", "local:0"
    ).assert_usage_error("local:N needs a number of workers")


def test_eval_on_a_local_cluster_of_worker_processes(npy_pair: tuple[str, str]) -> None:
    a, b = npy_pair
    want = _numbers(run("eval", PROGRAM, f"a=@{a}", f"b=@{b}", "--json").expect(0).json)
    got = run(
        "eval", PROGRAM, f"a=@{a}", f"b=@{b}", "--json", "--backend", "dask",
        "--chunks", "4KB", "--scheduler", "local:2",
    ).expect(0)  # fmt: skip
    for name, value in _numbers(got.json).items():
        _close(value, want[name], name)


def test_the_api_evaluates_on_dask_when_asked() -> None:
    r = gradcli.evaluate("sum(a*b+b)", {"a": [3, 4], "b": [5, 6]}, backend="dask", chunks=8)
    assert (r.grads["a"].tolist(), r.grads["b"].tolist()) == ([5.0, 6.0], [4.0, 5.0])
    x = da.from_array(np.linspace(0, 1, 50), chunks=7)  # a Dask array given stays lazy
    r = gradcli.evaluate("sum(x * x)", {"x": x}, backend="dask")
    _close(r.grads["x"], 2 * np.linspace(0, 1, 50), "grad")
    with pytest.raises(InputError, match="backend must be one of numpy, dask"):
        gradcli.evaluate("a", {"a": 1}, backend="cupy")
    with pytest.raises(InputError, match="go with backend='dask'"):
        gradcli.evaluate("a", {"a": 1}, chunks=8)


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 4097, (1 << 20) * 3 + 17])
@pytest.mark.parametrize("how", ["direct", "no O_DIRECT", "refused midway"])
def test_chunk_files_are_written_whole_past_the_cache_or_through_it(
    size: int, how: str, tmp_path: Any, monkeypatch: Any
) -> None:
    import errno
    import os

    from gradcli.io import chunked

    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    if how == "no O_DIRECT":  # a system without direct I/O (macOS)
        monkeypatch.delattr(os, "O_DIRECT", raising=False)
    direct: list[bool] = []  # of each write: whether past the cache
    real = os.write

    def write(fd: int, view: Any) -> int:
        import fcntl

        direct.append(bool(fcntl.fcntl(fd, fcntl.F_GETFL) & getattr(os, "O_DIRECT", 0)))
        if how == "refused midway" and direct[-1] and direct.count(True) > 1:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(fd, view)

    monkeypatch.setattr(os, "write", write)
    path = tmp_path / "sub" / "c" / "0"
    chunked._write_file(str(path), memoryview(data))
    assert path.read_bytes() == data
    if how != "no O_DIRECT" and size >= 4096 and _direct_io(tmp_path):
        pieces = -(-(size - size % 4096) // 2**20)  # whole 1 MiB pieces, and the last
        assert direct == [True] * (pieces if how == "direct" else min(pieces, 2))
    chunked._write_file(str(path), memoryview(data[: size // 2]))  # a shorter file replaces it
    assert path.read_bytes() == data[: size // 2]


def _direct_io(folder: Any) -> bool:
    """Whether the file system of ``folder`` takes direct I/O (tmpfs does not)."""
    import os

    try:
        os.close(os.open(folder / "probe", os.O_WRONLY | os.O_CREAT | os.O_DIRECT))
    except (OSError, AttributeError):
        return False
    return True


def test_the_finiteness_and_norm_learnt_while_writing(tmp_path: Any) -> None:
    from gradcli.io.chunked import ZarrWriter

    rng = np.random.default_rng(3)
    arrays = {
        "plain": rng.standard_normal((300, 7)),
        "inf": np.array([1.0, np.inf, 2.0, 3.0, -np.inf]),
        "nan": np.array([1.0, 2.0, np.nan, np.inf]),
        "big": np.full(6, 1e200),  # finite, though the sum of squares overflows
        "f32": rng.standard_normal(1000).astype(np.float32),
        "scalar": np.array(-2.5),
    }

    def sync(*arrays: Any) -> tuple[Any, ...]:
        import dask

        return tuple(dask.compute(*arrays, scheduler="sync"))

    with ZarrWriter(str(tmp_path / "o.zarr")) as writer:
        stats = writer.store({n: da.from_array(a, chunks=2) for n, a in arrays.items()}, sync)
        back = {n: a.compute() for n, a in writer.read().items()}
    for n, a in arrays.items():
        assert back[n].dtype == a.dtype and np.array_equal(back[n], a, equal_nan=True), n
    finite = {n: s[0] for n, s in stats.items()}
    assert finite == {"plain": True, "inf": False, "nan": False, "big": True, "f32": True,
                      "scalar": True}  # fmt: skip
    assert stats["plain"][1] == pytest.approx(np.linalg.norm(arrays["plain"]), rel=1e-13)
    assert stats["f32"][1] == pytest.approx(np.linalg.norm(arrays["f32"].astype(float)), rel=1e-13)
    assert stats["scalar"][1] == 2.5
    assert stats["inf"][1] == np.inf and np.isnan(stats["nan"][1]) and stats["big"][1] == np.inf


def test_gradients_handed_out_stay_lazy() -> None:
    """autograd.grad, a .grad made with create_graph and a lazy grad_outputs: none of them
    computes (a copy of a lazy array would)."""
    import dask

    from gradcli import autograd as E

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("computed")

    x = E.const(da.from_array(np.arange(4.0), chunks=2), requires_grad=True)
    c = E.const(da.from_array(np.arange(4.0) + 1, chunks=2))
    with dask.config.set(scheduler=refuse):
        (g,) = E.grad(E.sum(x * x), [x])
        E.sum(x * c).backward(create_graph=True)
        ones = da.ones(4, chunks=2)
        (h,) = E.grad(x * x, [x], grad_outputs=ones, create_graph=True)
    for t in (g, x.grad, h):
        assert isinstance(t.data, da.Array)
    assert g.data.compute().tolist() == [0.0, 2.0, 4.0, 6.0] == h.data.compute().tolist()
    assert x.grad.data.compute().tolist() == [1.0, 2.0, 3.0, 4.0]


def test_the_allocator_is_set_only_in_a_command_of_its_own_process(monkeypatch: Any) -> None:
    """cli.main(argv) in a process that goes on leaves its allocator alone; the console
    script sets one heap at once when its command line may use Dask and, evaluating on
    Dask's threads, keeps freed memory."""
    import subprocess

    from gradcli import arguments

    calls: list[Any] = []
    monkeypatch.setattr(arguments, "_mallopt", lambda *settings: calls.append(settings))
    assert run("eval", "sum(x*2)", "x=[1,2,3]", "--backend", "dask", "--json").code == 0
    assert calls == []
    script = (
        "import sys\n"
        "from gradcli import arguments, cli\n"
        "calls = []\n"
        "arguments._mallopt = lambda *s: calls.append(s)\n"
        "sys.argv = ['gradcli', *sys.argv[1:]]\n"
        "try:\n"
        "    cli.main()\n"
        "finally:\n"
        "    print(calls, file=sys.stderr)\n"
    )
    for backend, want in (
        ("numpy", "[]"),  # a command line that names no Dask, no Zarr, no .npy
        ("dask", "[((-8, 1),), ((-3, 1073741824), (-1, 1073741824))]"),
    ):
        argv = ["eval", "sum(x*2)", "x=[1,2]", "--backend", backend, "-q"]
        done = subprocess.run(
            [sys.executable, "-c", script, *argv], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert done.stderr.strip().splitlines()[-1] == want


@pytest.mark.parametrize("clip", [{}, *CLIPS], ids=["none", *(str(c) for c in CLIPS)])
def test_a_saved_result_is_shown_from_what_its_pass_learnt(
    clip: dict[str, Any], tmp_path: Any
) -> None:
    """The table of a result written to Zarr is the NumPy backend's, drawn from the parts
    learnt while writing (the clipped ones when clipping rewrote the gradients): the
    store's chunks are gone and nothing reads them."""
    import io
    import shutil

    from gradcli import present

    rng = np.random.default_rng(8)
    inputs = {"a": rng.standard_normal((40, 60)), "b": rng.standard_normal(60)}
    text = "sum(tanh(a) * exp(-b**2))"
    want = gradcli.evaluate(text, inputs, **clip)
    out = tmp_path / "o.zarr"
    got = lazy.evaluate_into(str(out), text, inputs, chunks=2048, **clip)
    for member in ("grad_a", "grad_b"):
        shutil.rmtree(out / member / "c")  # the chunks: whatever reads them now fails
    got.inputs = want.inputs  # (the inputs are in memory here: shown as NumPy's)

    def table(result: gradcli.Result) -> str:
        from rich.console import Console

        console = Console(width=120, record=True, file=io.StringIO())
        present.print_result(result, console, precision=6)
        return console.export_text()

    assert table(got) == table(want)
