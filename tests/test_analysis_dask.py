"""``check``, ``jacobian``, ``hessian``, ``graph`` and ``optimize`` on the Dask backend
(docs/dask.md) against the NumPy backend: the same JSON to 1e-12 relative, from the API and
from the command line, on inputs split into many chunks (broadcasting across their
boundaries); lazily read inputs (Zarr, ``.npy``); one computation per command, never a
silent one; a local cluster; and what is refused."""

from __future__ import annotations

import math
from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest
from harness import invoke, run

from gradcli import analysis, lazy
from gradcli.errors import InputError, LimitError

#: two float64 elements a chunk: every array below is split on every axis
TINY = 16

C = np.linspace(-1.0, 1.0, 6)[:, None]  # (6, 1) + (1, 5): broadcast across chunks
R = np.linspace(0.5, 2.0, 5)[None, :]
X = np.linspace(-2.0, 2.0, 9)
Y = np.linspace(0.1, 3.0, 9)
W = np.arange(12.0).reshape(3, 4) / 10 - 0.5
V = np.linspace(-1.0, 1.0, 4)
B = np.array([0.1, -0.2, 0.3])
BROADCAST = {"c": C, "r": R}
ELEMENTWISE = {"x": X, "y": Y}
LAYER = {"W": W, "v": V, "b": B}


