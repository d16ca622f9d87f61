"""Forward mode and Hessian-vector products (issue 17, items 1 and 2; docs/commands.md,
"jvp", "jacobian", "hessian"; docs/api.md, "Forward mode and Hessian-vector products";
docs/json.md, "jvp --json", "hessian --vector --json").

Without torch: ``gradcli.jvp`` against central finite differences in float64, the
forward-mode Jacobian against the reverse-mode one, ``gradcli.hvp`` against the Hessian
times the vector and against differences of gradients, the values at kinks (the same
conventions as reverse mode), the torch-style namespaces' conventions, the command line
(tables, JSON, errors and their exit codes), and an ``hvp`` of 10⁶ elements in bounded time
and memory. With torch (skipped when it is missing): every function of
``tests/test_vs_torch.py`` through ``gradcli.func.jvp``/``jacfwd``/``jacrev`` against
``torch.func``'s, awkward points included, and programs against ``torch.func.jvp`` and
``torch.autograd.functional.hvp``, in float64.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import shlex
import time
import tracemalloc
from typing import Any

import harness
import numpy as np
import pytest

import gradcli
from gradcli import analysis
from gradcli.errors import InputError, NamingError, ShapeError

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")

# --------------------------------------------------------------------------------------
# Finite differences (float64, central): the oracle that needs no torch
# --------------------------------------------------------------------------------------

EPS = 1e-6

#: programs at smooth points, with their inputs (drawn per program)
PROGRAMS: list[tuple[str, dict[str, Any]]] = [
    ("sin(x) * y", {"x": [0.3, 1.2, -0.7], "y": 2.0}),
    ("h = tanh(W @ x + b); sum(h ** 2)", {"W": "randn(3, 4)", "x": "randn(4)", "b": 0.5}),
    ("softmax(x, axis=0) * log(y ** 2 + 1)", {"x": "randn(3, 2)", "y": "randn(2)"}),
    ("logsumexp(A, axis=1) + norm(A, axis=1)", {"A": "randn(3, 4)"}),
    ("det(A) + trace(inv(A @ A.T + eye(3)))", {"A": "randn(3, 3)"}),
    ("solve(A @ A.T + eye(3), b) * prod(sigmoid(b))", {"A": "randn(3, 3)", "b": "randn(3)"}),
    ("x[[0, 2, 2]] * x[::-1][:3] + mean(x) ** 3", {"x": "randn(5)"}),
    (
        "concatenate([x, x * y, stack([y, y])[0]]) / (1 + sum(x ** 2))",
        {"x": "randn(2)", "y": "randn(2)"},
    ),
    ("arctan2(x, y) + maximum(x, 2 * y) + clip(x, -0.2, 0.2)", {"x": "randn(4)", "y": "randn(4)"}),
    ("var(x, axis=0) + std(x, axis=1, ddof=1)[0] + x.T @ x", {"x": "randn(3, 3)"}),
    ("where(x > 0, x ** 3, exp(x)) + softplus(x) * silu(y)", {"x": "randn(4)", "y": "randn(4)"}),
]


def _values(inputs: dict[str, Any], seed: int) -> dict[str, np.ndarray]:
    """The inputs as arrays (a string is a constant expression, as on the command line)."""
    from gradcli.api import constant_value

    rng = np.random.default_rng(seed)
    out = {}
    for name, v in inputs.items():
        if isinstance(v, str):
            v = constant_value(v, dtype="float64", seed=int(rng.integers(1000)))
        out[name] = np.array(v, dtype=np.float64)
    return out


def _output(expr: str, values: dict[str, np.ndarray]) -> np.ndarray:
    return np.asarray(gradcli.evaluate(expr, values, wrt=[]).value, dtype=np.float64)


def _fd_jvp(expr: str, values: dict[str, np.ndarray], tangents: dict[str, np.ndarray]) -> Any:
    def at(s: float) -> np.ndarray:
        moved = {n: v + s * tangents[n] if n in tangents else v for n, v in values.items()}
        return _output(expr, moved)

    return (at(EPS) - at(-EPS)) / (2 * EPS)


def _tangents(values: dict[str, np.ndarray], names: list[str], seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    return {n: rng.standard_normal(values[n].shape) for n in names}


@pytest.mark.parametrize("k", range(len(PROGRAMS)), ids=[p[0][:40] for p in PROGRAMS])
def test_jvp_equals_central_differences(k: int) -> None:
    expr, inputs = PROGRAMS[k]
    values = _values(inputs, k)
    names = list(values)
    for moving in (names, names[:1], names[-1:]):
        tangents = _tangents(values, moving, 100 + k)
        r = gradcli.jvp(expr, values, tangents)
        np.testing.assert_allclose(r.value, _output(expr, values), rtol=0, atol=0)
        np.testing.assert_allclose(
            r.jvp, _fd_jvp(expr, values, tangents), rtol=1e-6, atol=1e-7, err_msg=expr
        )
        assert r.jvp.shape == r.value.shape
        assert list(r.tangents) == [n for n in names if n in tangents]


@pytest.mark.parametrize("k", range(len(PROGRAMS)), ids=[p[0][:40] for p in PROGRAMS])
def test_forward_jacobian_equals_reverse(k: int) -> None:
    expr, inputs = PROGRAMS[k]
    values = _values(inputs, k)
    fwd = analysis.jacobian(expr, values, mode="forward")
    rev = analysis.jacobian(expr, values, mode="reverse")
    assert (fwd.mode, rev.mode) == ("forward", "reverse")
    assert list(fwd.jacobian) == list(rev.jacobian)
    for name, j in rev.jacobian.items():
        assert fwd.jacobian[name].shape == j.shape
        np.testing.assert_allclose(fwd.jacobian[name], j, rtol=1e-12, atol=1e-13, err_msg=name)
    # a JVP is the Jacobian times the tangent
    tangents = _tangents(values, list(values), k)
    r = gradcli.jvp(expr, values, tangents)
    by_jacobian = sum(
        j.reshape(r.value.size, -1) @ tangents[n].ravel() for n, j in rev.jacobian.items()
    )
    np.testing.assert_allclose(r.jvp.ravel(), by_jacobian, rtol=1e-11, atol=1e-12)


def test_jacobian_auto_takes_the_fewer_passes() -> None:
    A = np.random.default_rng(0).standard_normal((6, 2))
    tall = analysis.jacobian("tanh(A @ x)", {"A": A, "x": [1.0, 2.0]}, wrt=["x"], mode="auto")
    assert tall.mode == "forward"
    wide = analysis.jacobian("tanh(A @ x)", {"A": A, "x": [1.0, 2.0]}, wrt=["A"], mode="auto")
    assert wide.mode == "reverse"
    square = analysis.jacobian("x * 2", {"x": [1.0, 2.0]}, mode="auto")
    assert square.mode == "reverse"  # forward only when strictly fewer input elements
    assert analysis.jacobian("x * 2", {"x": [1.0, 2.0]}).mode == "reverse"  # the default
    with pytest.raises(InputError, match="mode must be one of"):
        analysis.jacobian("x * 2", {"x": [1.0]}, mode="sideways")


def test_forward_jacobian_counts_its_passes() -> None:
    # 1 forward run + 1 recorded backward pass + one pass per input element
    values = {"A": np.ones((50, 3)), "x": np.ones(3)}
    analysis.jacobian("A @ x", values, wrt=["x"], mode="forward", max_passes=5)
    with pytest.raises(gradcli.LimitError, match="5 forward and backward passes"):
        analysis.jacobian("A @ x", values, wrt=["x"], mode="forward", max_passes=4)
    with pytest.raises(gradcli.LimitError):
        analysis.jacobian("A @ x", values, wrt=["x"], mode="reverse", max_passes=5)


def test_forward_jacobian_of_unreached_and_constant_inputs() -> None:
    j = analysis.jacobian("x[0] * 3", {"x": [1.0, 2.0], "y": 5.0}, mode="forward")
    np.testing.assert_array_equal(j.jacobian["x"], [3.0, 0.0])
    np.testing.assert_array_equal(j.jacobian["y"], 0.0)
    j = analysis.jacobian("sum(x) * 0 + 3", {"x": [1.0, 2.0]}, mode="forward")
    np.testing.assert_array_equal(j.jacobian["x"], [0.0, 0.0])
    j = analysis.jacobian("(x > 0) * 2", {"x": [1.0, -2.0]}, mode="forward")
    np.testing.assert_array_equal(j.jacobian["x"], np.zeros((2, 2)))


def test_jvp_of_inputs_held_fixed_and_unreached() -> None:
    r = gradcli.jvp("x * y", {"x": [1.0, 2.0], "y": 3.0, "z": 7.0}, {"z": 1.0})
    np.testing.assert_array_equal(r.jvp, [0.0, 0.0])
    r = gradcli.jvp("(x > 1) * 5 + y", {"x": [1.0, 2.0], "y": 3.0}, {"x": [1.0, 1.0]})
    np.testing.assert_array_equal(r.jvp, [0.0, 0.0])
    r = gradcli.jvp("x * y", {"x": [1.0, 2.0], "y": 3.0}, {"y": 1.0})
    np.testing.assert_array_equal(r.jvp, [1.0, 2.0])


def test_jvp_in_float32() -> None:
    r = gradcli.jvp("sin(x) * 2", {"x": [0.0, 1.0]}, {"x": [1.0, 1.0]}, dtype="float32")
    assert r.jvp.dtype == np.float32 and r.tangents["x"].dtype == np.float32
    np.testing.assert_allclose(r.jvp, 2 * np.cos([0.0, 1.0]), rtol=1e-6)


# --------------------------------------------------------------------------------------
# Kinks: forward mode follows reverse mode's conventions (docs/commands.md, "jvp")
# --------------------------------------------------------------------------------------

KINKS: list[tuple[str, list[float], list[float], Any]] = [
    # program of x, x, tangent, J t
    ("relu(x)", [0.0, -1.0, 2.0], [1.0, 1.0, 1.0], [0.0, 0.0, 1.0]),
    ("abs(x)", [0.0, -1.0, 2.0], [1.0, 1.0, 1.0], [0.0, -1.0, 1.0]),
    ("sign(x) + floor(x) + ceil(x) + round(x)", [0.0, 0.5], [1.0, 1.0], [0.0, 0.0]),
    ("max(x)", [1.0, 3.0, 3.0], [0.0, 1.0, 2.0], 1.5),
    ("min(x)", [1.0, 1.0, 3.0], [4.0, 2.0, 1.0], 3.0),
    ("maximum(x, 1)", [1.0, 0.0, 2.0], [1.0, 1.0, 1.0], [0.5, 0.0, 1.0]),
    ("minimum(x, 1)", [1.0, 0.0, 2.0], [1.0, 1.0, 1.0], [0.5, 1.0, 0.0]),
    ("clip(x, -1, 1)", [-1.0, 1.0, 2.0, 0.0], [1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 1.0]),
    ("norm(x)", [0.0, 0.0], [1.0, 1.0], 0.0),
    ("prod(x)", [0.0, 2.0, 3.0], [1.0, 1.0, 1.0], 6.0),
    ("prod(x)", [0.0, 0.0, 3.0], [1.0, 1.0, 1.0], 0.0),
    ("sqrt(x)", [0.0, 4.0], [1.0, 1.0], [math.inf, 0.25]),
    ("x ** 2", [0.0, 1.0], [1.0, 1.0], [0.0, 2.0]),
    ("where(x > 0, sqrt(x), 0)", [0.0, 4.0], [1.0, 1.0], [0.0, 0.25]),
    ("sigmoid(x) + softplus(x)", [1000.0, -1000.0], [1.0, 1.0], [1.0, 0.0]),
    ("logsumexp(x)", [1000.0, 1000.0], [1.0, 3.0], 2.0),
    # issue 17's functions at their kinks and awkward points, as in reverse mode
    # (docs/conventions.md): leaky_relu'(0) = negative_slope, elu'(0) = alpha, l1_loss at
    # input == target 0, huber_loss at |d| = delta the quadratic side's d, logaddexp's tie 1/2
    ("leaky_relu(x) + leaky_relu(x, 0.2)", [0.0, -1.0, 2.0], [1.0, 1.0, 1.0], [0.21, 0.21, 2.0]),
    ("elu(x) + elu(x, 2.5)", [0.0, -1.0, 2.0], [1.0, 1.0, 1.0], [3.5, 3.5 / math.e, 2.0]),
    ("gelu(x) + erf(x)", [0.0, 40.0, -40.0], [1.0, 1.0, 1.0],
     [0.5 + 2 / math.sqrt(math.pi), 1.0, 0.0]),
    ('gelu(x, approximate="tanh")', [0.0, 40.0, -40.0], [1.0, 1.0, 1.0], [0.5, 1.0, 0.0]),
    ("softsign(x)", [0.0, 1.0], [1.0, 1.0], [1.0, 0.25]),
    ("logaddexp(x, 1)", [1.0, 0.0], [1.0, 1.0], [0.5, 1 / (1 + math.e)]),
    ("cumprod(x)", [2.0, 0.0, 3.0], [1.0, 1.0, 1.0], [1.0, 2.0, 6.0]),
    ('l1_loss(x, 1, reduction="sum")', [1.0, 0.0, 2.0], [1.0, 2.0, 4.0], 2.0),
    ('huber_loss(x, 0, reduction="sum")', [1.0, -1.0, 0.5, 2.0], [1.0, 2.0, 4.0, 8.0], 9.0),
    ('binary_cross_entropy(x, [0, 1, 1, 0], reduction="none")', [0.0, 1.0, 0.5, 0.5],
     [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, -2.0, 2.0]),
]  # fmt: skip


@pytest.mark.parametrize("expr,x,t,expected", KINKS, ids=[k[0] for k in KINKS])
def test_jvp_at_kinks(expr: str, x: list[float], t: list[float], expected: Any) -> None:
    r = gradcli.jvp(expr, {"x": x}, {"x": t})
    np.testing.assert_allclose(r.jvp, expected, rtol=1e-12, atol=0)
    fwd = analysis.jacobian(expr, {"x": x}, mode="forward").jacobian["x"]
    rev = analysis.jacobian(expr, {"x": x}, mode="reverse").jacobian["x"]
    # equal where both are finite: an infinite derivative (sqrt at 0) makes a nan (0 * inf)
    # in its column in forward mode and in its row in reverse mode, as jacfwd and jacrev
    # do; where(x > 0, sqrt(x), 0) has a nan gradient at 0 but the tangent 0
    finite = np.isfinite(fwd) & np.isfinite(rev)
    np.testing.assert_array_equal(fwd[finite], rev[finite])


# --------------------------------------------------------------------------------------
# Hessian-vector products
# --------------------------------------------------------------------------------------

SCALARS = [
    ("sum(x ** 3) + x[0] * y", {"x": [1.0, 2.0], "y": 3.0}),
    ("h = tanh(W @ x); sum(h ** 2)", {"W": "randn(3, 3)", "x": "randn(3)"}),
    ("logsumexp(x) * norm(y) + det(A)", {"x": "randn(4)", "y": "randn(2)", "A": "randn(2, 2)"}),
    ("sum(softmax(x) * log(y ** 2 + 1))", {"x": "randn(3)", "y": "randn(3)"}),
]


@pytest.mark.parametrize("k", range(len(SCALARS)), ids=[s[0][:40] for s in SCALARS])
def test_hvp_equals_hessian_times_v_and_differences(k: int) -> None:
    expr, inputs = SCALARS[k]
    values = _values(inputs, k)
    names = list(values)
    h = analysis.hessian(expr, values)
    for given in (names, names[:1]):
        vector = _tangents(values, given, k)
        r = gradcli.hvp(expr, values, vector)
        assert list(r.hvp) == names and list(r.vector) == given
        v = np.concatenate([vector.get(n, np.zeros(values[n].shape)).ravel() for n in names])
        got = np.concatenate([r.hvp[n].ravel() for n in names])
        np.testing.assert_allclose(got, h.hessian @ v, rtol=1e-11, atol=1e-12)

        def grads(s: float, vector: dict[str, Any] = vector) -> np.ndarray:
            moved = {n: values[n] + s * vector.get(n, 0.0) for n in names}
            g = gradcli.evaluate(expr, moved).grads
            return np.concatenate([np.ravel(g[n]) for n in names])

        fd = (grads(EPS) - grads(-EPS)) / (2 * EPS)
        np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-7)


def test_hvp_with_wrt() -> None:
    r = gradcli.hvp("sum(x ** 3) + x[0] * y", {"x": [1.0, 2.0], "y": 3.0}, {"x": [1, 1]}, wrt="x")
    assert r.wrt == ["x"] and list(r.hvp) == ["x"]
    np.testing.assert_array_equal(r.hvp["x"], [6.0, 12.0])
    with pytest.raises(NamingError, match="not one of --wrt"):
        gradcli.hvp("x * y", {"x": 1.0, "y": 2.0}, {"y": 1.0}, wrt=["x"])
    r = gradcli.hvp("sum(x) * 2", {"x": [1.0, 2.0]}, {"x": [1.0, 1.0]})  # linear: H = 0
    np.testing.assert_array_equal(r.hvp["x"], [0.0, 0.0])


def test_hvp_of_a_million_elements_never_forms_the_hessian() -> None:
    """H v of 10⁶ elements: the Hessian would be 10¹² numbers (8 TB); H v takes a few
    arrays of the input's size (8 MB each) and well under a second's work."""
    n = 10**6
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n)
    v = rng.standard_normal(n)
    expr = "sum(tanh(x) ** 2) + sum(x[1:] * x[:-1])"
    gradcli.hvp(expr, {"x": x[:10]}, {"x": v[:10]})  # imports and parsing, not measured
    tracemalloc.start()
    try:
        start = time.perf_counter()
        r = gradcli.hvp(expr, {"x": x}, {"x": v})
        seconds = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    t = np.tanh(x)
    s = 1.0 - t * t
    expected = 2.0 * (s * s - 2.0 * t * t * s) * v  # (tanh²)'' = 2 (s² - 2 t² s)
    expected[:-1] += v[1:]
    expected[1:] += v[:-1]
    np.testing.assert_allclose(r.hvp["x"], expected, rtol=1e-12, atol=1e-12)
    assert peak < 40 * 8 * n, f"peak {peak / 2**20:.0f} MiB"  # at most 40 arrays of x's size
    assert seconds < 20, seconds  # about 0.3 s here; generous for a busy machine


# --------------------------------------------------------------------------------------
# Errors of the Python API
# --------------------------------------------------------------------------------------


def test_api_errors() -> None:
    with pytest.raises(ShapeError, match=r"the tangent of `x` has shape \(3,\), but `x` has"):
        gradcli.jvp("x * 2", {"x": [1.0, 2.0]}, {"x": [1.0, 2.0, 3.0]})
    with pytest.raises(ShapeError, match="the tangent of `x` has shape"):
        gradcli.jvp("x * 2", {"x": [1.0, 2.0]}, {"x": 1.0})  # no broadcasting
    with pytest.raises(NamingError, match=r"`xx`, which is not an input .*`x`"):
        gradcli.jvp("x * 2", {"x": [1.0, 2.0]}, {"xx": [1.0, 2.0]})
    with pytest.raises(InputError, match="at least one input"):
        gradcli.jvp("x * 2", {"x": [1.0, 2.0]}, {})
    with pytest.raises(InputError, match="mapping"):
        gradcli.jvp("x * 2", {"x": [1.0, 2.0]}, [1.0, 2.0])  # type: ignore[arg-type]
    with pytest.raises(ShapeError, match="needs a scalar output"):
        gradcli.hvp("x * 2", {"x": [1.0, 2.0]}, {"x": [1.0, 1.0]})
    with pytest.raises(ShapeError, match="the vector of `x` has shape"):
        gradcli.hvp("sum(x)", {"x": [1.0, 2.0]}, {"x": [1.0]})
    with pytest.raises(InputError, match="at least one input"):
        gradcli.hvp("sum(x)", {"x": [1.0, 2.0]}, None)
    # a tangent name is read as an input name is (NFKC)
    r = gradcli.jvp("ﬁ * 2", {"fi": [1.0]}, {"ﬁ": [1.0]})
    np.testing.assert_array_equal(r.jvp, [2.0])


@pytest.mark.skipif(importlib.util.find_spec("dask") is None, reason="needs dask")
def test_forward_mode_is_numpy_only() -> None:
    with pytest.raises(InputError, match="--mode forward runs on the NumPy backend only"):
        analysis.jacobian("x * 2", {"x": [1.0, 2.0]}, mode="forward", backend="dask")
    assert analysis.jacobian("x * 2", {"x": [1.0]}, mode="auto", backend="dask").mode == "reverse"
    with pytest.raises(InputError, match="NumPy backend only"):
        gradcli.hvp("sum(x)", {"x": [1.0]}, {"x": [1.0]}, backend="dask")


# --------------------------------------------------------------------------------------
# torch's namespaces, their conventions (values against torch further down)
# --------------------------------------------------------------------------------------


def test_torch_style_namespaces() -> None:
    torch = gradcli  # a tutorial's `import gradcli as torch`
    x = torch.tensor([0.0, 1.0, 2.0])
    out, tangent = torch.func.jvp(torch.sin, (x,), (torch.ones(3),))
    np.testing.assert_array_equal(out.numpy(), np.sin(x.data))
    np.testing.assert_array_equal(tangent.numpy(), np.cos(x.data))
    assert not out.requires_grad and not tangent.requires_grad

    out, tangent, aux = torch.func.jvp(
        lambda a, b: (a * b, a.sum()), (x, x), (torch.ones(3), torch.zeros(3)), has_aux=True
    )
    np.testing.assert_array_equal(tangent.numpy(), x.data)
    assert float(aux) == 3.0

    pair = torch.func.jvp(lambda a: (a * 2, a**2), (x,), (torch.ones(3),))[1]
    assert isinstance(pair, tuple) and len(pair) == 2
    np.testing.assert_array_equal(pair[1].numpy(), 2 * x.data)

    W = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    for jac in (torch.func.jacfwd, torch.func.jacrev):
        J = jac(lambda w, v: torch.tanh(w @ v), argnums=(0, 1))(W, torch.tensor([0.1, 0.2]))
        assert isinstance(J, tuple) and J[0].shape == (3, 3, 2) and J[1].shape == (3, 2)
        assert jac(torch.sin)(x).shape == (3, 3)
        assert jac(lambda a: a.sum())(x).shape == (3,)
    np.testing.assert_allclose(
        torch.func.jacfwd(torch.sin)(x).numpy(), np.diag(np.cos(x.data)), rtol=1e-15
    )

    F = torch.autograd.functional
    assert sorted(F.NAMES) == ["hvp", "jvp", "vhp", "vjp"]
    out, jv = F.jvp(lambda a: a**2, x, torch.ones(3))
    np.testing.assert_array_equal(jv.numpy(), 2 * x.data)
    _, (va, _) = F.vjp(lambda a, b: a * b, (x, x + 1), torch.ones(3))
    np.testing.assert_array_equal(va.numpy(), x.data + 1)
    out, hv = F.hvp(lambda a: (a**3).sum(), x, torch.ones(3))
    np.testing.assert_array_equal(hv.numpy(), 6 * x.data)
    _, vh = F.vhp(lambda a: (a**3).sum(), x, torch.ones(3))
    np.testing.assert_array_equal(vh.numpy(), 6 * x.data)
    _, jv = F.jvp(lambda a: a * 3, torch.tensor(2.0))  # v may be None for one element
    assert float(jv) == 3.0
    with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
        torch.func.jvp(torch.sin, x, (x,))
    with pytest.raises(RuntimeError, match="same shape"):
        torch.func.jvp(torch.sin, (x,), (torch.ones(2),))
    with pytest.raises(RuntimeError, match="single element"):
        F.hvp(lambda a: a**2, x, x)
    with pytest.raises(RuntimeError, match="can only be None"):
        F.jvp(torch.sin, x)
    with pytest.raises(TypeError, match="Tensor or a tuple of Tensors"):
        F.jvp(torch.sin, [1.0, 2.0], x)
    assert gradcli.jvp is analysis.jvp and gradcli.hvp is analysis.hvp


def test_func_vjp_grad_and_hessian() -> None:
    """torch.func's vjp, grad, grad_and_value and hessian: their calling conventions and
    numbers, checked against the closed forms (torch's numbers are compared below)."""
    torch = gradcli
    x = torch.tensor([0.5, 1.0, 2.0])
    out, vjp_fn = torch.func.vjp(torch.sin, x)
    np.testing.assert_array_equal(out.numpy(), np.sin(x.data))
    (g,) = vjp_fn(torch.ones(3))
    np.testing.assert_array_equal(g.numpy(), np.cos(x.data))
    (g2,) = vjp_fn(torch.tensor([2.0, 0.0, 1.0]))  # vjp_fn may be called again
    np.testing.assert_array_equal(g2.numpy(), np.cos(x.data) * [2.0, 0.0, 1.0])
    # several primals, a tuple of outputs, an output not reached, and aux
    out, vjp_fn, aux = torch.func.vjp(
        lambda a, b: ((a * b, a + 1.0), a.sum()), x, x + 1.0, has_aux=True
    )
    ga, gb = vjp_fn((torch.ones(3), torch.ones(3)))
    np.testing.assert_array_equal(ga.numpy(), x.data + 2.0)
    np.testing.assert_array_equal(gb.numpy(), x.data)
    assert float(aux) == 3.5 and not aux.requires_grad
    with pytest.raises(RuntimeError, match="pytree structure of cotangents"):
        vjp_fn(torch.ones(3))
    _, vjp_fn = torch.func.vjp(lambda a: a * 2.0, x)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        vjp_fn(torch.ones(2))
    _, vjp_fn = torch.func.vjp(lambda a, b: a * 2.0, x, x)
    assert [t.numpy().tolist() for t in vjp_fn(torch.ones(3))] == [[2.0] * 3, [0.0] * 3]

    f = lambda a, b: (a * a * b).sum()  # noqa: E731
    y = torch.tensor([3.0, -1.0, 0.5])
    np.testing.assert_array_equal(torch.func.grad(f)(x, y).numpy(), 2 * x.data * y.data)
    ga, gb = torch.func.grad(f, argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(gb.numpy(), x.data**2)
    g, value = torch.func.grad_and_value(f, argnums=1)(x, y)
    np.testing.assert_array_equal(g.numpy(), x.data**2)
    assert float(value) == pytest.approx(float(np.sum(x.data**2 * y.data)))
    g, (value, aux) = torch.func.grad_and_value(lambda a: ((a**2).sum(), a * 2), has_aux=True)(x)
    np.testing.assert_array_equal(aux.numpy(), 2 * x.data)
    g, aux = torch.func.grad(lambda a: ((a**2).sum(), "aux"), has_aux=True)(x)
    assert aux == "aux"
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a scalar Tensor"):
        torch.func.grad(torch.sin)(x)
    with pytest.raises(ValueError, match="must be Tensor"):
        torch.func.grad(f)([1.0, 2.0, 3.0], y)
    # an input the output does not depend on: zeros, as torch
    np.testing.assert_array_equal(torch.func.grad(lambda a, b: b.sum())(x, y).numpy(), [0.0] * 3)

    H = torch.func.hessian(lambda a: (a**3).sum())(x)
    np.testing.assert_array_equal(H.numpy(), np.diag(6 * x.data))
    H = torch.func.hessian(lambda a: a**3)(x)  # a vector output: output.shape + 2 x input
    assert H.shape == (3, 3, 3)
    np.testing.assert_array_equal(H.numpy()[1, 1, 1], 6 * x.data[1])
    (haa, hab), (hba, hbb) = torch.func.hessian(f, argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(haa.numpy(), np.diag(2 * y.data))
    np.testing.assert_array_equal(hab.numpy(), np.diag(2 * x.data))
    np.testing.assert_array_equal(hbb.numpy(), np.zeros((3, 3)))
    np.testing.assert_array_equal(hba.numpy(), hab.numpy().T)
    assert sorted(torch.func.NAMES) == [
        "grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "jvp", "vjp",
    ]  # fmt: skip


@needs_torch
def test_func_names_are_torchs() -> None:
    torch = _torch()
    for name in gradcli.func.NAMES:
        assert hasattr(torch.func, name), name
    for name in gradcli.autograd.functional.NAMES:
        assert hasattr(torch.autograd.functional, name), name


@needs_torch
def test_func_vjp_grad_and_hessian_against_torch() -> None:
    """``gradcli.func``'s vjp, grad, grad_and_value and hessian against ``torch.func``'s in
    float64, through issue 17's functions (a tutorial's loss of a small network)."""
    torch = _torch()
    import test_vs_torch as vt

    def loss(m: Any, W: Any, b: Any) -> Any:
        h = m.gelu(W @ m.tensor([0.5, -1.0, 2.0]) + b)
        sign_logdet = m.slogdet(m.reshape(W, (2, 3)) @ m.transpose(m.reshape(W, (2, 3))))
        return (
            m.cross_entropy(m.reshape(h, (1, 2)), m.tensor([1.0]))
            + m.mse_loss(m.softsign(h), m.tensor([0.1, 0.2]))
            + sign_logdet[1] * 0.1
        )

    def net(m: Any, W: Any, b: Any) -> Any:
        return m.leaky_relu(m.cumsum(W @ m.tensor([0.5, -1.0, 2.0]) + b, 0), 0.1)

    rng = np.random.default_rng(5)
    W, b = rng.standard_normal((2, 3)), rng.standard_normal(2)
    ours = (gradcli.tensor(W), gradcli.tensor(b))
    theirs = (torch.tensor(W), torch.tensor(b))
    for f in (loss, net):
        o_out, o_fn = gradcli.func.vjp(lambda *a, f=f: f(gradcli, *a), *ours)
        t_out, t_fn = torch.func.vjp(lambda *a, f=f: f(vt.TorchNS, *a), *theirs)
        np.testing.assert_allclose(o_out.numpy(), t_out.numpy(), rtol=1e-13)
        ct = rng.standard_normal(tuple(t_out.shape))
        for o, t in zip(o_fn(gradcli.tensor(ct)), t_fn(torch.tensor(ct)), strict=True):
            np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-12, atol=1e-14)
        o_h = gradcli.func.hessian(lambda *a, f=f: f(gradcli, *a), argnums=(0, 1))(*ours)
        t_h = torch.func.hessian(lambda *a, f=f: f(vt.TorchNS, *a), argnums=(0, 1))(*theirs)
        for o_row, t_row in zip(o_h, t_h, strict=True):
            for o, t in zip(o_row, t_row, strict=True):
                assert o.shape == tuple(t.shape)
                np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-10, atol=1e-12)
    for argnums in (0, 1, (0, 1)):
        o_g, o_v = gradcli.func.grad_and_value(lambda *a: loss(gradcli, *a), argnums=argnums)(*ours)
        t_g, t_v = torch.func.grad_and_value(lambda *a: loss(vt.TorchNS, *a), argnums=argnums)(
            *theirs
        )
        np.testing.assert_allclose(float(o_v), float(t_v), rtol=1e-13)
        pairs = zip(o_g, t_g, strict=True) if isinstance(argnums, tuple) else [(o_g, t_g)]
        for o, t in pairs:
            np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-12, atol=1e-14)


