"""Beyond first derivatives (issue 5): ``autograd.grad``, ``backward(create_graph=True)``,
second derivatives of every smooth function, and the analysis functions behind the
``check``, ``jacobian``, ``hessian``, ``graph``, ``optimize`` and ``functions`` commands.

The second-derivative oracle mirrors the first-derivative sweep of ``test_engine_grads.py``
(same input domains: away from kinks, ties and singularities). For every case the scalar

    L(x) = sum(v * f(x) + w * f(x) * f(x))        (v, w fixed random weights)

is differentiated twice by the engine (``grad(..., create_graph=True)``, then ``grad`` of
each element of that gradient) and the Hessian is compared with central finite differences
of the engine's *first-order* analytic gradient, in float64. The ``w f(x)^2`` term makes the
upstream gradient of ``f`` depend on ``x``, so the tensor-mode rule of ``f`` is itself
differentiated even when ``f`` is linear (reshape, indexing, sum, ...), where ``sum(v * f)``
alone would have a constant gradient and a trivially zero Hessian.

Reference numbers of the optimiser tests were computed once with PyTorch 2.13 (CPU, float64)
and are hard-coded: the tests do not import torch.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from collections.abc import Callable

import numpy as np
import pytest
from samplers import (
    as_f64 as f64,
)
from samplers import (
    avoiding,
    away0,
    distinct_abs_sampler,
    distinct_sampler,
    independent,
    joint_distinct,
    real,
    rng_for,
    well_conditioned,
)

import gradcli
from gradcli import analysis
from gradcli import autograd as E
from gradcli.errors import GradcliError

# --------------------------------------------------------------------------------------------
# input domains (the same choices as test_engine_grads.py)
# --------------------------------------------------------------------------------------------


def sid(shape) -> str:
    return "x".join(map(str, shape)) if shape else "scalar"


def fn(name: str) -> Callable:
    assert hasattr(E, name), f"gradcli.engine has no function {name!r}"
    return getattr(E, name)


# --------------------------------------------------------------------------------------------
# the second-derivative oracle
# --------------------------------------------------------------------------------------------


def _labels(i: int, shape) -> list[str]:
    return [f"input {i}[{','.join(map(str, idx))}]" for idx in np.ndindex(*shape)] or [f"input {i}"]


def check_hessian(
    fun: Callable,
    *arrays,
    wrt=None,
    name: str,
    eps: float = 1e-5,
    rtol: float = 1e-5,
    atol: float = 1e-6,
) -> np.ndarray:
    """Hessian of ``sum(v * f + w * f * f)`` by double backprop vs finite differences of the
    first-order analytic gradient. Returns the analytic Hessian (flattened inputs in order)."""
    arrays = [np.array(a, dtype=np.float64, copy=True) for a in arrays]
    wrt = list(range(len(arrays))) if wrt is None else list(wrt)
    probe = fun(*[E.tensor(a) for a in arrays])
    rng = rng_for("hessian-weights", name)
    v = rng.standard_normal(probe.shape)
    w = rng.standard_normal(probe.shape)

    def scalar(*ts):
        y = fun(*ts)
        return E.sum(E.tensor(v) * y + E.tensor(w) * y * y)

    sizes = [arrays[i].size for i in wrt]
    offsets = np.cumsum([0, *sizes])
    n = int(offsets[-1])

    # --- analytic: differentiate the recorded backward pass -------------------------------
    leaves = [E.tensor(a, requires_grad=(i in wrt)) for i, a in enumerate(arrays)]
    wanted = [leaves[i] for i in wrt]
    loss = scalar(*leaves)
    firsts = gradcli.autograd.grad(loss, wanted, create_graph=True)
    # the Hessian below walks the same forward graph again: keep its saved values
    plain = gradcli.autograd.grad(loss, wanted, retain_graph=True)
    for k, (g, p) in enumerate(zip(firsts, plain, strict=True)):
        gd = np.zeros(sizes[k]) if g is None else np.asarray(g.data)
        pd = np.zeros(sizes[k]) if p is None else np.asarray(p.data)
        np.testing.assert_allclose(
            gd.ravel(),
            pd.ravel(),
            rtol=1e-10,
            atol=1e-12,
            err_msg=f"{name}: the first derivative recorded with create_graph=True (tensor-mode "
            f"rules) differs from the plain backward pass, for input {wrt[k]}",
        )
    h = np.zeros((n, n))
    for j, g in enumerate(firsts):
        if g is None or not g.requires_grad:
            continue  # a constant first derivative: this block row of the Hessian is zero
        assert g.shape == arrays[wrt[j]].shape, (
            f"{name}: create_graph gradient of input {wrt[j]} has shape {g.shape}, "
            f"expected {arrays[wrt[j]].shape}"
        )
        gf = E.reshape(g, (-1,))
        for k in range(sizes[j]):
            element = gf[k]
            if not element.requires_grad:
                continue
            seconds = gradcli.autograd.grad(element, wanted, retain_graph=True)
            for i, s in enumerate(seconds):
                if s is not None:
                    h[offsets[j] + k, offsets[i] : offsets[i + 1]] = np.asarray(s.data).ravel()

    # --- numeric: central differences of the first-order analytic gradient ----------------
    def flat_grad(values) -> np.ndarray:
        ts = [E.tensor(a, requires_grad=(i in wrt)) for i, a in enumerate(values)]
        out = scalar(*ts)
        if not out.requires_grad:
            return np.zeros(n)
        gs = gradcli.autograd.grad(out, [ts[i] for i in wrt])
        return np.concatenate(
            [
                (np.zeros(sizes[k]) if g is None else np.asarray(g.data, dtype=np.float64)).ravel()
                for k, g in enumerate(gs)
            ]
        )

    numeric = np.zeros((n, n))
    for j, i in enumerate(wrt):
        for k in range(sizes[j]):
            cols = []
            for step in (eps, -eps):
                moved = [a.copy() for a in arrays]
                moved[i].flat[k] += step
                cols.append(flat_grad(moved))
            numeric[:, offsets[j] + k] = (cols[0] - cols[1]) / (2 * eps)

    labels = [lab for i in wrt for lab in _labels(i, arrays[i].shape)]
    err = np.abs(h - numeric)
    bad = ~(err <= atol + rtol * np.abs(numeric))
    if bad.any():
        excess = np.where(np.isnan(err), np.inf, err - (atol + rtol * np.abs(numeric)))
        r, c = np.unravel_index(int(np.argmax(excess)), h.shape)
        raise AssertionError(
            f"{name}: second derivative d2L/d({labels[r]}) d({labels[c]}) is {h[r, c]!r} by "
            f"double backprop but {numeric[r, c]!r} by finite differences of the gradient "
            f"({int(bad.sum())} of {h.size} entries disagree; rtol={rtol}, atol={atol}, "
            f"eps={eps})\ninputs: {[a.tolist() for a in arrays]}\n"
            f"analytic:\n{np.array2string(h, precision=5)}\n"
            f"numeric:\n{np.array2string(numeric, precision=5)}"
        )
    asym = np.abs(h - h.T)
    assert np.all(asym <= 1e-9 * (1.0 + np.abs(h))), (
        f"{name}: the analytic Hessian is not symmetric; worst pair "
        f"{np.unravel_index(int(np.argmax(asym)), h.shape)} differs by {asym.max()!r}"
    )
    return h


# --------------------------------------------------------------------------------------------
# 1. autograd.grad and backward(create_graph=True), as in PyTorch
# --------------------------------------------------------------------------------------------


def test_autograd_grad_returns_gradients_without_touching_dot_grad():
    x = gradcli.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = gradcli.tensor([0.5, -1.0, 2.0], requires_grad=True)
    x.grad = gradcli.tensor([10.0, 20.0, 30.0])  # an existing .grad must stay as it is
    loss = (x * x * y).sum()
    gx, gy = gradcli.autograd.grad(loss, [x, y], retain_graph=True)
    np.testing.assert_allclose(gx.data, 2 * np.array([1.0, 2.0, 3.0]) * [0.5, -1.0, 2.0])
    np.testing.assert_allclose(gy.data, [1.0, 4.0, 9.0])
    np.testing.assert_array_equal(x.grad.data, [10.0, 20.0, 30.0])
    assert y.grad is None, "autograd.grad must not write .grad"
    assert not gx.requires_grad, "without create_graph the gradient is a constant"
    # a second call gives the same numbers: nothing accumulates
    gx2, _ = gradcli.autograd.grad(loss, [x, y], retain_graph=True)
    np.testing.assert_array_equal(gx2.data, gx.data)
    # one input given as a tensor (not a list) still gives a tuple
    (only,) = gradcli.autograd.grad(loss, x)
    np.testing.assert_array_equal(only.data, gx.data)


def test_autograd_grad_with_grad_outputs_is_a_vjp_and_needs_it_for_non_scalars():
    x = gradcli.tensor([1.0, 2.0], requires_grad=True)
    z = x * x  # non-scalar
    with pytest.raises(RuntimeError, match="implicitly created only for scalar outputs"):
        gradcli.autograd.grad(z, [x])
    (g,) = gradcli.autograd.grad(
        z, [x], grad_outputs=gradcli.tensor([3.0, -1.0]), retain_graph=True
    )
    np.testing.assert_allclose(g.data, [2 * 1.0 * 3.0, 2 * 2.0 * -1.0])
    (g2,) = gradcli.autograd.grad(z, [x], grad_outputs=np.array([1.0, 1.0]))
    np.testing.assert_allclose(g2.data, [2.0, 4.0])


def test_autograd_grad_refuses_grad_outputs_of_the_wrong_shape():
    # torch: "Mismatch in shape: grad_output[0] has a shape of torch.Size([]) and output[0]
    # has a shape of torch.Size([2])" -- never a silent broadcast (backward() refuses too)
    x = gradcli.tensor([1.0, 2.0], requires_grad=True)
    z = x * x
    for bad in (gradcli.tensor(3.0), np.array([1.0, 1.0, 1.0]), np.ones((1, 2))):
        with pytest.raises((RuntimeError, GradcliError), match=r"(?i)shape"):
            gradcli.autograd.grad(z, [x], grad_outputs=bad)
    with pytest.raises((RuntimeError, GradcliError), match=r"(?i)shape"):
        z.backward(gradcli.tensor(3.0))


def test_autograd_grad_of_an_intermediate():
    x = gradcli.tensor([0.3, -0.7], requires_grad=True)
    h = gradcli.tanh(x)
    loss = (h * h).sum()
    (gh,) = gradcli.autograd.grad(loss, [h])
    np.testing.assert_allclose(gh.data, 2 * np.tanh([0.3, -0.7]))


def test_autograd_grad_create_graph_gives_a_differentiable_gradient():
    x = gradcli.tensor([1.0, 2.0], requires_grad=True)
    loss = (x**3.0).sum()
    (g,) = gradcli.autograd.grad(loss, [x], create_graph=True)
    assert g.requires_grad, "with create_graph=True the gradient is part of a graph"
    np.testing.assert_allclose(g.data, [3.0, 12.0])
    (gg,) = gradcli.autograd.grad(g.sum(), [x], retain_graph=True)
    np.testing.assert_allclose(gg.data, [6.0, 12.0])  # d/dx sum(3 x^2) = 6 x
    # third derivative: d/dx sum(6 x) = 6
    (g2,) = gradcli.autograd.grad(g.sum(), [x], create_graph=True)
    (g3,) = gradcli.autograd.grad(g2.sum(), [x])
    np.testing.assert_allclose(g3.data, [6.0, 6.0])
    assert x.grad is None


def test_backward_create_graph_makes_dot_grad_differentiable():
    x = gradcli.tensor([1.0, 2.0], requires_grad=True)
    y = gradcli.tensor(0.5, requires_grad=True)
    (gradcli.sin(x) * y).sum().backward(create_graph=True)
    gx = x.grad
    assert gx is not None and gx.requires_grad, "x.grad must record its graph (create_graph)"
    np.testing.assert_allclose(gx.data, np.cos([1.0, 2.0]) * 0.5)
    np.testing.assert_allclose(y.grad.data, np.sin([1.0, 2.0]).sum())
    # differentiate the gradient again, as torch: d/dx sum(cos(x) y) and d/dy sum(cos(x) y)
    x.grad = None
    y.grad = None
    gx.sum().backward()
    np.testing.assert_allclose(x.grad.data, -np.sin([1.0, 2.0]) * 0.5)
    np.testing.assert_allclose(y.grad.data, np.cos([1.0, 2.0]).sum())


def test_backward_without_create_graph_gives_constant_grads():
    x = gradcli.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    assert not x.grad.requires_grad


# --------------------------------------------------------------------------------------------
# 2. the second-derivative sweep over the engine
# --------------------------------------------------------------------------------------------

INTEGERS = list(range(-3, 4))
HALF_INTEGERS = [k + 0.5 for k in range(-4, 4)]

UNARY = {
    "abs": away0(),
    "sign": away0(),
    "sqrt": real(0.5, 3.0),
    "square": real(),
    "exp": real(),
    "expm1": real(),
    "log": real(0.5, 3.0),
    "log2": real(0.5, 3.0),
    "log10": real(0.5, 3.0),
    "log1p": real(-0.5, 2.0),
    "sin": real(-3.0, 3.0),
    "cos": real(-3.0, 3.0),
    "tan": real(-1.2, 1.2),
    "arcsin": real(-0.9, 0.9),
    "arccos": real(-0.9, 0.9),
    "arctan": real(-3.0, 3.0),
    "sinh": real(),
    "cosh": real(),
    "tanh": real(),
    "arcsinh": real(-3.0, 3.0),
    "arccosh": real(1.1, 3.0),
    "arctanh": real(-0.9, 0.9),
    "sigmoid": real(-4.0, 4.0),
    "relu": away0(),
    "softplus": real(-4.0, 4.0),
    "silu": real(-4.0, 4.0),
    "erf": real(-3.0, 3.0),
    "gelu": real(-4.0, 4.0),
    "leaky_relu": away0(),
    "elu": away0(),
    "softsign": away0(),  # (its second derivative jumps at 0)
    "floor": avoiding(INTEGERS, lo=-2.5, hi=2.5),
    "ceil": avoiding(INTEGERS, lo=-2.5, hi=2.5),
    "round": avoiding(HALF_INTEGERS, lo=-2.5, hi=2.5),
}
PIECEWISE_CONSTANT = {"sign", "floor", "ceil", "round"}  # checked through f(x) * x
SHAPES = [(), (3,), (2, 3)]


@pytest.mark.parametrize("shape", SHAPES, ids=sid)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_second_derivative_unary(name, shape):
    x = UNARY[name](rng_for("unary2", name, shape), shape)
    f = fn(name)
    if name in PIECEWISE_CONSTANT:
        check_hessian(lambda t: f(t) * t, x, name=f"{name}(x) * x, x of shape {shape}")
    else:
        check_hessian(f, x, name=f"{name}(x), x of shape {shape}")


@pytest.mark.parametrize(
    "op", ["-x", "+x", "x.T", "x ** 2.0", "x ** 3.0", "x ** 0.5", "x ** -1.5", "1.7 ** x"]
)
def test_second_derivative_operators(op):
    f, sampler = {
        "-x": (lambda t: -t, real()),
        "+x": (lambda t: +t, real()),
        "x.T": (lambda t: t.T, real()),
        "x ** 2.0": (lambda t: t**2.0, real()),  # x of either sign
        "x ** 3.0": (lambda t: t**3.0, real()),
        "x ** 0.5": (lambda t: t**0.5, real(0.5, 3.0)),
        "x ** -1.5": (lambda t: t**-1.5, real(0.5, 3.0)),
        "1.7 ** x": (lambda t: 1.7**t, real()),
    }[op]
    check_hessian(f, sampler(rng_for("op2", op), (2, 3)), name=op)


BINARY = {
    "a + b": (lambda a, b: a + b, independent(real(), real())),
    "a - b": (lambda a, b: a - b, independent(real(), real())),
    "a * b": (lambda a, b: a * b, independent(real(), real())),
    "a / b": (lambda a, b: a / b, independent(real(), away0(0.5, 2.0))),
    "a ** b": (lambda a, b: a**b, independent(real(0.5, 2.0), real())),
    "pow": (lambda a, b: fn("pow")(a, b), independent(real(0.5, 2.0), real())),
    "maximum": (lambda a, b: fn("maximum")(a, b), joint_distinct),
    "minimum": (lambda a, b: fn("minimum")(a, b), joint_distinct),
    "arctan2": (lambda a, b: fn("arctan2")(a, b), independent(away0(), away0())),
    "logaddexp": (lambda a, b: fn("logaddexp")(a, b), independent(real(), real())),
}
SHAPE_PAIRS = [
    ((), ()),
    ((3,), (3,)),
    ((2, 3), (3,)),
    ((3,), (2, 3)),
    ((2, 1), (1, 3)),
    ((), (2, 3)),
    ((2, 3), ()),
]


@pytest.mark.parametrize(
    "shapes", SHAPE_PAIRS, ids=[f"{sid(a)}-with-{sid(b)}" for a, b in SHAPE_PAIRS]
)
@pytest.mark.parametrize("op", list(BINARY))
def test_second_derivative_binary_broadcasting(op, shapes):
    f, sampler = BINARY[op]
    a, b = sampler(rng_for("binary2", op, shapes), *shapes)
    check_hessian(f, a, b, name=f"{op} with shapes {shapes}")


def test_second_derivative_clip_and_where():
    rng = rng_for("clipwhere2")
    x = avoiding([-0.5, 0.8], 0.15)(rng, (2, 3))
    check_hessian(lambda t: fn("clip")(t, -0.5, 0.8) * t, x, name="clip(x, -0.5, 0.8) * x")
    lo, hi = real(-1.0, -0.2)(rng, (3,)), real(0.2, 1.0)(rng, (2, 1))
    x = np.array([[-1.5, 0.0, 1.5], [1.7, -0.1, -1.9]])
    check_hessian(
        lambda t, a, b: fn("clip")(t, a, b) * (t + a + b),
        x,
        lo,
        hi,
        name="clip(x, lo, hi) * (x + lo + hi), tensor bounds, broadcast",
    )
    c, a, b = real()(rng, (2, 1)), real()(rng, (1, 3)), real()(rng, (2, 3))
    c = np.where(np.abs(c) < 0.1, 0.5, c)
    check_hessian(
        lambda tc, ta, tb: fn("where")(tc > 0.0, ta * tb, fn("sin")(tb)),
        c,
        a,
        b,
        wrt=[1, 2],
        name="where(c > 0, a * b, sin(b)) broadcast",
    )


def _red(name, sampler, **kw):
    def call(axis, keepdims):
        return lambda t: fn(name)(t, axis=axis, keepdims=keepdims, **kw)

    return call, sampler


REDUCTIONS = {
    "sum": _red("sum", real()),
    "mean": _red("mean", real()),
    "prod": _red("prod", away0(0.5, 1.5)),
    "max": _red("max", distinct_sampler()),
    "min": _red("min", distinct_sampler()),
    "logsumexp": _red("logsumexp", real()),
    "var": _red("var", real()),
    "var(ddof=1)": _red("var", real(), ddof=1),
    "std": _red("std", real()),
    "std(ddof=1)": _red("std", real(), ddof=1),
    "norm(ord=2)": _red("norm", away0(), ord=2),
    "norm(ord=1)": _red("norm", away0(), ord=1),
    "norm(ord=1.5)": _red("norm", away0(), ord=1.5),
    "norm(ord=3)": _red("norm", away0(), ord=3),
    "norm(ord=0.5)": _red("norm", away0(), ord=0.5),
    "norm(ord=inf)": _red("norm", distinct_abs_sampler, ord=np.inf),
}
REDUCTION_AXES = [
    ((4,), None, False),
    ((4,), 0, True),
    ((2, 3), None, False),
    ((2, 3), 0, True),
    ((2, 3), 1, False),
    ((2, 3), -1, True),
    ((2, 3, 2), (0, 2), False),
]


@pytest.mark.parametrize(
    "shape,axis,keepdims", REDUCTION_AXES, ids=[f"{sid(s)}-{a}-{k}" for s, a, k in REDUCTION_AXES]
)
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_second_derivative_reductions(name, shape, axis, keepdims):
    call, sampler = REDUCTIONS[name]
    x = sampler(rng_for("reduce2", name, shape, axis, keepdims), shape)
    check_hessian(
        call(axis, keepdims),
        x,
        name=f"{name}(x of shape {shape}, axis={axis}, keepdims={keepdims})",
    )


def test_second_derivative_scalar_reductions():
    x = np.array(0.7)
    for name in ("sum", "mean", "prod", "max", "min", "logsumexp"):
        check_hessian(lambda t, name=name: fn(name)(t), x, name=f"{name}(scalar)")


@pytest.mark.parametrize(
    "x,axis",
    [
        ([[0.7, 0.0, -1.3], [1.1, 0.9, -0.8]], None),  # one zero
        ([[0.7, 0.0, -1.3], [1.1, 0.9, -0.8]], 1),
        ([[0.7, 0.0, -1.3], [0.0, 0.9, -0.8]], None),  # two zeros
        ([[0.0, 0.0, -1.3], [1.1, 0.9, -0.8]], 1),  # two zeros in one group
        ([[0.0, 0.0, 0.0], [1.1, 0.0, -0.8]], 1),  # three zeros in one group
        ([[0.0, 0.5], [0.0, -1.2]], 0),
    ],
    ids=[
        "one-zero-all",
        "one-zero-axis1",
        "two-zeros-all",
        "two-zeros-one-row",
        "three-zeros",
        "zeros-axis0",
    ],
)
def test_second_derivative_prod_with_zeros(x, axis):
    check_hessian(lambda t: fn("prod")(t, axis=axis), f64(x), name=f"prod({x}, axis={axis})")


SOFTMAX_CASES = [
    (name, shape, axis)
    for name in ("softmax", "log_softmax")
    for shape, axes in [((4,), ["default", 0]), ((2, 3), ["default", 0, -2]), ((2, 2, 2), [1])]
    for axis in axes
]


@pytest.mark.parametrize(
    "name,shape,axis", SOFTMAX_CASES, ids=[f"{n}-{sid(s)}-{a}" for n, s, a in SOFTMAX_CASES]
)
def test_second_derivative_softmax(name, shape, axis):
    x = real(-3.0, 3.0)(rng_for("softmax2", name, shape, axis), shape)
    f = (lambda t: fn(name)(t)) if axis == "default" else (lambda t: fn(name)(t, axis=axis))
    check_hessian(f, x, name=f"{name}(x of shape {shape}, axis={axis})")


SHAPE_FUNCS = {
    "reshape(2x3 -> (3, 2))": (lambda t: fn("reshape")(t, (3, 2)), [(2, 3)]),
    "reshape(2x3 -> (-1,))": (lambda t: fn("reshape")(t, (-1,)), [(2, 3)]),
    "reshape(scalar -> (1,))": (lambda t: fn("reshape")(t, (1,)), [()]),
    "transpose(2x3)": (lambda t: fn("transpose")(t), [(2, 3)]),
    "transpose(2x3x2, (1, 0, 2))": (lambda t: fn("transpose")(t, (1, 0, 2)), [(2, 3, 2)]),
    "transpose(2x3x2, (2, 0, 1))": (lambda t: fn("transpose")(t, (2, 0, 1)), [(2, 3, 2)]),
    "(2x3).T": (lambda t: t.T, [(2, 3)]),
    "flatten(2x3)": (lambda t: fn("flatten")(t), [(2, 3)]),
    "squeeze(1x3x1)": (lambda t: fn("squeeze")(t), [(1, 3, 1)]),
    "squeeze(1x3x1, axis=0)": (lambda t: fn("squeeze")(t, axis=0), [(1, 3, 1)]),
    "expand_dims(2x3, 1)": (lambda t: fn("expand_dims")(t, 1), [(2, 3)]),
    "expand_dims(2x3, (0, 3))": (lambda t: fn("expand_dims")(t, (0, 3)), [(2, 3)]),
    "flip(2x3)": (lambda t: fn("flip")(t), [(2, 3)]),
    "flip(2x3, axis=1)": (lambda t: fn("flip")(t, axis=1), [(2, 3)]),
    "concatenate([2x3, 1x3])": (lambda a, b: fn("concatenate")([a, b]), [(2, 3), (1, 3)]),
    "concatenate([2x2, 2x1], axis=1)": (
        lambda a, b: fn("concatenate")([a, b], axis=1),
        [(2, 2), (2, 1)],
    ),
    "concatenate([x, x * y])": (lambda a, b: fn("concatenate")([a, a * b]), [(3,), (3,)]),
    "stack([3, 3])": (lambda a, b: fn("stack")([a, b]), [(3,), (3,)]),
    "stack([2x2, 2x2], axis=-1)": (lambda a, b: fn("stack")([a, b], axis=-1), [(2, 2), (2, 2)]),
    "stack([x, sin(y)], axis=1)": (
        lambda a, b: fn("stack")([a, fn("sin")(b)], axis=1),
        [(3,), (3,)],
    ),
    "cumsum(2x3, axis=1)": (lambda t: fn("cumsum")(t, axis=1), [(2, 3)]),
    "cumsum(2x2)": (lambda t: fn("cumsum")(t), [(2, 2)]),
    "cumprod(3x2, axis=0)": (lambda t: fn("cumprod")(t, 0), [(3, 2)]),
    "cumprod(2x3, axis=-1)": (lambda t: fn("cumprod")(t, axis=-1), [(2, 3)]),
    "cumprod(x * [1, 0, 1, 0]) (zeros)": (
        lambda t: fn("cumprod")(t * E.tensor([1.0, 0.0, 1.0, 0.0])) * t,
        [(4,)],
    ),
    "tril(3x3, k=-1)": (lambda t: fn("tril")(t, k=-1), [(3, 3)]),
    "triu(2x2x3)": (lambda t: fn("triu")(t), [(2, 2, 3)]),
}


@pytest.mark.parametrize("case", list(SHAPE_FUNCS))
def test_second_derivative_shape_functions(case):
    f, shapes = SHAPE_FUNCS[case]
    rng = rng_for("shape2", case)
    check_hessian(f, *[real()(rng, s) for s in shapes], name=case)


ALL = slice(None)
INDEX_CASES = [
    ((5,), 1, "[1]"),
    ((5,), -1, "[-1]"),
    ((5,), slice(1, 3), "[1:3]"),
    ((5,), slice(None, None, -2), "[::-2]"),
    ((5,), [0, 2, 2], "[[0, 2, 2]]"),
    ((5,), [-1, 0, -1, -1], "[[-1, 0, -1, -1]]"),
    ((5,), np.array([[0, 1], [4, 4]]), "[array([[0, 1], [4, 4]])]"),
    ((5,), None, "[None]"),
    ((3, 4), (ALL, 0), "[:, 0]"),
    ((3, 4), (0, slice(1, None)), "[0, 1:]"),
    ((3, 4), (slice(None, None, -1), slice(3, 0, -1)), "[::-1, 3:0:-1]"),
    ((3, 4), [0, 2, 2], "[[0, 2, 2]]"),
    ((3, 4), (ALL, [0, 3, 3]), "[:, [0, 3, 3]]"),
    ((3, 4), ([0, 1, 1], [2, 0, 2]), "[[0, 1, 1], [2, 0, 2]]"),
    ((3, 4), (Ellipsis, 1), "[..., 1]"),
    ((2, 3, 2), (ALL, None, slice(1, 3), [0, 1, 1]), "[:, None, 1:3, [0, 1, 1]]"),
    ((), Ellipsis, "scalar[...]"),
]


@pytest.mark.parametrize(
    "shape,key,label", INDEX_CASES, ids=[f"{sid(s)}{lab}" for s, _k, lab in INDEX_CASES]
)
def test_second_derivative_indexing(shape, key, label):
    x = real()(rng_for("index2", shape, label), shape)
    check_hessian(lambda t: t[key], x, name=f"x{label} with x of shape {shape}")


def test_second_derivative_repeated_index_of_a_nonlinear_value():
    # the scatter-add of repeated indices must accumulate in the recorded backward pass too
    x = f64([0.3, -1.1, 0.8, 1.4])
    check_hessian(
        lambda t: fn("sin")(t)[[0, 2, 2, 3, 3, 3]] * t[[1, 1, 0, 0, 2, 3]],
        x,
        name="sin(x)[[0,2,2,3,3,3]] * x[[1,1,0,0,2,3]]",
    )


MATMUL_SHAPES = [
    ((3,), (3,)),
    ((2, 3), (3,)),
    ((3,), (3, 2)),
    ((2, 3), (3, 2)),
    ((2, 2, 3), (3, 2)),
    ((2, 2, 3), (2, 3, 2)),
    ((2, 3), (2, 3, 1)),
]


@pytest.mark.parametrize(
    "shapes", MATMUL_SHAPES, ids=[f"{sid(a)}@{sid(b)}" for a, b in MATMUL_SHAPES]
)
def test_second_derivative_matmul(shapes):
    rng = rng_for("matmul2", shapes)
    a, b = real()(rng, shapes[0]), real()(rng, shapes[1])
    check_hessian(lambda x, y: x @ y, a, b, name=f"a @ b with shapes {shapes}")


LINALG = {
    "dot(3, 3)": (lambda a, b: fn("dot")(a, b), [(3,), (3,)], real()),
    "dot(2x3, 3x2)": (lambda a, b: fn("dot")(a, b), [(2, 3), (3, 2)], real()),
    "outer(3, 2)": (lambda a, b: fn("outer")(a, b), [(3,), (2,)], real()),
    "trace(3x3)": (lambda a: fn("trace")(a), [(3, 3)], real()),
    "trace(x @ x)": (lambda a: fn("trace")(a @ a), [(3, 3)], real()),
    "diag(3)": (lambda a: fn("diag")(a), [(3,)], real()),
    "diag(3, k=1)": (lambda a: fn("diag")(a, k=1), [(3,)], real()),
    "diag(3x3)": (lambda a: fn("diag")(a), [(3, 3)], real()),
    "diag(2x3, k=-1)": (lambda a: fn("diag")(a, k=-1), [(3, 2)], real()),
    "det(1x1)": (lambda a: fn("det")(a), [(1, 1)], well_conditioned),
    "det(2x2)": (lambda a: fn("det")(a), [(2, 2)], well_conditioned),
    "det(3x3)": (lambda a: fn("det")(a), [(3, 3)], well_conditioned),
    "det(batched 2x3x3)": (lambda a: fn("det")(a), [(2, 3, 3)], well_conditioned),
    "inv(2x2)": (lambda a: fn("inv")(a), [(2, 2)], well_conditioned),
    "inv(3x3)": (lambda a: fn("inv")(a), [(3, 3)], well_conditioned),
    "inv(batched 2x2x2)": (lambda a: fn("inv")(a), [(2, 2, 2)], well_conditioned),
    "solve(3x3, 3)": (lambda a, b: fn("solve")(a, b), [(3, 3), (3,)], well_conditioned),
    "solve(3x3, 3x2)": (lambda a, b: fn("solve")(a, b), [(3, 3), (3, 2)], well_conditioned),
    "solve(batched 2x2x2, 2) vector b": (
        lambda a, b: fn("solve")(a, b),
        [(2, 2, 2), (2,)],
        well_conditioned,
    ),
    "solve(batched 2x2x2, 2x2x1)": (
        lambda a, b: fn("solve")(a, b),
        [(2, 2, 2), (2, 2, 1)],
        well_conditioned,
    ),
    "einsum(ij,jk->ik)": (lambda a, b: fn("einsum")("ij,jk->ik", a, b), [(2, 3), (3, 2)], real()),
    "einsum(ii->i)": (lambda a: fn("einsum")("ii->i", a), [(3, 3)], real()),
    "einsum(ii->)": (lambda a: fn("einsum")("ii->", a @ a), [(3, 3)], real()),
    "einsum(i,j->ij)": (lambda a, b: fn("einsum")("i,j->ij", a, b), [(3,), (2,)], real()),
    "einsum(bij,bjk->bik)": (
        lambda a, b: fn("einsum")("bij,bjk->bik", a, b),
        [(2, 2, 3), (2, 3, 2)],
        real(),
    ),
    "einsum(...ij,jk, size-1 j)": (
        lambda a, b: fn("einsum")("...ij,jk->...ik", a, b),
        [(2, 2, 1), (3, 2)],
        real(),
    ),
    "einsum(ij,jk,kl->il)": (
        lambda a, b: fn("einsum")("ij,jk,kl->il", a, b, a),
        [(2, 3), (3, 2)],
        real(),
    ),
    "slogdet(3x3)": (lambda a: fn("slogdet")(a).logabsdet, [(3, 3)], well_conditioned),
    "slogdet(batched 2x2x2)": (lambda a: fn("slogdet")(a)[1], [(2, 2, 2)], well_conditioned),
    "cholesky(sym 3x3)": (
        lambda a: fn("cholesky")((a + a.T) * 0.5),
        [(3, 3)],
        well_conditioned,
    ),
    "cholesky(sym batched 2x2x2)": (
        lambda a: fn("cholesky")((a + fn("swapaxes")(a, -1, -2)) * 0.5),
        [(2, 2, 2)],
        well_conditioned,
    ),
    "pinv(3x3)": (lambda a: fn("pinv")(a), [(3, 3)], well_conditioned),
    "pinv(2x3)": (lambda a: fn("pinv")(a), [(2, 3)], real()),
    "pinv(3x2)": (lambda a: fn("pinv")(a), [(3, 2)], real()),
}


@pytest.mark.parametrize("case", list(LINALG))
def test_second_derivative_linalg(case):
    f, shapes, sampler = LINALG[case]
    rng = rng_for("linalg2", case)
    arrays = [sampler(rng, s) if i == 0 else real()(rng, s) for i, s in enumerate(shapes)]
    check_hessian(f, *arrays, name=case)


COMPOSITES = {
    "sum(tanh(W @ x + b) ** 2)": (
        lambda W, x, b: fn("sum")(fn("tanh")(W @ x + b) ** 2.0),
        [(2, 3), (3,), (2,)],
    ),
    "cross entropy with log_softmax": (
        lambda z, y: -fn("sum")(y * fn("log_softmax")(z, axis=-1)),
        [(2, 3), (2, 3)],
    ),
    "leaf reused many times": (lambda x: x * x + fn("sin")(x) * x - x / (x * x + 1.0), [(2, 2)]),
    "x @ x.T": (lambda x: x @ x.T, [(2, 3)]),
    "norm(A @ v) + var(v) + logsumexp(A, axis=0)": (
        lambda A, v: fn("norm")(A @ v) + fn("var")(v) + fn("sum")(fn("logsumexp")(A, axis=0)),
        [(2, 3), (3,)],
    ),
}


@pytest.mark.parametrize("case", list(COMPOSITES))
def test_second_derivative_composites(case):
    f, shapes = COMPOSITES[case]
    rng = rng_for("composite2", case)
    check_hessian(f, *[real(-1.5, 1.5)(rng, s) for s in shapes], name=case)


# --------------------------------------------------------------------------------------------
# 3. the same through the language: analysis.check(order=2) for every function
# --------------------------------------------------------------------------------------------

# One program per function of the language (by canonical name), inputs in its smooth domain.
# Piecewise-constant functions are multiplied by x; linear ones are squared or composed.
X3 = {"x": [0.6, -1.3, 1.1]}
POS = {"x": [0.6, 1.3, 2.1]}
UNIT = {"x": [0.6, -0.3, 0.45]}
M = {"A": [[3.2, 0.4, -0.5], [0.1, 2.7, 0.3], [-0.6, 0.2, 3.5]], "b": [0.5, -1.0, 2.0]}
LANGUAGE_CASES = {
    "abs": ("sum(abs(x) ** 3)", X3),
    "sign": ("sum(sign(x) * x ** 2)", X3),
    "sqrt": ("sum(sqrt(x))", POS),
    "square": ("sum(square(x) * x)", X3),
    "exp": ("sum(exp(x))", X3),
    "expm1": ("sum(expm1(x))", X3),
    "log": ("sum(log(x))", POS),
    "log2": ("sum(log2(x))", POS),
    "log10": ("sum(log10(x))", POS),
    "log1p": ("sum(log1p(x))", POS),
    "sin": ("sum(sin(x))", X3),
    "cos": ("sum(cos(x))", X3),
    "tan": ("sum(tan(x))", UNIT),
    "arcsin": ("sum(arcsin(x))", UNIT),
    "arccos": ("sum(acos(x))", UNIT),
    "arctan": ("sum(atan(x))", X3),
    "sinh": ("sum(sinh(x))", X3),
    "cosh": ("sum(cosh(x))", X3),
    "tanh": ("sum(tanh(x))", X3),
    "arcsinh": ("sum(asinh(x))", X3),
    "arccosh": ("sum(acosh(x + 2))", POS),
    "arctanh": ("sum(atanh(x))", UNIT),
    "sigmoid": ("sum(sigmoid(x))", X3),
    "relu": ("sum(relu(x) ** 3)", X3),
    "softplus": ("sum(softplus(x))", X3),
    "silu": ("sum(silu(x))", X3),
    "erf": ("sum(erf(x))", X3),
    "gelu": ('sum(gelu(x) + gelu(x, approximate="tanh"))', X3),
    "leaky_relu": ("sum(leaky_relu(x, negative_slope=0.2) ** 3)", X3),
    "elu": ("sum(elu(x, alpha=1.5) + elu(x) ** 3)", X3),
    "softsign": ("sum(softsign(x))", X3),
    "logaddexp": ("sum(logaddexp(x, y))", {"x": [0.6, -1.3, 1.1], "y": [0.2, -0.4, 1.7]}),
    "cumsum": ("sum(cumsum(x) ** 3) + sum(cumsum(y, axis=0) ** 2)", {**X3, "y": [[0.6, -1.3]] * 2}),
    "cumprod": (
        "sum(cumprod(x) * [1, 2, 3]) + sum(cumprod(y, axis=1) * x)",
        {**X3, "y": [[0.5, 0.0, 2.0], [1.5, -1.0, 0.0]]},
    ),
    "tril": ("sum(tril(A, k=-1) ** 3) + sum(tril(A) * A)", {"A": M["A"]}),
    "triu": ("sum(triu(A, 1) ** 3) + sum(triu(A) * A)", {"A": M["A"]}),
    "floor": ("sum(floor(x) * x ** 2)", X3),
    "ceil": ("sum(ceil(x) * x ** 2)", X3),
    "round": ("sum(round(x) * x ** 2)", X3),
    "maximum": ("sum(maximum(x, y) ** 2)", {"x": [0.6, -1.3, 1.1], "y": [0.2, -0.4, 1.7]}),
    "minimum": ("sum(minimum(x, y) ** 3)", {"x": [0.6, -1.3, 1.1], "y": [0.2, -0.4, 1.7]}),
    "arctan2": ("sum(atan2(y, x))", {"x": [0.6, -1.3, 1.1], "y": [0.2, -0.4, 1.7]}),
    "pow": ("sum(pow(x, y))", {"x": [0.6, 1.3, 2.1], "y": [0.2, -0.4, 1.7]}),
    "clip": ("sum(clip(x, -1, 1) ** 3 * x)", X3),
    "where": ("sum(where(x > 0, x ** 3, sin(x)))", X3),
    "sum": ("sum(x, axis=1) @ sum(x, axis=0)[:2]", {"x": [[0.6, -1.3, 1.1], [0.2, 0.5, -0.7]]}),
    "mean": (
        "sum(mean(x, axis=0, keepdims=true) * mean(x ** 2, axis=1))",
        {"x": [[0.6, -1.3], [0.2, 0.5]]},
    ),
    "prod": (
        "prod(x) + sum(prod(y, axis=1))",
        {"x": [0.6, -1.3, 1.1], "y": [[0.0, 2.0], [1.5, 0.0]]},
    ),
    "max": (
        "max(x) ** 2 + sum(max(y, axis=0) ** 3)",
        {"x": [0.6, -1.3, 1.1], "y": [[0.4, 2.0], [1.5, -0.3]]},
    ),
    "min": (
        "min(x) ** 2 + sum(min(y, axis=1) ** 3)",
        {"x": [0.6, -1.3, 1.1], "y": [[0.4, 2.0], [1.5, -0.3]]},
    ),
    "logsumexp": (
        "logsumexp(x) + sum(logsumexp(y, axis=0))",
        {"x": [0.6, -1.3, 1.1], "y": [[0.4, 2.0], [1.5, -0.3]]},
    ),
    "norm": (
        "norm(x) + norm(x, ord=3) + norm(x, ord=1.5) + norm(y, ord=inf) ** 2",
        {"x": [0.6, -1.3, 1.1], "y": [0.4, -2.0, 1.5]},
    ),
    "var": (
        "var(x) + sum(var(y, axis=0, ddof=1))",
        {"x": [0.6, -1.3, 1.1], "y": [[0.4, 2.0], [1.5, -0.3]]},
    ),
    "std": (
        "std(x) + sum(std(y, axis=1, ddof=1))",
        {"x": [0.6, -1.3, 1.1], "y": [[0.4, 2.0], [1.5, -0.3]]},
    ),
    "softmax": (
        "sum(softmax(x) * [1, 2, 3]) + sum(softmax(y, axis=0) ** 2)",
        {"x": [0.6, -1.3, 1.1], "y": [[0.4, 2.0], [1.5, -0.3]]},
    ),
    "log_softmax": ("sum(log_softmax(x) * [1, 2, 3])", X3),
    "reshape": ("sum(reshape(x, 3, 2) ** 3)", {"x": [[0.6, -1.3, 1.1], [0.2, 0.5, -0.7]]}),
    "transpose": ("sum(transpose(x) @ x ** 2)", {"x": [[0.6, -1.3, 1.1], [0.2, 0.5, -0.7]]}),
    "flatten": ("sum(sin(flatten(x)))", {"x": [[0.6, -1.3], [0.2, 0.5]]}),
    "squeeze": ("sum(squeeze(x) ** 3)", {"x": [[0.6, -1.3, 1.1]]}),
    "expand_dims": ("sum(expand_dims(x, 0) ** 3)", X3),
    "concatenate": ("sum(concat([x, x * y]) ** 2)", {"x": [0.6, -1.3], "y": [0.2, 0.5]}),
    "stack": ("sum(stack([x, y], axis=1) ** 3)", {"x": [0.6, -1.3], "y": [0.2, 0.5]}),
    "flip": ("sum(flip(x) * x ** 2)", X3),
    "matmul": ("sum(tanh(matmul(W, x)))", {"W": [[0.6, -1.3], [0.2, 0.5]], "x": [0.4, -0.9]}),
    "dot": ("dot(x, y) ** 2", {"x": [0.6, -1.3], "y": [0.2, 0.5]}),
    "outer": ("sum(outer(x, y) ** 2)", {"x": [0.6, -1.3], "y": [0.2, 0.5, 1.0]}),
    "trace": ("trace(A @ A)", {"A": [[0.6, -1.3], [0.2, 0.5]]}),
    "diag": (
        "sum(diag(x) @ diag(x)) + sum(diag(A) ** 3)",
        {"x": [0.6, -1.3], "A": [[0.6, -1.3], [0.2, 0.5]]},
    ),
    "det": ("det(A)", {"A": M["A"]}),
    "inv": ("sum(inv(A))", {"A": M["A"]}),
    "solve": ("sum(solve(A, b))", M),
    "einsum": (
        'sum(einsum("ij,jk->ik", A, A) ** 2) + einsum("ii", A) ** 3 + sum(einsum("ii->i", A) ** 3)'
        " + sum(einsum('i,j,i->j', b, b, b) ** 2)",
        M,
    ),
    "slogdet": ("slogdet(A)[1] + sum(slogdet(-A))", {"A": M["A"]}),
    "cholesky": ("sum(cholesky(A @ A.T) ** 2)", {"A": M["A"]}),
    "pinv": ("sum(pinv(A) ** 2) + sum(pinv(A[:2]) ** 2)", {"A": M["A"]}),
    "mse_loss": (
        "mse_loss(x, y) + sum(mse_loss(x, y * x, reduction='none'))",
        {**X3, "y": UNIT["x"]},
    ),
    "l1_loss": ("l1_loss(x ** 3, y) + l1_loss(x, 1, reduction='sum') ** 2", {**X3, "y": UNIT["x"]}),
    "huber_loss": (
        "huber_loss(x ** 3, y, delta=0.5) + huber_loss(x, y, 'sum', 0.8) ** 2",
        {**X3, "y": UNIT["x"]},
    ),
    "binary_cross_entropy": (
        "binary_cross_entropy(sigmoid(x), y, weight=[1, 2, 0.5]) + "
        "binary_cross_entropy(y, sigmoid(x * y), reduction='sum')",
        {"x": [0.6, -1.3, 1.1], "y": [0.2, 0.7, 0.45]},
    ),
    "binary_cross_entropy_with_logits": (
        "binary_cross_entropy_with_logits(x * y, y, pos_weight=[2, 1, 0.5], reduction='sum')",
        {"x": [0.6, -1.3, 1.1], "y": [0.2, 0.7, 0.45]},
    ),
    "cross_entropy": (
        "cross_entropy(x, [1, 0, -100], weight=[1, 2], label_smoothing=0.1) + "
        "cross_entropy(x * y, softmax(y), reduction='sum')",
        {"x": [[0.6, -1.3], [1.1, 0.2], [0.5, -0.7]], "y": [[0.2, 0.7], [0.45, -1.0], [0.3, 1.2]]},
    ),
    "nll_loss": (
        "nll_loss(log_softmax(x * y, axis=1), [1, 0, 1], reduction='sum') ** 2",
        {"x": [[0.6, -1.3], [1.1, 0.2], [0.5, -0.7]], "y": [[0.2, 0.7], [0.45, -1.0], [0.3, 1.2]]},
    ),
}
CONSTRUCTORS = {"zeros", "ones", "full", "eye", "arange", "linspace", "rand", "randn"}


def test_language_second_derivative_cases_cover_every_function():
    from gradcli.language import FUNCTIONS

    names = {f.name for f in FUNCTIONS.values()}
    missing = sorted(names - CONSTRUCTORS - set(LANGUAGE_CASES))
    assert not missing, f"functions without a second-derivative check: {missing}"


@pytest.mark.parametrize("name", list(LANGUAGE_CASES))
def test_language_hessian_check_order2(name):
    expr, inputs = LANGUAGE_CASES[name]
    result = analysis.check(expr, inputs, order=2)
    bad = {k: c for k, c in result.inputs.items() if not c.ok}
    assert result.ok and result.order == 2, (
        f"{name}: check --order 2 of {expr!r} fails: "
        + "; ".join(
            f"{k}[{','.join(map(str, c.worst_index))}] analytic {c.analytic!r} vs numeric "
            f"{c.numeric!r} (abs err {c.max_abs_error:.3g})"
            for k, c in bad.items()
        )
    )


# --------------------------------------------------------------------------------------------
# 4. hessian: hand-checked numbers
# --------------------------------------------------------------------------------------------


def test_hessian_of_sum_x_cubed():
    h = analysis.hessian("sum(x**3)", {"x": [1, 2]})
    np.testing.assert_allclose(h.hessian, [[6.0, 0.0], [0.0, 12.0]], rtol=0, atol=1e-12)
    assert h.labels == ["x[0]", "x[1]"]
    assert h.wrt == ["x"]
    assert float(h.value) == 9.0
    j = h.to_json()
    assert j["hessian"] == [[6.0, 0.0], [0.0, 12.0]]
    assert set(j) >= {"expr", "output", "wrt", "labels", "hessian"}
    assert j["output"] == {"shape": [], "value": 9.0}


def test_hessian_of_sum_a_times_b_is_the_block_matrix():
    h = analysis.hessian("sum(a*b)", {"a": [1.5, -2.0], "b": [3.0, 4.0]})
    assert h.labels == ["a[0]", "a[1]", "b[0]", "b[1]"]
    eye, zero = np.eye(2), np.zeros((2, 2))
    np.testing.assert_array_equal(h.hessian, np.block([[zero, eye], [eye, zero]]))


def test_hessian_wrt_order_and_labels_of_scalars_and_matrices():
    h = analysis.hessian("s * sum(W ** 2)", {"W": [[1, 2], [3, 4]], "s": 2.0}, wrt=["s", "W"])
    assert h.wrt == ["s", "W"]
    assert h.labels == ["s", "W[0,0]", "W[0,1]", "W[1,0]", "W[1,1]"]
    w = np.array([1.0, 2.0, 3.0, 4.0])
    expected = np.zeros((5, 5))
    expected[0, 1:] = expected[1:, 0] = 2 * w
    expected[1:, 1:] = 2 * 2.0 * np.eye(4)
    np.testing.assert_allclose(h.hessian, expected, rtol=0, atol=1e-12)
    # an input outside --wrt is a constant: only s rows/columns
    hs = analysis.hessian("s * sum(W ** 2)", {"W": [[1, 2], [3, 4]], "s": 2.0}, wrt=["s"])
    assert hs.labels == ["s"] and hs.hessian.shape == (1, 1) and hs.hessian[0, 0] == 0.0


@pytest.mark.parametrize("shapes", [((2, 3), (3,)), ((3, 2), (2,)), ((1, 4), (4,))])
def test_hessian_of_sum_tanh_W_x_against_finite_differences(shapes):
    rng = rng_for("tanhWx", shapes)
    W, x = rng.uniform(-1.0, 1.0, shapes[0]), rng.uniform(-1.0, 1.0, shapes[1])
    h = analysis.hessian("sum(tanh(W@x))", {"W": W, "x": x})
    assert h.hessian.shape == (W.size + x.size,) * 2
    assert h.labels[0] == "W[0,0]" and h.labels[-1] == f"x[{x.size - 1}]"

    def grad(Wv, xv):
        t = np.tanh(Wv @ xv)
        d = 1 - t**2
        return np.concatenate([np.outer(d, xv).ravel(), (Wv.T @ d).ravel()])

    eps = 1e-6
    flat = np.concatenate([W.ravel(), x.ravel()])
    numeric = np.zeros_like(h.hessian)
    for k in range(flat.size):
        cols = []
        for s in (eps, -eps):
            p = flat.copy()
            p[k] += s
            cols.append(grad(p[: W.size].reshape(W.shape), p[W.size :]))
        numeric[:, k] = (cols[0] - cols[1]) / (2 * eps)
    np.testing.assert_allclose(h.hessian, numeric, rtol=1e-6, atol=1e-8)
    # and the analytic answer: H_xx = W^T diag(-2 t (1 - t^2)) W
    t = np.tanh(W @ x)
    hxx = W.T @ np.diag(-2 * t * (1 - t**2)) @ W
    np.testing.assert_allclose(h.hessian[W.size :, W.size :], hxx, rtol=1e-10, atol=1e-12)


def test_hessian_of_a_non_scalar_output_suggests_sum():
    with pytest.raises(GradcliError) as info:
        analysis.hessian("x * x", {"x": [1.0, 2.0]})
    assert info.value.kind == "shape"
    assert "sum(" in info.value.message
    assert "(2,)" in info.value.message


def test_hessian_of_a_linear_function_is_zero():
    h = analysis.hessian("sum(3 * x) + 2", {"x": [1.0, 2.0, 3.0]})
    np.testing.assert_array_equal(h.hessian, np.zeros((3, 3)))


# --------------------------------------------------------------------------------------------
# 5. jacobian
# --------------------------------------------------------------------------------------------


def test_jacobian_of_a_times_b_plus_b():
    j = analysis.jacobian("a*b+b", {"a": [3, 4], "b": [5, 6]})
    np.testing.assert_array_equal(j.jacobian["a"], np.diag([5.0, 6.0]))  # diag(b)
    np.testing.assert_array_equal(j.jacobian["b"], np.diag([4.0, 5.0]))  # diag(a + 1)
    np.testing.assert_array_equal(j.value, [20.0, 30.0])
    out = j.to_json()
    assert out["output"] == {"shape": [2], "value": [20.0, 30.0]}
    assert out["jacobian"]["a"] == {"shape": [2, 2], "value": [[5.0, 0.0], [0.0, 6.0]]}
    assert out["jacobian"]["b"]["value"] == [[4.0, 0.0], [0.0, 5.0]]


def test_jacobian_of_a_matrix_output_has_shape_output_plus_input():
    rng = rng_for("jac-matrix")
    A, B = rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    j = analysis.jacobian("A @ B", {"A": A, "B": B})
    assert j.jacobian["A"].shape == (2, 4, 2, 3)
    assert j.jacobian["B"].shape == (2, 4, 3, 4)
    # d(AB)_ij / dA_kl = delta_ik B_lj ; d(AB)_ij / dB_kl = A_ik delta_jl
    ja = np.einsum("ik,lj->ijkl", np.eye(2), B)
    jb = np.einsum("ik,jl->ijkl", A, np.eye(4))
    np.testing.assert_allclose(j.jacobian["A"], ja, rtol=0, atol=1e-14)
    np.testing.assert_allclose(j.jacobian["B"], jb, rtol=0, atol=1e-14)


def test_jacobian_shapes_for_scalar_output_input_and_wrt():
    j = analysis.jacobian("sum(x ** 2) * s", {"x": [[1, 2], [3, 4]], "s": 2.0}, wrt=["x"])
    assert list(j.jacobian) == ["x"]
    np.testing.assert_array_equal(j.jacobian["x"], 2 * 2.0 * np.array([[1, 2], [3, 4]]))
    j2 = analysis.jacobian("x * [1, 2, 3]", {"x": 2.0})
    assert j2.jacobian["x"].shape == (3,)
    np.testing.assert_array_equal(j2.jacobian["x"], [1.0, 2.0, 3.0])


def test_jacobian_of_an_unused_input_is_zeros():
    j = analysis.jacobian("a * 2", {"a": [1.0, 2.0], "b": [1.0, 2.0, 3.0]})
    assert j.jacobian["b"].shape == (2, 3)
    assert not j.jacobian["b"].any()


# --------------------------------------------------------------------------------------------
# 6. check
# --------------------------------------------------------------------------------------------


def test_check_passes_on_correct_gradients():
    rng = rng_for("check-ok")
    c = analysis.check(
        "sum(tanh(W @ x)) + prod(x)",
        {"W": rng.standard_normal((2, 3)), "x": rng.standard_normal(3)},
    )
    assert c.ok and c.order == 1
    assert set(c.inputs) == {"W", "x"}
    for name, ic in c.inputs.items():
        assert ic.ok, name
        assert ic.max_abs_error < 1e-7
    out = c.to_json()
    assert set(out) >= {"expr", "ok", "eps", "rtol", "atol", "inputs"}
    assert out["eps"] == 1e-6 and out["rtol"] == 1e-5 and out["atol"] == 1e-8
    assert set(out["inputs"]["W"]) >= {"ok", "max_abs_error", "max_rel_error", "worst_index"}
    assert len(out["inputs"]["W"]["worst_index"]) == 2


def test_check_fails_at_a_relu_kink_naming_input_and_element():
    c = analysis.check("sum(relu(x) * y)", {"x": [1.0, 0.0, -1.0], "y": [2.0, 3.0, 4.0]})
    assert not c.ok
    assert not c.inputs["x"].ok
    assert c.inputs["x"].worst_index == [1]
    assert c.inputs["y"].ok, "y's gradient is right: only x fails"
    # relu'(0) = 0 (PyTorch's convention) against the central difference 0.5 * y
    assert c.inputs["x"].analytic == 0.0
    assert c.inputs["x"].numeric == pytest.approx(1.5)


def _wrong_sin_factor(xp, ans, ctx, x):
    # sin's rule is a factor (its VJP is g * factor): right everywhere except where x > 1,
    # where the derivative is off by 0.25
    return xp.cos(x) + (x > 1.0) * 0.25


def test_check_catches_a_wrong_first_derivative_rule(monkeypatch):
    sin = E.OPS["sin"]
    expr, inputs = "sum(sin(x)) + sum(y * y)", {"x": [0.3, -0.4, 1.2, 0.7], "y": [1.0, 2.0]}
    assert analysis.check(expr, inputs).ok, "the real rule passes"
    monkeypatch.setattr(sin, "local", _wrong_sin_factor)
    c = analysis.check(expr, inputs)
    assert not c.ok
    assert not c.inputs["x"].ok and c.inputs["x"].worst_index == [2]
    assert c.inputs["y"].ok
    assert c.inputs["x"].analytic == pytest.approx(math.cos(1.2) + 0.25)
    assert c.inputs["x"].numeric == pytest.approx(math.cos(1.2), abs=1e-8)
    monkeypatch.undo()
    assert analysis.check(expr, inputs).ok, "restored rule passes again"


def test_check_cli_exits_1_with_a_wrong_rule(monkeypatch, capsys):
    from gradcli.cli import app

    monkeypatch.setattr(E.OPS["sin"], "local", _wrong_sin_factor)
    code = app(args=["check", "sum(sin(x))", "x=[0.3, 1.2]", "--json"], standalone_mode=False)
    out = capsys.readouterr().out
    assert code == 1, out
    data = json.loads(out)
    assert data["ok"] is False and data["inputs"]["x"]["worst_index"] == [1]


def test_check_order_2_passes_on_smooth_functions():
    inputs = {"x": [0.3, -0.4, 1.2], "y": [1.0, 2.0, -0.5]}
    c = analysis.check("sum(sin(x) * y) + prod(x) ** 2", inputs, order=2)
    assert c.ok and c.order == 2
    assert c.to_json()["order"] == 2


def test_check_order_2_catches_a_wrong_second_derivative(monkeypatch):
    # sin's rule is g * cos(x): its tensor-mode form uses the cos primitive, whose own rule is
    # then what the second derivative of sin depends on. Break cos's rule (wrong sign, the
    # factor sin(x) instead of -sin(x)): first derivatives of sin stay right, its second
    # derivative becomes +sin(x).
    expr, inputs = "sum(sin(x))", {"x": [0.3, -0.4, 1.2]}
    monkeypatch.setattr(E.OPS["cos"], "local", lambda xp, ans, ctx, x: xp.sin(x))
    assert analysis.check(expr, inputs, order=1).ok, "first derivatives do not use cos's rule"
    c = analysis.check(expr, inputs, order=2)
    assert not c.ok
    ic = c.inputs["x"]
    assert not ic.ok and ic.worst_index == [2]  # |2 sin(x)| is largest at x = 1.2
    assert ic.analytic == pytest.approx(math.sin(1.2))
    assert ic.numeric == pytest.approx(-math.sin(1.2), rel=1e-6)
    assert abs(ic.analytic - ic.numeric) == pytest.approx(ic.max_abs_error)


def test_check_worst_index_is_where_the_largest_error_is(monkeypatch):
    # every element is wrong (the derivative is 1.5 cos x): the error 0.5 |cos x| is largest
    # at x = 0.3, and the element reported must be that one, with its analytic and numeric
    # values agreeing with max_abs_error.
    monkeypatch.setattr(E.OPS["sin"], "local", lambda xp, ans, ctx, x: xp.cos(x) * 1.5)
    c = analysis.check("sum(sin(x))", {"x": [1.2, 0.3, -0.7]})
    ic = c.inputs["x"]
    assert not ic.ok
    assert ic.max_abs_error == pytest.approx(0.5 * math.cos(0.3), rel=1e-6)
    assert ic.worst_index == [1], (
        f"worst_index {ic.worst_index} is not where the largest error "
        f"({ic.max_abs_error:.6g}) occurs"
    )
    assert abs(ic.analytic - ic.numeric) == pytest.approx(ic.max_abs_error)


def test_check_rejects_bad_options():
    with pytest.raises(GradcliError) as info:
        analysis.check("sum(x)", {"x": [1.0]}, order=3)
    assert info.value.kind == "input"
    with pytest.raises(GradcliError):
        analysis.check("sum(x)", {"x": [1.0]}, eps=0.0)


# --------------------------------------------------------------------------------------------
# 7. optimize
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "optimizer,lr,steps", [("sgd", 0.1, 200), ("momentum", 0.05, 500), ("adam", 0.1, 1000)]
)
def test_optimize_drives_x_to_3(optimizer, lr, steps):
    r = analysis.optimize(
        "sum((x-3)**2)", {"x": [0.0, 10.0, -2.0]}, optimizer=optimizer, lr=lr, steps=steps
    )
    x, g = r.final["x"]
    np.testing.assert_allclose(x, [3.0, 3.0, 3.0], rtol=0, atol=1e-6)
    assert len(r.losses) == steps + 1
    assert r.losses[0] == pytest.approx(9 + 49 + 25)
    assert r.losses[-1] < 1e-10
    np.testing.assert_allclose(g, 2 * (x - 3), rtol=0, atol=1e-12)  # the gradient at the end
    assert r.optimizer == optimizer and r.lr == lr and r.steps == steps


# f(W, x) = sum((tanh(W @ x) - y)^2) + 0.1 sum(W^2), y constant; 5 steps from W0, x0.
# Every number below was computed with torch 2.13 (float64): the same loop with
# torch.optim.SGD / SGD(momentum=0.9) / Adam, zero_grad() + backward() + [clip] + step().
OPT_EXPR = "sum((tanh(W @ x) - y) ** 2) + 0.1 * sum(W ** 2)"
OPT_INPUTS = {"W": [[0.5, -0.3, 0.8], [-0.2, 0.4, 0.1]], "x": [1.0, -0.5, 0.25], "y": [0.3, -0.7]}
TORCH = {
    "sgd": {
        "kwargs": {"optimizer": "sgd", "lr": 0.1},
        "losses": [0.388654997497053, 0.301010927982844, 0.2372467965311918,
                   0.1904858144407901, 0.15742950416807908, 0.13503989931405772],
        "W": [[[0.4491392638214329, -0.2735696319107164, 0.7737848159553583],
               [-0.25555377004410035, 0.4217768850220502, 0.08311155748897492]],
              [[0.4005324798075888, -0.2476538781610134, 0.7498623854946739],
               [-0.29550197821768526, 0.43659009288427025, 0.07184394068678594]],
              [[0.3562150760463134, -0.22354402663499046, 0.728354653528738],
               [-0.325621360781345, 0.44686873444374303, 0.0639463084702008]],
              [[0.3177705256343638, -0.202262496268208, 0.7091146366416147],
               [-0.34908281484522474, 0.45401936799871606, 0.058195334067950605]],
              [[0.28593450395935976, -0.1843516144435272, 0.691780610133049],
               [-0.3677449852366056, 0.45889342855541826, 0.05385950524556971]]],
        "x": [[0.9914803859195365, -0.51156328716407, 0.21135603405273629],
              [0.9851447852169395, -0.5197984894271646, 0.17665499881667482],
              [0.9811907788362473, -0.5266386822415849, 0.1463918685625699],
              [0.9797673973079064, -0.533154169320472, 0.12118885135002157],
              [0.9806398819441214, -0.5397771922785577, 0.1012238826845756]],
        "grad_W": [[0.25363084870276875, -0.1449996827034853, 0.15863351386387203],
                   [0.15032227674593987, -0.03144759727506598, 0.03388040394823102]],
        "grad_x": [-0.026673844247926237, 0.06783152374870946, 0.1508746614451647],
    },
    "momentum": {
        "kwargs": {"optimizer": "momentum", "lr": 0.1},
        "losses": [0.388654997497053, 0.301010927982844, 0.1829909024167859,
                   0.10654707060323795, 0.11963637603102968, 0.17647443796975393],
        "W": [[[0.4491392638214329, -0.2735696319107164, 0.7737848159553583],
               [-0.25555377004410035, 0.4217768850220502, 0.08311155748897492]],
              [[0.35475781724687844, -0.2238665468806582, 0.7262687198544963],
               [-0.34550037125737554, 0.45618928940411535, 0.056644342426863364]],
              [[0.23191017298177985, -0.1579448481986213, 0.6645070750751277],
               [-0.4458454454812168, 0.49230407899616413, 0.02787320584323877]],
              [[0.11093267658619343, -0.09214407886227868, 0.5953019764377736],
               [-0.5389608090240382, 0.5216828349817498, 0.0007531325336833746]],
              [[0.02945427019394353, -0.04899699316848291, 0.5202528136068675],
               [-0.6148640436351586, 0.5394312753029628, -0.02358655928710888]]],
        "x": [[0.9914803859195365, -0.51156328716407, 0.21135603405273629],
              [0.9774771325445224, -0.5302054478748276, 0.14187542946413748],
              [0.9629897054342677, -0.5522030183729909, 0.05492730425917496],
              [0.9539868483083825, -0.5770458377934297, -0.027651276766887212],
              [0.9509548819226649, -0.6038394841865863, -0.08349095568618091]],
        "grad_W": [[-0.5376446169265996, 0.3353359854565282, 0.1517713292718198],
                   [-0.14163295786315738, 0.11973511881154307, -0.003079007334002238]],
        "grad_x": [-0.004769927527962826, 0.017420106912309552, -0.2968970817838781],
    },
    "adam": {
        "kwargs": {"optimizer": "adam", "lr": 0.1},
        "losses": [0.388654997497053, 0.18829937954610154, 0.10391387225121025,
                   0.11377558559968942, 0.14096462404495663, 0.13436450009077366],
        "W": [[[0.40000000196615315, -0.20000000378352642, 0.700000003814583],
               [-0.29999999819994216, 0.49999999540797524, 5.921208801051847e-09]],
              [[0.30191636062648497, -0.10044650912750881, 0.6021194059279901],
               [-0.387018356552674, 0.5849906549213586, -0.08257517387415719]],
              [[0.2164963813218322, -0.013865708984365968, 0.508625533061398],
               [-0.45464051476138884, 0.6362600775737067, -0.14221399779159088]],
              [[0.1628536112148639, 0.017439513181960638, 0.4181886123918705],
               [-0.5017917843901983, 0.6481652210793244, -0.18090070781742168]],
              [[0.1436908922225728, -0.00033549334642041934, 0.32896919475704334],
               [-0.5300576755610655, 0.629178960948254, -0.20250016898013165]]],
        "x": [[0.9000000117376195, -0.5999999913519408, 0.15000000258772606],
              [0.804665502278148, -0.6958921904524791, 0.054409470067056015],
              [0.7461935703874686, -0.7881930994014607, -0.023118981072563882],
              [0.7384374091087006, -0.8691419641707991, -0.06619605927687582],
              [0.7566300829039209, -0.9277345010119045, -0.08066185053750273]],
        "grad_W": [[-0.2984513143656452, 0.40111306546531683, 0.1006744372289764],
                   [-0.13801630186111039, 0.1650781207471329, -0.03708811062469374]],
        "grad_x": [-0.039715283012034516, -0.026468622439307653, -0.1336905518211429],
    },
    # no zero_grad() in the loop: gradients accumulate across steps
    "no_zero_grad_sgd": {
        "kwargs": {"optimizer": "sgd", "lr": 0.05, "zero_grad": False},
        "losses": [0.388654997497053, 0.3429446786426359, 0.26531905533418804,
                   0.17921748234857576, 0.11537303075251067, 0.10455243331219902],
        "W": [None, None, None, None,
              [[0.15690092980884165, -0.1174974330783078, 0.6241653190018539],
               [-0.5065454602834668, 0.5130440516517403, 0.010455671525038986]]],
        "x": [None, None, None, None,
              [0.9559334699976682, -0.5670169602571614, 0.0026414332358668125]],
        "grad_W": [[-0.12388606724602516, 0.06859750725214031, 0.12440403243521461],
                   [-0.04596350730856812, 0.06978028594819244, 0.0022440651015542745]],
        "grad_x": [-0.05481184187144569, 0.048788028350894554, -0.10077389089578842],
    },
    "no_zero_grad_momentum": {
        "kwargs": {"optimizer": "momentum", "lr": 0.05, "zero_grad": False},
        "losses": [0.388654997497053, 0.3429446786426359, 0.2339673665163509,
                   0.11624722400530754, 0.1686865231983301, 0.5219073068603378],
        "W": [None, None, None, None,
              [[-0.18841244632258342, 0.06238297472129161, 0.4250452562246269],
               [-0.8567941737462749, 0.6414157689250153, -0.09679966117576227]]],
        "x": [None, None, None, None,
              [0.9024248042001478, -0.6444058441759227, -0.254229285968309]],
        "grad_W": [[-1.0308911566104075, 0.7217096155183699, 0.3648137830537812],
                   [-0.24269488354289875, 0.17922298448235094, 0.0007367147809752249]],
        "grad_x": [0.2750957027693206, -0.11936216433293403, -0.46015282958868386],
    },
    # clip_grad_norm_(params, 0.5) after backward() in every step (the first norm is 0.976)
    "clip_norm": {
        "kwargs": {"optimizer": "sgd", "lr": 0.1, "clip_norm": 0.5},
        "losses": [0.388654997497053, 0.34184973489095216, 0.2987247393169348,
                   0.25911842694980264, 0.22309219563005325, 0.19088130058748592],
        "W": [[[0.4739336171720847, -0.2864543035618052, 0.7865645864658198],
               [-0.2284715862629161, 0.41116076298603527, 0.09134458836155955]],
              None, None, None,
              [[0.35517559046588826, -0.2227408450964743, 0.72819801068826],
               [-0.3225404877189505, 0.4453040355437937, 0.0654790354508275]]],
        "x": [[0.995633654979201, -0.5059262427682827, 0.23019477329557841],
              None, None, None,
              [0.9824251987790982, -0.5264439599380404, 0.1465113747134272]],
        "grad_W": [[0.3839154948235039, -0.21220875500336364, 0.19230018675272814],
                   [0.24095066065693432, -0.07462281833650403, 0.05864958832242745]],
        "grad_x": [0.012830142913639542, 0.06751738277315614, 0.25227367242148235],
    },
    # clip_grad_norm_(params, 0.3, norm_type=inf) with momentum
    "clip_norm_inf": {
        "kwargs": {"optimizer": "momentum", "lr": 0.1, "clip_norm": 0.3, "norm_type": "inf"},
        "losses": [0.388654997497053, 0.33944914575172835, 0.25685697136761254,
                   0.1688851259363649, 0.10828822254032702, 0.10823652685220604],
        "W": [None, None, None, None,
              [[0.13399484778744833, -0.1037591405425239, 0.6075938938130474],
               [-0.5096064575967719, 0.5097831787591234, 0.010396676408317486]]],
        "x": [None, None, None, None,
              [0.9599247709517051, -0.5717484708264221, -0.00898486653451241]],
        "grad_W": [[-0.19516630290222348, 0.11145468322007518, 0.12359636693274281],
                   [-0.05032795725150215, 0.07122671725702936, 0.0015964232488720653]],
        "grad_x": [-0.0583738443936918, 0.05139188125924159, -0.13993632527128552],
    },
    # clip_grad_value_(params, 0.2) with Adam
    "clip_value": {
        "kwargs": {"optimizer": "adam", "lr": 0.1, "clip_value": 0.2},
        "losses": [0.388654997497053, 0.1882993823611065, 0.10342633486935675,
                   0.11843408388536134, 0.13683136904223317, 0.12323618250753185],
        "W": [[[0.40000000499999977, -0.20000000499999976, 0.7000000049999998],
               [-0.29999999500000024, 0.49999999500000025, 5.921208801051847e-09]],
              [[0.3000000100000002, -0.1000000100000002, 0.6001855549498533],
               [-0.3996983386255991, 0.5862101065246431, -0.08257517428354116]],
              None, None,
              [[0.1713857935680988, 0.006353817758235996, 0.31654713314254357],
               [-0.5262617717308966, 0.6178922984676416, -0.20177153017885227]]],
        "x": [[0.9000000117376195, -0.5999999913519408, 0.15000000499999977],
              [0.8046655017186984, -0.6958921906104847, 0.050000010000000206],
              None, None,
              [0.7558425938285556, -0.9226039879252077, -0.06206465237647463]],
        "grad_W": [[-0.2593400869317293, 0.35966872096744695, 0.08741927758360063],
                   [-0.13389335609555825, 0.15853851969531163, -0.03800250179530659]],
        "grad_x": [-0.04663558340485255, -0.025881903230347114, -0.11532131069764645],
    },
}  # fmt: skip


@pytest.mark.parametrize("case", list(TORCH))
def test_optimize_matches_torch_trajectory(case):
    ref = TORCH[case]
    tol = {"rtol": 1e-12, "atol": 1e-12}
    r = analysis.optimize(OPT_EXPR, OPT_INPUTS, wrt=["W", "x"], steps=5, **ref["kwargs"])
    assert len(r.losses) == 6
    np.testing.assert_allclose(r.losses, ref["losses"], **tol, err_msg=f"{case}: losses")
    np.testing.assert_allclose(r.final["W"][0], ref["W"][4], **tol, err_msg=f"{case}: W")
    np.testing.assert_allclose(r.final["x"][0], ref["x"][4], **tol, err_msg=f"{case}: x")
    np.testing.assert_allclose(r.final["W"][1], ref["grad_W"], **tol, err_msg=f"{case}: grad W")
    np.testing.assert_allclose(r.final["x"][1], ref["grad_x"], **tol, err_msg=f"{case}: grad x")
    assert list(r.final) == ["W", "x"], "y is not in --wrt: it is not optimised"
    # the parameters after each of the first steps
    for k in range(1, 5):
        if ref["W"][k - 1] is None:
            continue
        rk = analysis.optimize(OPT_EXPR, OPT_INPUTS, wrt=["W", "x"], steps=k, **ref["kwargs"])
        np.testing.assert_allclose(
            rk.final["W"][0], ref["W"][k - 1], **tol, err_msg=f"{case}: W after {k} steps"
        )
        np.testing.assert_allclose(
            rk.final["x"][0], ref["x"][k - 1], **tol, err_msg=f"{case}: x after {k} steps"
        )
        np.testing.assert_allclose(rk.losses, ref["losses"][: k + 1], **tol)


def test_optimize_does_not_modify_the_given_values():
    given = {"x": np.array([0.0, 1.0])}
    analysis.optimize("sum((x-3)**2)", given, steps=3, lr=0.1)
    np.testing.assert_array_equal(given["x"], [0.0, 1.0])


def test_optimize_zero_grad_false_accumulates():
    # sum(x^2) with sgd, lr 0.1 from x = 1: with zero_grad, x <- 0.8 x each step;
    # without it the gradient is the running sum 2 (x0 + x1 + ...).
    on = analysis.optimize("sum(x**2)", {"x": [1.0]}, steps=3, lr=0.1)
    off = analysis.optimize("sum(x**2)", {"x": [1.0]}, steps=3, lr=0.1, zero_grad=False)
    np.testing.assert_allclose(on.final["x"][0], [0.8**3])
    x, acc, xs = 1.0, 0.0, [1.0]
    for _ in range(3):
        acc += 2 * x
        x -= 0.1 * acc
        xs.append(x)
    np.testing.assert_allclose(off.final["x"][0], [x], rtol=1e-14)
    np.testing.assert_allclose(off.losses, [v * v for v in xs], rtol=1e-14)
    np.testing.assert_allclose(off.final["x"][1], [2 * x], rtol=1e-14)  # a fresh final grad


def test_optimize_losses_and_zero_steps():
    r = analysis.optimize("sum((x-3)**2)", {"x": [1.0]}, steps=0)
    assert r.losses == [4.0]
    np.testing.assert_array_equal(r.final["x"][0], [1.0])
    np.testing.assert_array_equal(r.final["x"][1], [-4.0])
    j = r.to_json()
    assert set(j) >= {"expr", "optimizer", "lr", "steps", "losses", "final"}
    assert j["final"]["x"] == {"value": [1.0], "grad": [-4.0]}


def test_optimize_rejects_bad_options():
    for kwargs in (
        {"optimizer": "rmsprop"},
        {"steps": -1},
        {"lr": 0.0},
        {"clip_norm": 1.0, "clip_value": 1.0},
    ):
        with pytest.raises(GradcliError) as info:
            analysis.optimize("sum(x**2)", {"x": [1.0]}, **kwargs)
        assert info.value.kind == "input", kwargs
    with pytest.raises(GradcliError) as info:
        analysis.optimize("x * x", {"x": [1.0, 2.0]}, steps=1)
    assert info.value.kind == "shape" and "sum(" in info.value.message


# --------------------------------------------------------------------------------------------
# 8. graph
# --------------------------------------------------------------------------------------------

GRAPH_EXPR = "h = a*b; sum(h + b * 2)"
GRAPH_INPUTS = {"a": [1.0, 2.0], "b": [3.0, 4.0]}


def test_graph_nodes_ops_inputs_and_grads():
    g = analysis.graph(GRAPH_EXPR, GRAPH_INPUTS)
    nodes = {n.id: n for n in g.nodes}
    assert len(nodes) == len(g.nodes), "node ids are unique"
    by_label = {n.label: n for n in g.nodes if n.label}
    a, b, h = by_label["a"], by_label["b"], by_label["h"]
    assert a.op == "input" and b.op == "input" and a.inputs == [] and b.inputs == []
    assert h.op == "mul" and h.inputs == [a.id, b.id]
    out = nodes[g.output]
    assert out.op == "sum" and out.value.shape == () and float(out.value) == 3 + 8 + 6 + 8
    # every node's inputs are nodes listed before it (a topological order)
    position = {n.id: k for k, n in enumerate(g.nodes)}
    for n in g.nodes:
        for i in n.inputs:
            assert i in nodes and position[i] < position[n.id], (n, i)
    ops = sorted(n.op for n in g.nodes)
    assert ops == sorted(["input", "input", "mul", "constant", "mul", "add", "sum"]), ops
    const = next(n for n in g.nodes if n.op == "constant")
    assert float(const.value) == 2.0 and const.grad is None
    # grads are the retained gradients of the summed output
    np.testing.assert_array_equal(a.grad, [3.0, 4.0])  # b
    np.testing.assert_array_equal(b.grad, [1.0 + 2.0, 2.0 + 2.0])  # a + 2
    np.testing.assert_array_equal(h.grad, [1.0, 1.0])
    assert float(out.grad) == 1.0
    r = gradcli.evaluate(GRAPH_EXPR, GRAPH_INPUTS)
    np.testing.assert_array_equal(r.grads["a"], a.grad)
    np.testing.assert_array_equal(r.grads["b"], b.grad)
    np.testing.assert_array_equal(r.intermediates["h"][1], h.grad)


def test_graph_json_shape():
    j = analysis.graph(GRAPH_EXPR, GRAPH_INPUTS).to_json()
    assert isinstance(j["output"], int)
    ids = [n["id"] for n in j["nodes"]]
    assert j["output"] in ids
    for n in j["nodes"]:
        assert set(n) >= {"id", "op", "shape", "value", "grad", "inputs"}
        assert all(i in ids for i in n["inputs"])
    mul = next(n for n in j["nodes"] if n.get("label") == "h")
    assert mul["shape"] == [2] and mul["value"] == [3.0, 8.0] and mul["grad"] == [1.0, 1.0]


def test_graph_of_a_non_scalar_output_sums_it_and_respects_wrt():
    g = analysis.graph("a * b", {"a": [1.0, 2.0], "b": [3.0, 4.0]}, wrt=["a"])
    by_label = {n.label: n for n in g.nodes if n.label}
    np.testing.assert_array_equal(by_label["a"].grad, [3.0, 4.0])
    assert by_label["b"].grad is None, "b is not in --wrt: no gradient"
    out = next(n for n in g.nodes if n.id == g.output)
    np.testing.assert_array_equal(out.grad, [1.0, 1.0])


def test_graph_dot_structure_and_graphviz():
    g = analysis.graph("ক = a*b; sum(ক + b * 2)  # a binding with a non-ASCII name", GRAPH_INPUTS)
    dot = g.to_dot()
    lines = dot.strip().splitlines()
    assert lines[0].startswith("digraph") and lines[0].endswith("{")
    assert lines[-1] == "}"
    node_lines = [ln for ln in lines if "[label=" in ln]
    edge_lines = [ln for ln in lines if "->" in ln]
    assert len(node_lines) == len(g.nodes), "one node line per node"
    assert len(edge_lines) == sum(len(n.inputs) for n in g.nodes), "one edge per input"
    for n in g.nodes:
        assert sum(ln.strip().startswith(f"n{n.id} [") for ln in node_lines) == 1
        for i in n.inputs:
            assert f"  n{i} -> n{n.id};" in lines
    assert any("ক = mul" in ln for ln in node_lines)
    if shutil.which("dot") is None:
        pytest.skip("graphviz `dot` is not installed: DOT checked by structure only")
    proc = subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"dot -Tsvg rejected the output: {proc.stderr}\n{dot}"
    assert "<svg" in proc.stdout
    assert proc.stdout.count('class="node"') == len(g.nodes)
    assert proc.stdout.count('class="edge"') == len(edge_lines)


# --------------------------------------------------------------------------------------------
# 9. functions: one registry, every entry documented
# --------------------------------------------------------------------------------------------

# docs/language.md, "Function calls": every name (and alias) the language must offer.
DOCUMENTED_FUNCTIONS = """
abs sign sqrt square exp expm1 log log2 log10 log1p sin cos tan arcsin arccos arctan sinh cosh
tanh arcsinh arccosh arctanh sigmoid relu softplus floor ceil round asin acos atan asinh acosh
atanh maximum minimum arctan2 atan2 pow clip where sum mean prod max min amax amin norm
logsumexp var std softmax log_softmax reshape transpose flatten squeeze expand_dims concatenate
concat stack flip matmul dot outer trace diag det inv solve zeros ones full eye arange linspace
rand randn einsum slogdet cholesky pinv
mse_loss l1_loss huber_loss binary_cross_entropy binary_cross_entropy_with_logits cross_entropy
nll_loss
erf gelu leaky_relu elu softsign logaddexp cumsum cumprod tril triu
""".split()  # noqa: SIM905


def test_every_function_has_signature_summary_and_derivative():
    from gradcli.language import FUNCTIONS

    missing = sorted(set(DOCUMENTED_FUNCTIONS) - set(FUNCTIONS))
    assert not missing, f"functions of docs/language.md without an entry in the registry: {missing}"
    lacking = []
    for key, f in FUNCTIONS.items():
        for attr in ("signature", "summary", "derivative"):
            text = getattr(f, attr, None)
            if not isinstance(text, str) or not text.strip():
                lacking.append(f"{key}.{attr}")
        assert f.signature.startswith(f.name + "("), f.signature
        assert key == f.name or key in f.aliases, f"{key} is registered as {f.name}"
    assert not lacking, f"registry entries with an empty text: {lacking}"


def test_every_primitive_has_a_doc():
    E.concatenate([E.tensor([1.0]), E.tensor([2.0])])  # primitives made on first use
    E.stack([E.tensor([1.0]), E.tensor([2.0])])
    undocumented = sorted(name for name, op in E.OPS.items() if not (op.doc or "").strip())
    assert not undocumented, f"primitives without a derivative doc: {undocumented}"


def test_functions_derivative_text_comes_from_the_engine_rules():
    from gradcli.language import FUNCTIONS

    for name in ("sin", "tanh", "matmul", "softmax", "solve", "prod", "norm"):
        assert FUNCTIONS[name].derivative == E.OPS[name].doc, name


def test_create_graph_gives_each_leaf_its_own_grad_tensor() -> None:
    # torch 2.13: after (x + y).sum().backward(create_graph=True), x.grad is not y.grad
    # and zeroing one leaves the other
    import gradcli

    x = gradcli.tensor([1.0, 2.0], requires_grad=True)
    y = gradcli.tensor([3.0, 4.0], requires_grad=True)
    (x * y + y).sum().backward(create_graph=True)
    assert x.grad is not y.grad
    assert x.grad.tolist() == [3.0, 4.0] and y.grad.tolist() == [2.0, 3.0]
    x.grad.sum().backward()  # x.grad = y: d/dy of sum(x.grad) adds 1 to y.grad
    assert y.grad.tolist() == [3.0, 4.0]
    x.grad.zero_()
    assert x.grad.tolist() == [0.0, 0.0] and y.grad.tolist() == [3.0, 4.0]
    a = gradcli.tensor([1.0, 2.0], requires_grad=True)
    b = gradcli.tensor([3.0, 4.0], requires_grad=True)
    (a + b).sum().backward(create_graph=True)
    assert a.grad is not b.grad
    a.grad.zero_()
    assert b.grad.tolist() == [1.0, 1.0]