def same(want: Any, got: Any, where: str = "", rel: float = 1e-12) -> None:
    """Two JSON documents alike: every number within ``rel`` (relative), all else equal."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), (where, list(got), list(want))
        for k in want:
            same(want[k], got[k], f"{where}.{k}", rel)
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for i, (a, b) in enumerate(zip(want, got, strict=True)):
            same(a, b, f"{where}[{i}]", rel)
    elif isinstance(want, float):
        assert isinstance(got, float), (where, want, got)
        assert abs(got - want) <= rel * abs(want), (where, want, got)
    else:
        assert got == want, (where, want, got)


def both(command: str, expr: str, inputs: dict[str, Any], **options: Any) -> tuple[Any, Any]:
    """The NumPy and the Dask answers of ``gradcli.analysis.<command>``, as JSON."""
    run_it = getattr(analysis, command)
    want = run_it(expr, inputs, **options)
    got = run_it(expr, inputs, backend="dask", **{"chunks": TINY, **options})
    assert got.warnings == want.warnings
    return want.to_json(), got.to_json()


# --- the API: the same numbers ----------------------------------------------------------

JACOBIANS = [
    ("tanh(c + r) * r", BROADCAST),
    ("h = tanh(W @ v + b); h * 2 + v[0]", LAYER),
    ("softmax(x * y)", ELEMENTWISE),
    ("sum(exp(-c**2) * r)", BROADCAST),
]


@pytest.mark.parametrize(("expr", "inputs"), JACOBIANS, ids=[e for e, _ in JACOBIANS])
def test_jacobian_on_dask_is_numpys(expr: str, inputs: dict[str, Any]) -> None:
    want, got = both("jacobian", expr, inputs)
    same(want, got)
    assert any(abs(v) > 0.1 for v in np.ravel(got["jacobian"][next(iter(inputs))]["value"]))


HESSIANS = [
    ("sum(tanh(c + r) ** 2 * r)", BROADCAST, {}),
    ("sum(tanh(W @ v + b) ** 2)", LAYER, {}),
    ("sum(x * y ** 3) + logsumexp(x)", ELEMENTWISE, {"wrt": ["y"]}),
]


@pytest.mark.parametrize(("expr", "inputs", "options"), HESSIANS, ids=[e for e, _, _ in HESSIANS])
def test_hessian_on_dask_is_numpys(
    expr: str, inputs: dict[str, Any], options: dict[str, Any]
) -> None:
    want, got = both("hessian", expr, inputs, **options)
    same(want, got)
    assert np.abs(np.asarray(got["hessian"])).max() > 0.1


def test_the_hessian_of_sum_x_cubed_is_6x_on_dask() -> None:
    got = analysis.hessian("sum(x ** 3)", {"x": X}, backend="dask", chunks=TINY)
    assert np.allclose(got.hessian, np.diag(6 * X), rtol=1e-12, atol=0)


GRAPHS = [
    ("h = tanh(c + r); sum(h * r + c)", BROADCAST),
    ("h = tanh(W @ v + b); g = h * h; mean(g) + v[1]", LAYER),
    ("x * y + 2", ELEMENTWISE),
]


@pytest.mark.parametrize(("expr", "inputs"), GRAPHS, ids=[e for e, _ in GRAPHS])
def test_graph_on_dask_is_numpys(expr: str, inputs: dict[str, Any]) -> None:
    want = analysis.graph(expr, inputs)
    got = analysis.graph(expr, inputs, backend="dask", chunks=TINY)
    same(want.to_json(), got.to_json())
    assert got.to_dot() == want.to_dot()


#: checks whose passes are elementwise, or sum over no chunk boundary: the finite
#: differences see the same bits on both backends
CHECKS = [
    ("tanh(c + r) * r + exp(-c**2)", BROADCAST, {}),
    ("sin(x) * y ** 2 + x / y", ELEMENTWISE, {}),
    ("sum(sin(x) * y ** 2 + x / y)", ELEMENTWISE, {"order": 2}),
    ("sum(relu(x) * y)", {"x": np.array([-1.0, 0.0, 0.5, 2.0]), "y": np.ones(4)}, {}),
]


@pytest.mark.parametrize(("expr", "inputs", "options"), CHECKS, ids=[e for e, _, _ in CHECKS])
def test_check_on_dask_is_numpys(
    expr: str, inputs: dict[str, Any], options: dict[str, Any]
) -> None:
    want, got = both("check", expr, inputs, **options)
    same(want, got)


def test_check_fails_where_numpy_fails() -> None:
    want, got = both("check", "sum(relu(x) * y)", {"x": [-1.0, 0.0, 0.5, 2.0], "y": [1.0] * 4})
    assert got["ok"] is want["ok"] is False
    assert got["inputs"]["x"]["worst_index"] == [1]  # the kink at 0
    assert got["inputs"]["x"]["analytic"] == 0.0
    assert got["inputs"]["x"]["numeric"] == pytest.approx(0.5, rel=1e-8)


def test_check_over_sums_across_chunks_agrees_to_the_finite_differences_noise() -> None:
    """A sum over chunks adds in another order than NumPy's (docs/dask.md, "Same
    numbers"): its last bit, divided by the step, is the numeric derivative's noise, so
    the errors are the same size, not the same numbers."""
    for order in (1, 2):
        want, got = both("check", "sum(tanh(c + r) ** 2)", BROADCAST, order=order)
        assert got["ok"] is want["ok"] is True
        for name in BROADCAST:
            w, g = want["inputs"][name], got["inputs"][name]
            assert g["max_abs_error"] < 1e-8 and w["max_abs_error"] < 1e-8
            assert math.isclose(g["analytic"], g["numeric"], rel_tol=1e-7)


OPTIMIZERS = [
    ("sgd", {"clip_norm": 0.3}),
    ("momentum", {"clip_value": 0.05}),
    ("adam", {"clip_norm": 0.5, "norm_type": "inf"}),
]


@pytest.mark.parametrize(("optimizer", "clip"), OPTIMIZERS, ids=[o for o, _ in OPTIMIZERS])
def test_optimize_on_dask_takes_numpys_steps(optimizer: str, clip: dict[str, Any]) -> None:
    options = {"optimizer": optimizer, "steps": 15, "lr": 0.05, **clip}
    want, got = both(
        "optimize", "sum((tanh(c + r) - 0.5) ** 2) + 0.1 * sum(c ** 2)", BROADCAST,
        wrt=["c"], **options,
    )  # fmt: skip
    same(want, got)
    assert got["losses"][-1] < got["losses"][0]
    want, got = both("optimize", "sum(tanh(W @ v + b) ** 2)", LAYER, wrt=["W", "b"], **options)
    same(want, got)
    assert list(got["final"]) == ["W", "b"]


def test_optimize_on_dask_without_zero_grad_and_with_tol() -> None:
    want, got = both(
        "optimize", "sum((x - 1) ** 2 * y)", ELEMENTWISE, wrt=["x"], steps=4, lr=0.01,
        zero_grad=False,
    )  # fmt: skip
    same(want, got)
    want, got = both(
        "optimize", "sum((x - 1) ** 2 * y)", ELEMENTWISE, wrt=["x"], steps=500, lr=0.1, tol=0.01
    )
    same(want, got)
    assert got["converged"] is True and got["steps_run"] == want["steps_run"] < 100


def test_float32_on_dask_is_numpys() -> None:
    want, got = both("jacobian", "tanh(c + r) * r", BROADCAST, dtype="float32")
    same(want, got, rel=1e-6)
    assert want["jacobian"]["c"]["value"] == got["jacobian"]["c"]["value"]  # elementwise


def test_floating_point_warnings_are_those_of_numpy() -> None:
    x = np.array([-1.0, 2.0, 0.5, 4.0, 1e308])
    for command in ("jacobian", "graph"):
        want = getattr(analysis, command)("log(x) * 10", {"x": x})
        got = getattr(analysis, command)("log(x) * 10", {"x": x}, backend="dask", chunks=TINY)
        kinds = sorted(w.split(" in ")[0] for w in want.warnings)
        assert sorted(w.split(" in ")[0] for w in got.warnings) == kinds
        assert "invalid value encountered" in kinds


# --- one computation, never a silent one ---------------------------------------------


def _forbidden(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("computed outside gradcli.lazy.compute")


@pytest.fixture
def computations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of arrays of each ``lazy.compute`` call; any other computation fails."""
    calls: list[int] = []
    compute = lazy.compute

    def counted(*arrays: Any, client: Any = None) -> Any:
        calls.append(len(arrays))
        return compute(*arrays, client=client)

    monkeypatch.setattr(lazy, "compute", counted)
    with dask.config.set(scheduler=_forbidden):
        yield calls