def test_create_graph_keeps_the_callers_graph() -> None:
    x = gradcli.tensor([1.0, 2.0], requires_grad=True)
    _, hv = gradcli.autograd.functional.hvp(
        lambda a: (a**3).sum(), x, gradcli.ones(2), create_graph=True
    )
    hv.sum().backward()  # d/dx of 6 x · 1
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 6.0])


# --------------------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------------------


@functools.cache
def _run(*args: str) -> harness.Run:
    return harness.run(*args)


def test_cli_jvp_table_and_json(tmp_path: Any) -> None:
    r = _run("jvp", "sin(x) * y", "x=[0,1]", "y=2", "--tangent", "x=[1,0]").expect(0)
    assert "— (held fixed)" in r.row("y")
    assert "[2. 0.]" in r.row("output")
    assert "J t" in r.caption()
    j = _run("jvp", "sin(x) * y", "x=[0,1]", "y=2", "--tangent", "x=[1,0]",
             "--tangent", "y=1", "--json").expect(0).json  # fmt: skip
    assert set(j) == {"expr", "output", "tangents", "jvp"}
    assert j["tangents"] == {
        "x": {"shape": [2], "value": [1.0, 0.0]},
        "y": {"shape": [], "value": 1.0},
    }
    assert j["jvp"]["shape"] == [2]
    np.testing.assert_allclose(j["jvp"]["value"], [2.0, np.sin(1.0)], rtol=1e-15)
    # the program from -f, the inputs from --inputs, a tangent from a file and one as a
    # constant expression
    (tmp_path / "inputs.json").write_text('{"x": [1, 2, 3], "y": 2}')
    (tmp_path / "t.json").write_text("[1, 0, 0]")
    r = harness.run(
        "jvp", "-f", "-", "--inputs", str(tmp_path / "inputs.json"),
        "--tangent", f"x=@{tmp_path / 't.json'}", "--tangent", "y=ones(())", "--json",
        stdin="sum(x ** 2) * y\n",
    ).expect(0)  # fmt: skip
    assert r.json["jvp"] == {"shape": [], "value": 2 * 2.0 + 14.0}


def test_cli_jvp_errors() -> None:
    r = _run("jvp", "x * 2", "x=[1,2]", "--tangent", "x=[1,2,3]").expect(1)
    assert r.first_error_line.startswith("error: the tangent of `x` has shape (3,)")
    assert len(r.stderr.strip().splitlines()) == 1
    _run("jvp", "x * 2", "x=[1,2]", "--tangent", "z=1").assert_usage_error("not an input")
    _run("jvp", "x * 2", "x=[1,2]").assert_usage_error("at least one input")
    _run("jvp", "x * 2", "x=[1,2]", "--tangent", "x").assert_usage_error("NAME=VALUE")
    _run("jvp", "x * 2", "x=[1,2]", "--tangent", "x=1", "--tangent", "x=2").assert_usage_error(
        "twice"
    )
    _run("jvp", "x * 2", "x=[1,2]", "--tangent", "x=[1,").assert_usage_error()
    j = _run("jvp", "x * 2", "x=[1,2]", "--tangent", "x=[1]", "--json").expect(1).json
    assert j["error"]["kind"] == "shape"
    _run("jvp").expect(2)  # the help


def test_cli_jacobian_mode_and_hessian_vector(tmp_path: Any) -> None:
    args = ("jacobian", "tanh(A @ x)", "A=[[1,2],[3,4],[5,6]]", "x=[0.1,0.2]", "--wrt", "x")
    fwd = _run(*args, "--mode", "forward", "--json").expect(0).json
    rev = _run(*args, "--json").expect(0).json
    auto = _run(*args, "--mode", "auto", "--json").expect(0).json
    assert (fwd["mode"], rev["mode"], auto["mode"]) == ("forward", "reverse", "forward")
    np.testing.assert_allclose(
        fwd["jacobian"]["x"]["value"], rev["jacobian"]["x"]["value"], rtol=1e-15
    )
    assert "forward mode" in _run(*args, "--mode", "forward").expect(0).caption()
    _run(*args, "--mode", "sideways").assert_usage_error("--mode")

    hv = ("hessian", "sum(x**3) + x[0]*y", "x=[1,2]", "y=3", "--vector", "x=[1,1]")
    j = _run(*hv, "--json").expect(0).json
    assert j["wrt"] == ["x", "y"]
    assert j["vector"] == {"x": {"shape": [2], "value": [1.0, 1.0]}}
    assert j["hvp"] == {"x": {"shape": [2], "value": [6.0, 12.0]}, "y": {"shape": [], "value": 1.0}}
    r = _run(*hv).expect(0)
    assert "[ 6. 12.]" in r.row("x") and "H v" in r.stdout
    saved = tmp_path / "hv.npz"
    harness.run(*hv, "--save", str(saved)).expect(0)
    with np.load(saved) as z:
        assert sorted(z.files) == ["hvp_x", "hvp_y", "output"]
        np.testing.assert_array_equal(z["hvp_x"], [6.0, 12.0])
    _run(*hv, "--wrt", "y").assert_usage_error("not one of --wrt")
    _run("hessian", "x**3", "x=[1,2]", "--vector", "x=[1,1]").expect(1)
    _run("hessian", "sum(x**3)", "x=[1,2]", "--vector", "x=[1,1,1]").expect(1)