@pytest.mark.parametrize(
    ("command", "expr", "options"),
    [
        ("check", "tanh(c + r) * r", {}),
        ("check", "sum(tanh(c + r) * r)", {"order": 2}),
        ("jacobian", "tanh(c + r) * r", {}),
        ("hessian", "sum(tanh(c + r) * r)", {}),
        ("graph", "sum(tanh(c + r) * r)", {}),
    ],
)
def test_every_pass_is_computed_in_one_call(
    computations: list[int], command: str, expr: str, options: dict[str, Any]
) -> None:
    getattr(analysis, command)(expr, BROADCAST, backend="dask", chunks=TINY, **options)
    assert len(computations) == 1
    assert computations[0] > 10  # the passes' results, all of them together


def test_optimize_computes_once_a_step(computations: list[int]) -> None:
    r = analysis.optimize("sum((c + r) ** 2)", BROADCAST, wrt=["c"], steps=3,
                          backend="dask", chunks=TINY)  # fmt: skip
    assert computations == [2] * 4  # the loss and the gradient: 3 steps, the final one
    assert r.steps_run == 3


#: the parts of a Counted read so far (module level: Dask may copy the array object)
READS: list[Any] = []


class Counted:
    """An array of 40 elements that notes every read of a part of it: a data set on disk."""

    shape, dtype, ndim = (40,), np.dtype("float64"), 1

    def __getitem__(self, key: Any) -> Any:
        READS.append(key)
        return np.linspace(0.0, 1.0, 40)[key]


def test_optimize_reads_a_data_set_a_chunk_at_a_time_each_step() -> None:
    data = da.from_array(Counted(), chunks=8, asarray=True)
    READS.clear()
    text = "sum((w * d - 0.5) ** 2)"
    got = analysis.optimize(text, {"w": 2.0, "d": data}, wrt=["w"], steps=3, lr=0.01,
                            backend="dask", chunks=64)  # fmt: skip
    want = analysis.optimize(text, {"w": 2.0, "d": np.linspace(0.0, 1.0, 40)}, wrt=["w"],
                             steps=3, lr=0.01)  # fmt: skip
    same(want.to_json(), got.to_json())
    # four passes (three steps and the final one), each reading the five chunks once:
    # the data set is never read whole, nor held
    assert sorted(READS, key=str) == sorted([(slice(i, i + 8),) for i in range(0, 40, 8)] * 4,
                                            key=str)  # fmt: skip