def test_cli_hessian_vector_of_a_million_elements(tmp_path: Any) -> None:
    saved = tmp_path / "hv.npz"
    r = harness.run(
        "hessian", "sum(x ** 3)", "x=linspace(0, 1, 1000000)", "--vector",
        "x=ones(1000000)", "--save", str(saved),
    ).expect(0)  # fmt: skip
    assert "(1000000,)" in r.row("x")
    with np.load(saved) as z:
        np.testing.assert_allclose(z["hvp_x"], 6 * np.linspace(0, 1, 10**6), rtol=1e-15)


def test_cli_help_lists_jvp_and_its_examples_run() -> None:
    r = harness.invoke("--help").expect(0)
    assert "jvp" in r.stdout
    r = harness.invoke("jvp", "--help").expect(0)
    assert "--tangent NAME=VALUE" in r.stdout and "Examples:" in r.stdout
    examples = [
        shlex.split(line.strip())[1:]
        for line in r.stdout.splitlines()
        if line.strip().startswith("gradcli jvp ")
    ]
    assert len(examples) == 2
    for args in examples:
        harness.invoke(*args).expect(0)
    for command in ("jacobian", "hessian"):
        text = harness.invoke(command, "--help").expect(0).stdout
        assert ("--mode" if command == "jacobian" else "--vector NAME=VALUE") in text
    # gradcli functions says that the modes use its rules
    for args in (("functions", "relu"), ("functions", "--help")):
        text = " ".join(harness.invoke(*args).expect(0).stdout.split())
        assert "jvp" in text and "jacobian --mode forward" in text, args
        assert "hessian --vector" in text and "same values at kinks" in text, args


# --------------------------------------------------------------------------------------
# Against PyTorch (float64): torch.func.jvp, jacfwd, jacrev, autograd.functional.hvp
# --------------------------------------------------------------------------------------


def _torch() -> Any:
    import torch

    return torch


def _shapes(fn: Any) -> list[list[tuple[int, ...]]]:
    if fn.arity == 1:
        return [[()], [(3,)], [(2, 3)], [(2, 1, 3)]]
    return [[(), ()], [(3,), (3,)], [(2, 3), (3,)], [(2, 1, 3), (1, 3)]]


@needs_torch
def test_every_function_against_torch_func() -> None:
    """Each function of tests/test_vs_torch.py at random points: ``gradcli.func.jvp`` equals
    ``torch.func.jvp``, and ``jacfwd``/``jacrev`` equal ``torch.func.jacfwd``."""
    torch = _torch()
    import test_vs_torch as vt

    rng = np.random.default_rng(17)
    checked = 0
    for fn in vt.FNS:
        for shapes in _shapes(fn):
            case = fn.make(rng, *shapes)
            if case is None:
                continue
            xs = [rng.standard_normal(s) for s in shapes]
            ts = [rng.standard_normal(s) for s in shapes]
            _, mine = gradcli.func.jvp(
                lambda *a, c=case: c(gradcli, *a),
                tuple(gradcli.tensor(x) for x in xs),
                tuple(gradcli.tensor(t) for t in ts),
            )
            _, ref = torch.func.jvp(
                lambda *a, c=case: c(vt.TorchNS, *a),
                tuple(torch.tensor(x) for x in xs),
                tuple(torch.tensor(t) for t in ts),
            )
            assert mine.shape == tuple(ref.shape), fn.name
            np.testing.assert_allclose(
                mine.numpy(), ref.numpy(), rtol=1e-10, atol=1e-12, err_msg=f"{fn.name} {shapes}"
            )
            nums = tuple(range(fn.arity))
            ref_j = torch.func.jacfwd(lambda *a, c=case: c(vt.TorchNS, *a), argnums=nums)(
                *[torch.tensor(x) for x in xs]
            )
            for jac in (gradcli.func.jacfwd, gradcli.func.jacrev):
                got = jac(lambda *a, c=case: c(gradcli, *a), argnums=nums)(
                    *[gradcli.tensor(x) for x in xs]
                )
                for g, r in zip(got, ref_j, strict=True):
                    assert g.shape == tuple(r.shape), (fn.name, jac.__name__)
                    np.testing.assert_allclose(
                        g.numpy(), r.numpy(), rtol=1e-10, atol=1e-12,
                        err_msg=f"{jac.__name__} {fn.name} {shapes}",
                    )  # fmt: skip
            checked += 1
    assert checked > 200