def test_optimize_holds_the_parameters_it_reads_lazily(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import zarr

    z = zarr.open_array(str(tmp_path / "w.zarr"), mode="w", shape=(9,), chunks=(2,), dtype="f8")
    z[:] = X
    from gradcli.io.chunked import lazy_zarr

    def w() -> Any:
        return lazy_zarr(str(tmp_path / "w.zarr"), name="w", dtype="float64", max_elements=None,
                         chunks_for=lambda shape, dt: ((2, 2, 2, 2, 1),))  # fmt: skip

    text = "sum((w - y) ** 2)"
    got = analysis.optimize(text, {"w": w(), "y": Y}, steps=5, lr=0.1, backend="dask")
    want = analysis.optimize(text, {"w": X, "y": Y}, steps=5, lr=0.1)
    same(want.to_json(), got.to_json())
    assert z[:].tolist() == X.tolist()  # the store itself is not written
    monkeypatch.setattr("gradcli.inputs.big_file_bytes", lambda: 64)  # 9 floats: 72 bytes
    with pytest.raises(InputError, match="optimize holds the inputs it optimises in memory"):
        analysis.optimize(text, {"w": w(), "y": Y}, steps=5, backend="dask")
    with pytest.raises(LimitError):  # the element limit, as for any input
        analysis.optimize(text, {"w": w(), "y": Y}, backend="dask", max_elements=8)


# --- what is refused ----------------------------------------------------------------------


def test_what_dask_cannot_compute_lazily_is_refused_by_name() -> None:
    m = {"M": np.eye(4) * 2}
    with pytest.raises(InputError, match="`det` is not available with the Dask backend"):
        analysis.jacobian("det(M)", m, backend="dask")
    with pytest.raises(InputError, match="`inv` is not available with the Dask backend"):
        analysis.hessian("sum(inv(M))", m, backend="dask")
    with pytest.raises(InputError, match="repeated integers"):
        analysis.check("sum(x[[0, 2, 0]])", {"x": X}, backend="dask")


def test_the_backend_options_are_checked_as_evaluate_checks_them() -> None:
    for command in ("check", "jacobian", "hessian", "graph", "optimize"):
        run_it = getattr(analysis, command)
        with pytest.raises(InputError, match="go with backend='dask'"):
            run_it("sum(x * x)", {"x": X}, chunks=64)
        with pytest.raises(InputError, match="go with backend='dask'"):
            run_it("sum(x * x)", {"x": X}, scheduler="local:1")
        with pytest.raises(InputError, match="backend must be one of numpy, dask"):
            run_it("sum(x * x)", {"x": X}, backend="cupy")
        with pytest.raises(InputError, match="chunks must be a size in bytes"):
            run_it("sum(x * x)", {"x": X}, backend="dask", chunks="lots")


def test_the_limits_apply_on_dask_before_any_pass() -> None:
    with pytest.raises(LimitError, match="over the limit of 10"):
        analysis.check("x * y", ELEMENTWISE, backend="dask", max_passes=10)
    with pytest.raises(LimitError, match="over the limit of 5"):
        analysis.hessian("sum(x ** 3)", ELEMENTWISE, backend="dask", max_passes=5)


def test_a_missing_dask_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    lazy.require_dask()
    monkeypatch.delattr(sys.modules["gradcli.autograd"], "dask_backend")
    monkeypatch.setitem(sys.modules, "gradcli.autograd.dask_backend", None)
    for command in ("check", "jacobian", "hessian", "graph", "optimize"):
        with pytest.raises(InputError, match=r"pip install 'gradcli\[dask\]'"):
            getattr(analysis, command)("sum(x * x)", {"x": X}, backend="dask")


# --- the command line -----------------------------------------------------------------------

CLI = [
    ("check", "tanh(c + r) * r", ()),
    ("check", "sum(sin(c) * r ** 2)", ("--order", "2")),
    ("jacobian", "tanh(c + r) * r", ()),
    ("hessian", "sum(tanh(c + r) ** 2 * r)", ()),
    ("graph", "h = tanh(c + r); sum(h * r + c)", ()),
    ("optimize", "sum((tanh(c + r) - 0.5) ** 2)", ("--wrt", "c", "--optimizer", "adam",
                                                   "--steps", "5", "--clip-norm", "0.5")),
]  # fmt: skip
C_TEXT = "c=" + str(C.tolist())
R_TEXT = "r=" + str(R.tolist())


@pytest.mark.parametrize(("command", "expr", "options"), CLI, ids=[f"{c} {e}" for c, e, _ in CLI])
def test_the_commands_answer_on_dask_as_on_numpy(
    command: str, expr: str, options: tuple[str, ...]
) -> None:
    args = (command, expr, C_TEXT, R_TEXT, "--json", *options)
    want = invoke(*args).expect(0).json
    got = invoke(*args, "--backend", "dask", "--chunks", "64B").expect(0)
    same(want, got.json)
    assert got.stderr == ""


def test_a_zarr_input_chooses_dask_and_says_so(tmp_path: Any) -> None:
    import zarr

    g = zarr.open_group(str(tmp_path / "d.zarr"), mode="w")
    g.create_array("x", shape=(9,), dtype="f8", chunks=(2,))[:] = X
    store = f"x=@{tmp_path / 'd.zarr'}:x"
    want = run("hessian", "sum(tanh(x) * y)", f"x={X.tolist()}", f"y={Y.tolist()}", "--json")
    got = run("hessian", "sum(tanh(x) * y)", store, f"y={Y.tolist()}", "--json").expect(0)
    assert "note: evaluated with --backend dask: `x` is read a chunk at a time" in got.stderr
    same(want.expect(0).json, got.json)
    hessian = np.asarray(got.json["hessian"])
    assert np.allclose(np.diag(hessian)[:9], -2 * np.tanh(X) / np.cosh(X) ** 2 * Y, rtol=1e-12)
    run("graph", "sum(x)", store, "--backend", "numpy").assert_usage_error(
        "is a Zarr store", "leave out --backend numpy"
    )


def test_an_npy_input_is_read_a_chunk_at_a_time_with_backend_dask(tmp_path: Any) -> None:
    np.save(tmp_path / "d.npy", Y)
    text = "sum((w * d - 1) ** 2)"
    args = ("optimize", text, "w=[0.5]", "--steps", "4", "--lr", "0.05", "--json", "--wrt", "w")
    want = run(*args, f"d={Y.tolist()}").expect(0).json
    got = run(*args, f"d=@{tmp_path / 'd.npy'}", "--backend", "dask", "--chunks", "16").expect(0)
    assert got.stderr == ""  # asked for: nothing to say
    same(want, got.json)


def test_a_large_npy_input_chooses_dask_and_says_so(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    np.save(tmp_path / "x.npy", X)
    monkeypatch.setattr("gradcli.inputs.big_file_bytes", lambda: 64)  # "a quarter of memory"
    args = ("check", "tanh(x) * y", f"y={Y.tolist()}", "--json")
    want = invoke(*args, f"x={X.tolist()}").expect(0)
    assert want.stderr == ""
    got = invoke(*args, f"x=@{tmp_path / 'x.npy'}").expect(0)
    assert got.stderr == "note: evaluated with --backend dask: `x` is read a chunk at a time\n"
    same(want.json, got.json)
    assert got.json["ok"] is True and got.json["inputs"]["x"]["max_abs_error"] < 1e-8
    quiet = invoke(*args, f"x=@{tmp_path / 'x.npy'}", "-q").expect(0)
    assert quiet.stderr == ""


def test_jacobian_on_a_local_cluster_of_worker_processes(tmp_path: Any) -> None:
    np.save(tmp_path / "x.npy", X)
    want = run("jacobian", "tanh(x) * y", f"x={X.tolist()}", f"y={Y.tolist()}", "--json")
    got = run(
        "jacobian", "tanh(x) * y", f"x=@{tmp_path / 'x.npy'}", f"y={Y.tolist()}", "--json",
        "--backend", "dask", "--chunks", "32", "--scheduler", "local:1",
    ).expect(0)  # fmt: skip
    same(want.expect(0).json, got.json)
    assert np.allclose(np.diag(got.json["jacobian"]["y"]["value"]), np.tanh(X), rtol=1e-12)


@pytest.mark.parametrize("command", ["check", "jacobian", "hessian", "graph", "optimize"])
def test_scale_options_without_dask_are_usage_errors(command: str) -> None:
    base = (command, "sum(x * x)", "x=[1, 2]")
    invoke(*base, "--chunks", "64").assert_usage_error(
        "--chunks and --scheduler go with --backend dask"
    )
    invoke(*base, "--backend", "numpy", "--scheduler", "local:1").assert_usage_error(
        "--chunks and --scheduler go with --backend dask"
    )
    invoke(*base, "--backend", "dask", "--chunks", "lots").assert_usage_error(
        "chunks must be a size in bytes"
    )


def test_refusals_on_the_command_line() -> None:
    r = invoke("jacobian", "det(M)", "M=[[2, 0], [0, 2]]", "--backend", "dask", "--json")
    r.assert_usage_error("`det` is not available with the Dask backend")
    assert r.json["error"]["kind"] == "input"
    invoke("optimize", "sum(x)", "x=[1]", "--backend", "dask", "--scheduler", "local:0"
           ).assert_usage_error("local:N needs a number of workers")  # fmt: skip