#: awkward points: (program of x in both namespaces, x, tangents to try)
AWKWARD: list[tuple[str, Any, list[float]]] = [
    ("relu", lambda m, x: m.relu(x), [0.0, -1.0, 1.0]),
    ("abs", lambda m, x: m.abs(x), [0.0, -1.0, 1.0]),
    ("sign", lambda m, x: m.sign(x) * x, [0.0, -1.0, 1.0]),
    ("floor-ceil-round", lambda m, x: m.floor(x) + m.ceil(x) + m.round(x), [0.0, 0.5, 2.0]),
    ("sqrt", lambda m, x: m.sqrt(x), [0.0, 1.0, 4.0]),
    ("max-ties", lambda m, x: m.max(x), [1.0, 3.0, 3.0]),
    ("max-ties-axis", lambda m, x: m.max(m.reshape(x, (2, 2)), axis=1), [1.0, 1.0, 3.0, 2.0]),
    ("min-ties", lambda m, x: m.min(x), [1.0, 1.0, 3.0]),
    ("maximum-ties", lambda m, x: m.maximum(x, m.flip(x, axis=0)), [1.0, 2.0, 1.0]),
    ("minimum-ties", lambda m, x: m.minimum(x, 1.0 + 0.0 * x), [1.0, 0.0, 2.0]),
    ("clip-bounds", lambda m, x: m.clip(x, -0.5, 0.5), [-0.5, 0.5, 0.0, 1.0]),
    ("norm-zero", lambda m, x: m.norm(x), [0.0, 0.0, 0.0]),
    ("norm-1", lambda m, x: m.norm(x, ord=1.0), [0.0, 0.0, 1.0]),
    ("norm-inf-ties", lambda m, x: m.norm(x, ord=math.inf), [1.0, -1.0, 0.5]),
    ("prod-one-zero", lambda m, x: m.prod(x), [0.0, 2.0, 3.0]),
    ("prod-two-zeros", lambda m, x: m.prod(x), [0.0, 0.0, 3.0]),
    ("pow-const", lambda m, x: x**2.0 + x**0.5 + x**3.0, [0.0, 1.0]),
    ("where-sqrt", lambda m, x: m.where(m.greater(x, 0.0 * x), m.sqrt(x), 0.0 * x), [0.0, 1.0]),
    ("logsumexp-large", lambda m, x: m.logsumexp(x), [1000.0, -1000.0, 1000.0]),
    ("softmax-large", lambda m, x: m.softmax(x, axis=0), [1000.0, -1000.0, 999.0]),
    ("log-softmax-large", lambda m, x: m.log_softmax(x, axis=0), [1000.0, -1000.0, 999.0]),
    ("sigmoid-large", lambda m, x: m.sigmoid(x), [1000.0, -1000.0]),
    ("softplus-silu", lambda m, x: m.softplus(x) + m.silu(x), [0.0, 10.0, -1000.0]),
    ("std-var-constant", lambda m, x: m.std(x) + m.var(x), [1.0, 1.0, 1.0]),
    ("arctan2-origin", lambda m, x: m.arctan2(x, x), [0.0, 1.0]),
    ("log-zero", lambda m, x: m.log(x), [0.0, 1.0]),
    # issue 17's functions at their kinks and awkward points
    ("leaky_relu-zero", lambda m, x: m.leaky_relu(x) + m.leaky_relu(x, 0.2),
     [0.0, -0.0, -1.0, 1.0]),
    ("elu-zero", lambda m, x: m.elu(x) + m.elu(x, alpha=2.5), [0.0, -0.0, -1.0, 1.0]),
    ("gelu-erf-zero-and-large",
     lambda m, x: m.gelu(x) + m.gelu(x, approximate="tanh") + m.erf(x),
     [0.0, -6.0, 6.0, 40.0, -40.0]),
    ("softsign-zero", lambda m, x: m.softsign(x), [0.0, -0.0, 1.0]),
    ("logaddexp-ties", lambda m, x: m.logaddexp(x, m.flip(x, axis=0)), [1.0, 2.0, 1.0]),
    ("cumprod-zeros", lambda m, x: m.cumprod(x, 0), [2.0, 0.0, 3.0, 0.0, 5.0]),
    ("l1_loss-ties", lambda m, x: m.l1_loss(x, m.tensor([1.0, 0.0, 2.0])), [1.0, 0.0, 3.0]),
    ("huber_loss-joint",
     lambda m, x: m.huber_loss(x, m.tensor([0.0, 0.0, 0.0, 0.0]), reduction="sum"),
     [1.0, -1.0, 0.5, 2.0]),
    ("bce-at-0-and-1",
     lambda m, x: m.binary_cross_entropy(x, m.tensor([0.0, 1.0, 1.0, 0.0]), reduction="none"),
     [0.0, 1.0, 0.5, 0.5]),
    ("bce-logits-large",
     lambda m, x: m.binary_cross_entropy_with_logits(x, m.tensor([0.0, 1.0, 1.0, 0.0])),
     [1000.0, -1000.0, 0.0, 40.0]),
    ("cross_entropy-large",
     lambda m, x: m.cross_entropy(m.reshape(x, (2, 3)), m.tensor([0.0, 2.0]), reduction="sum"),
     [1000.0, -1000.0, 0.0, -1000.0, 1000.0, 999.0]),
]  # fmt: skip


@needs_torch
@pytest.mark.parametrize("name,case,x", AWKWARD, ids=[a[0] for a in AWKWARD])
def test_awkward_points_against_torch(name: str, case: Any, x: list[float]) -> None:
    torch = _torch()
    import test_vs_torch as vt

    xs = np.array(x)
    for t in (np.ones_like(xs), np.random.default_rng(3).standard_normal(xs.shape)):
        _, mine = gradcli.func.jvp(
            lambda a: case(gradcli, a), (gradcli.tensor(xs),), (gradcli.tensor(t),)
        )
        _, ref = torch.func.jvp(
            lambda a: case(vt.TorchNS, a), (torch.tensor(xs),), (torch.tensor(t),)
        )
        np.testing.assert_allclose(mine.numpy(), ref.numpy(), rtol=1e-12, atol=1e-12)
    got = gradcli.func.jacfwd(lambda a: case(gradcli, a))(gradcli.tensor(xs))
    ref = torch.func.jacfwd(lambda a: case(vt.TorchNS, a))(torch.tensor(xs))
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-12, atol=1e-12)


@needs_torch
def test_pow_with_a_moving_exponent_at_zero_against_torch() -> None:
    torch = _torch()
    xs, t = np.array([0.0, 1.0]), np.array([1.0, 1.0])
    _, mine = gradcli.func.jvp(lambda a: a**a, (gradcli.tensor(xs),), (gradcli.tensor(t),))
    _, ref = torch.func.jvp(lambda a: a**a, (torch.tensor(xs),), (torch.tensor(t),))
    np.testing.assert_allclose(mine.numpy(), ref.numpy(), rtol=1e-12)


def test_pow_with_a_moving_exponent_at_zero() -> None:
    # d(a ** a) = a^a (ln a + 1) da: 1 at a = 1; at a = 0 both masks of torch.pow apply
    # (no gradient to the base where the exponent is 0, none to the exponent where the base
    # is 0), so the tangent is 0, not 0 * log 0; the same for reverse mode
    xs, t = np.array([0.0, 1.0]), np.array([1.0, 1.0])
    _, mine = gradcli.func.jvp(lambda a: a**a, (gradcli.tensor(xs),), (gradcli.tensor(t),))
    assert mine.numpy().tolist() == [0.0, 1.0]
    r = gradcli.evaluate("sum(a ** a)", {"a": xs})
    assert r.grads["a"].tolist() == [0.0, 1.0]


#: programs of the language and the same in torch
TORCH_PROGRAMS: list[tuple[str, Any, dict[str, tuple[int, ...]]]] = [
    ("h = tanh(W @ x + b); sum(h ** 2)",
     lambda W, x, b: (torch_mod().tanh(W @ x + b) ** 2).sum(),
     {"W": (3, 4), "x": (4,), "b": (3,)}),
    ("softmax(A, axis=1) * relu(A)",
     lambda A: torch_mod().softmax(A, dim=1) * torch_mod().relu(A),
     {"A": (3, 4)}),
    ("det(A) * inv(A) @ B + solve(A, B)",
     lambda A, B: torch_mod().linalg.det(A) * torch_mod().linalg.inv(A) @ B
     + torch_mod().linalg.solve(A, B),
     {"A": (3, 3), "B": (3, 2)}),
]  # fmt: skip


def torch_mod() -> Any:
    return _torch()


@needs_torch
@pytest.mark.parametrize("k", range(len(TORCH_PROGRAMS)), ids=[p[0] for p in TORCH_PROGRAMS])
def test_programs_against_torch(k: int) -> None:
    torch = _torch()
    expr, f, shapes = TORCH_PROGRAMS[k]
    rng = np.random.default_rng(k)
    values = {n: rng.standard_normal(s) for n, s in shapes.items()}
    tangents = {n: rng.standard_normal(s) for n, s in shapes.items()}
    r = gradcli.jvp(expr, values, tangents)
    out, ref = torch.func.jvp(
        f,
        tuple(torch.tensor(values[n]) for n in shapes),
        tuple(torch.tensor(tangents[n]) for n in shapes),
    )
    np.testing.assert_allclose(r.value, out.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(r.jvp, ref.numpy(), rtol=1e-10, atol=1e-12)
    # one input moving, the others held fixed: torch with the others' tangents zero
    first = next(iter(shapes))
    r = gradcli.jvp(expr, values, {first: tangents[first]})
    _, ref = torch.func.jvp(
        f,
        tuple(torch.tensor(values[n]) for n in shapes),
        tuple(torch.tensor(tangents[n] if n == first else np.zeros(s)) for n, s in shapes.items()),
    )
    np.testing.assert_allclose(r.jvp, ref.numpy(), rtol=1e-10, atol=1e-12)
    # the whole Jacobian in forward mode against jacfwd
    jac = analysis.jacobian(expr, values, mode="forward").jacobian
    ref_j = torch.func.jacfwd(f, argnums=tuple(range(len(shapes))))(
        *[torch.tensor(values[n]) for n in shapes]
    )
    for n, rj in zip(shapes, ref_j, strict=True):
        np.testing.assert_allclose(jac[n], rj.numpy(), rtol=1e-10, atol=1e-12, err_msg=n)
    if r.value.ndim == 0:
        hv = gradcli.hvp(expr, values, tangents)
        _, ref_h = torch.autograd.functional.hvp(
            f,
            tuple(torch.tensor(values[n]) for n in shapes),
            tuple(torch.tensor(tangents[n]) for n in shapes),
        )
        for n, rh in zip(shapes, ref_h, strict=True):
            np.testing.assert_allclose(hv.hvp[n], rh.numpy(), rtol=1e-10, atol=1e-12)
