"""Gradient oracle for ``gradcli.engine``: every function family against finite differences.

Each test sweeps one family over functions, shapes and argument forms. For every case the
engine's gradient (``backward`` with a fixed random upstream gradient) is compared with
central finite differences of the engine's own forward pass (``tests/gradcheck.py``), and the
forward value is compared with a NumPy reference. Inputs are drawn inside each function's
smooth domain (away from kinks, ties and singularities); the behaviour *at* those points is
the business of ``test_engine_conventions.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check_grads, to_numpy
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

from gradcli import autograd as E
from gradcli.errors import ShapeError

# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def fn(name: str):
    """``E.<name>``, failing (not skipping) with a clear message when the engine lacks it."""
    assert hasattr(E, name), f"gradcli.engine has no function {name!r}"
    return getattr(E, name)


def assert_value(out, expected, what, rtol=1e-10, atol=1e-12):
    out = np.asarray(out)
    expected = np.asarray(expected, dtype=np.float64)
    assert out.shape == expected.shape, (
        f"{what}: forward value has shape {out.shape}, NumPy gives {expected.shape}"
    )
    np.testing.assert_allclose(
        out, expected, rtol=rtol, atol=atol, err_msg=f"{what}: forward value differs from NumPy"
    )


def sid(shape) -> str:
    return "x".join(map(str, shape)) if shape else "scalar"


# --------------------------------------------------------------------------------------------
# NumPy references
# --------------------------------------------------------------------------------------------


def np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def np_softplus(x):
    return np.log1p(np.exp(x))


def np_relu(x):
    return np.maximum(x, 0.0)


def np_logsumexp(x, axis=None, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    r = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    if not keepdims:
        r = np.squeeze(r, axis=axis) if axis is not None else r.reshape(())
    return r


def np_norm(x, ord=2, axis=None, keepdims=False):
    a = np.abs(x)
    if ord == np.inf:
        return np.max(a, axis=axis, keepdims=keepdims)
    return np.sum(a**ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)


def np_softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def np_log_softmax(x, axis=-1):
    return np.log(np_softmax(x, axis=axis))


def np_erf(x):
    from math import erf

    return np.vectorize(erf, otypes=[float])(x)


# --------------------------------------------------------------------------------------------
# 1. elementwise, one argument
# --------------------------------------------------------------------------------------------

INTEGERS = list(range(-3, 4))
HALF_INTEGERS = [k + 0.5 for k in range(-4, 4)]

UNARY = {
    "abs": (np.abs, away0()),
    "sign": (np.sign, away0()),
    "sqrt": (np.sqrt, real(0.5, 3.0)),
    "square": (np.square, real()),
    "exp": (np.exp, real()),
    "expm1": (np.expm1, real()),
    "log": (np.log, real(0.5, 3.0)),
    "log2": (np.log2, real(0.5, 3.0)),
    "log10": (np.log10, real(0.5, 3.0)),
    "log1p": (np.log1p, real(-0.5, 2.0)),
    "sin": (np.sin, real(-3.0, 3.0)),
    "cos": (np.cos, real(-3.0, 3.0)),
    "tan": (np.tan, real(-1.2, 1.2)),
    "arcsin": (np.arcsin, real(-0.9, 0.9)),
    "arccos": (np.arccos, real(-0.9, 0.9)),
    "arctan": (np.arctan, real(-3.0, 3.0)),
    "sinh": (np.sinh, real()),
    "cosh": (np.cosh, real()),
    "tanh": (np.tanh, real()),
    "arcsinh": (np.arcsinh, real(-3.0, 3.0)),
    "arccosh": (np.arccosh, real(1.1, 3.0)),
    "arctanh": (np.arctanh, real(-0.9, 0.9)),
    "sigmoid": (np_sigmoid, real(-4.0, 4.0)),
    "relu": (np_relu, away0()),
    "softplus": (np_softplus, real(-4.0, 4.0)),
    "silu": (lambda x: x * np_sigmoid(x), real(-4.0, 4.0)),
    "erf": (np_erf, real(-3.0, 3.0)),
    "gelu": (lambda x: x * 0.5 * (1.0 + np_erf(x / np.sqrt(2.0))), real(-4.0, 4.0)),
    "leaky_relu": (lambda x: np.where(x > 0, x, 0.01 * x), away0()),
    "elu": (lambda x: np.where(x > 0, x, np.expm1(x)), away0()),
    "softsign": (lambda x: x / (1.0 + np.abs(x)), real()),
    "floor": (np.floor, avoiding(INTEGERS, lo=-2.5, hi=2.5)),
    "ceil": (np.ceil, avoiding(INTEGERS, lo=-2.5, hi=2.5)),
    "round": (np.round, avoiding(HALF_INTEGERS, lo=-2.5, hi=2.5)),
}
# Piecewise constant: their own output does not depend on x smoothly, so they are checked
# through ``f(x) * x`` (whose gradient is exactly f(x) when f' = 0).
PIECEWISE_CONSTANT = {"sign", "floor", "ceil", "round"}
SHAPES = [(), (3,), (2, 3)]


@pytest.mark.parametrize("shape", SHAPES, ids=sid)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, shape):
    ref, sampler = UNARY[name]
    x = sampler(rng_for("unary", name, shape), shape)
    f = fn(name)
    if name in PIECEWISE_CONSTANT:
        out = check_grads(lambda t: f(t) * t, x, name=f"{name}(x) * x")
        assert_value(out, ref(x) * x, f"{name}(x) * x")
    else:
        out = check_grads(lambda t: f(t), x, name=f"{name}(x)")
        assert_value(out, ref(x), f"{name}(x)")


UNARY_OPERATORS = {
    "-x": (lambda t: -t, np.negative),
    "+x": (lambda t: +t, np.positive),
    "x.T": (lambda t: t.T, np.transpose),
}


@pytest.mark.parametrize("shape", SHAPES, ids=sid)
@pytest.mark.parametrize("op", sorted(UNARY_OPERATORS))
def test_unary_operators(op, shape):
    f, ref = UNARY_OPERATORS[op]
    x = real()(rng_for("unop", op, shape), shape)
    out = check_grads(f, x, name=op)
    assert_value(out, ref(x), op)


# --------------------------------------------------------------------------------------------
# 2. elementwise, two arguments, with broadcasting
# --------------------------------------------------------------------------------------------


BINARY = {
    "a + b": (lambda a, b: a + b, np.add, independent(real(), real())),
    "a - b": (lambda a, b: a - b, np.subtract, independent(real(), real())),
    "a * b": (lambda a, b: a * b, np.multiply, independent(real(), real())),
    "a / b": (lambda a, b: a / b, np.divide, independent(real(), away0(0.5, 2.0))),
    "a ** b": (lambda a, b: a**b, np.power, independent(real(0.5, 2.0), real())),
    "pow": (lambda a, b: fn("pow")(a, b), np.power, independent(real(0.5, 2.0), real())),
    "maximum": (lambda a, b: fn("maximum")(a, b), np.maximum, joint_distinct),
    "minimum": (lambda a, b: fn("minimum")(a, b), np.minimum, joint_distinct),
    "arctan2": (lambda a, b: fn("arctan2")(a, b), np.arctan2, independent(away0(), away0())),
    "logaddexp": (lambda a, b: fn("logaddexp")(a, b), np.logaddexp, independent(real(), real())),
}
SHAPE_PAIRS = [
    ((), ()),
    ((3,), (3,)),
    ((2, 3), (2, 3)),
    ((2, 3), (3,)),
    ((3,), (2, 3)),
    ((2, 1), (1, 3)),
    ((), (2, 3)),
    ((2, 3), ()),
    ((4, 1, 3), (2, 1)),
]


@pytest.mark.parametrize(
    "shapes", SHAPE_PAIRS, ids=[f"{sid(a)}-with-{sid(b)}" for a, b in SHAPE_PAIRS]
)
@pytest.mark.parametrize("op", list(BINARY))
def test_binary(op, shapes):
    f, ref, sampler = BINARY[op]
    a, b = sampler(rng_for("binary", op, shapes), *shapes)
    out = check_grads(f, a, b, name=f"{op} with shapes {shapes}")
    assert_value(out, ref(a, b), op)


# A Tensor with a Python float on either side.
C = 1.7
WITH_FLOAT = {
    "x + c": (lambda t: t + C, lambda x: x + C, real()),
    "c + x": (lambda t: C + t, lambda x: C + x, real()),
    "x - c": (lambda t: t - C, lambda x: x - C, real()),
    "c - x": (lambda t: C - t, lambda x: C - x, real()),
    "x * c": (lambda t: t * C, lambda x: x * C, real()),
    "c * x": (lambda t: C * t, lambda x: C * x, real()),
    "x / c": (lambda t: t / C, lambda x: x / C, real()),
    "c / x": (lambda t: C / t, lambda x: C / x, away0(0.5, 2.0)),
    "x ** 2.0 (x of any sign)": (lambda t: t**2.0, lambda x: x**2.0, real()),
    "x ** 3.0 (x of any sign)": (lambda t: t**3.0, lambda x: x**3.0, real()),
    "x ** 0.5": (lambda t: t**0.5, lambda x: x**0.5, real(0.5, 3.0)),
    "x ** -1.5": (lambda t: t**-1.5, lambda x: x**-1.5, real(0.5, 3.0)),
    "c ** x": (lambda t: C**t, lambda x: C**x, real()),
    "pow(x, 2.0)": (lambda t: fn("pow")(t, 2.0), lambda x: x**2.0, real()),
    "pow(c, x)": (lambda t: fn("pow")(C, t), lambda x: C**x, real()),
    "maximum(x, c)": (
        lambda t: fn("maximum")(t, C),
        lambda x: np.maximum(x, C),
        avoiding([C], 0.3, 0.0, 3.5),
    ),
    "maximum(c, x)": (
        lambda t: fn("maximum")(C, t),
        lambda x: np.maximum(C, x),
        avoiding([C], 0.3, 0.0, 3.5),
    ),
    "minimum(x, c)": (
        lambda t: fn("minimum")(t, C),
        lambda x: np.minimum(x, C),
        avoiding([C], 0.3, 0.0, 3.5),
    ),
    "arctan2(x, c)": (lambda t: fn("arctan2")(t, C), lambda x: np.arctan2(x, C), real()),
    "arctan2(c, x)": (lambda t: fn("arctan2")(C, t), lambda x: np.arctan2(C, x), away0()),
}


@pytest.mark.parametrize("shape", SHAPES, ids=sid)
@pytest.mark.parametrize("op", list(WITH_FLOAT))
def test_binary_with_python_float(op, shape):
    f, ref, sampler = WITH_FLOAT[op]
    x = sampler(rng_for("withfloat", op, shape), shape)
    out = check_grads(f, x, name=op)
    assert_value(out, ref(x), op)


# --------------------------------------------------------------------------------------------
# 3. clip and where
# --------------------------------------------------------------------------------------------


def _clip_float_bounds(rng):
    x = avoiding([-0.5, 0.8], 0.15)(rng, (2, 3))
    return (lambda t: fn("clip")(t, -0.5, 0.8)), [x], [0], np.clip(x, -0.5, 0.8)


def _clip_tensor_bounds(rng):
    lo = real(-1.0, -0.2)(rng, (3,))
    hi = real(0.2, 1.0)(rng, (2, 1))
    lo_b, hi_b = np.broadcast_to(lo, (2, 3)), np.broadcast_to(hi, (2, 3))
    x = real()(rng, (2, 3))
    for _ in range(1000):
        bad = (np.abs(x - lo_b) < 0.1) | (np.abs(x - hi_b) < 0.1)
        if not bad.any():
            break
        x = np.where(bad, rng.uniform(-2, 2, size=(2, 3)), x)
    return (lambda t, a, b: fn("clip")(t, a, b)), [x, lo, hi], [0, 1, 2], np.clip(x, lo, hi)


def _clip_scalar_x(rng):
    x = np.array(1.3)
    return (lambda t: fn("clip")(t, -0.5, 0.8)), [x], [0], np.clip(x, -0.5, 0.8)


def _where_comparison(rng):
    c, a, b = real()(rng, (2, 3)), real()(rng, (2, 3)), real()(rng, (2, 3))
    c = np.where(np.abs(c) < 0.1, 0.5, c)
    f = lambda tc, ta, tb: fn("where")(tc > 0.0, ta, tb)  # noqa: E731
    return f, [c, a, b], [1, 2], np.where(c > 0, a, b)


def _where_broadcast(rng):
    c, a, b = real()(rng, (2, 1)), real()(rng, (1, 3)), real()(rng, (2, 3))
    c = np.where(np.abs(c) < 0.1, 0.5, c)
    f = lambda tc, ta, tb: fn("where")(tc > 0.0, ta, tb)  # noqa: E731
    return f, [c, a, b], [1, 2], np.where(c > 0, a, b)


def _where_broadcast_scalar(rng):
    c, a, b = np.array([[1.0, -1.0, 1.0], [-1.0, 1.0, 1.0]]), real()(rng, (3,)), np.array(0.7)
    f = lambda tc, ta, tb: fn("where")(tc > 0.0, ta, tb)  # noqa: E731
    return f, [c, a, b], [1, 2], np.where(c > 0, a, b)


def _where_truthy_cond(rng):
    # cond is truthy where nonzero, whatever its sign
    c = np.array([[0.0, 2.0, -3.0], [1.0, 0.0, -0.5]])
    a, b = real()(rng, (2, 3)), real()(rng, (2, 3))
    f = lambda tc, ta, tb: fn("where")(tc, ta, tb)  # noqa: E731
    return f, [c, a, b], [1, 2], np.where(c != 0, a, b)


def _where_float_branch(rng):
    c, a = np.array([1.0, -1.0, 2.0]), real()(rng, (3,))
    f = lambda tc, ta: fn("where")(tc > 0.0, ta, 0.0)  # noqa: E731
    return f, [c, a], [1], np.where(c > 0, a, 0.0)


def _where_float_first(rng):
    c, b = np.array([1.0, -1.0, 2.0]), real()(rng, (3,))
    f = lambda tc, tb: fn("where")(tc > 0.0, 1.5, tb)  # noqa: E731
    return f, [c, b], [1], np.where(c > 0, 1.5, b)


CLIP_WHERE = {
    "clip(x, -0.5, 0.8)": _clip_float_bounds,
    "clip(x, lo, hi) tensor bounds, broadcast": _clip_tensor_bounds,
    "clip(scalar x above hi)": _clip_scalar_x,
    "where(c > 0, a, b)": _where_comparison,
    "where(c > 0, a, b) broadcast 2x1, 1x3, 2x3": _where_broadcast,
    "where(c > 0, a, b) broadcast 2x3, 3, scalar": _where_broadcast_scalar,
    "where(c, a, b) cond truthy where nonzero": _where_truthy_cond,
    "where(c > 0, a, 0.0)": _where_float_branch,
    "where(c > 0, 1.5, b)": _where_float_first,
}


@pytest.mark.parametrize("case", list(CLIP_WHERE))
def test_clip_where(case):
    f, arrays, wrt, expected = CLIP_WHERE[case](rng_for("clipwhere", case))
    out = check_grads(f, *arrays, wrt=wrt, name=case)
    assert_value(out, expected, case)


# --------------------------------------------------------------------------------------------
# 4. reductions
# --------------------------------------------------------------------------------------------


def _red(name, ref, sampler, **kw):
    def call(t, axis, keepdims):
        return fn(name)(t, axis=axis, keepdims=keepdims, **kw)

    def reference(x, axis, keepdims):
        return ref(x, axis=axis, keepdims=keepdims, **kw)

    return call, reference, sampler


REDUCTIONS = {
    "sum": _red("sum", np.sum, real()),
    "mean": _red("mean", np.mean, real()),
    "prod": _red("prod", np.prod, away0(0.5, 1.5)),
    "max": _red("max", np.max, distinct_sampler()),
    "min": _red("min", np.min, distinct_sampler()),
    "logsumexp": _red("logsumexp", np_logsumexp, real()),
    "var": _red("var", np.var, real()),
    "var(ddof=1)": _red("var", np.var, real(), ddof=1),
    "std": _red("std", np.std, real()),
    "std(ddof=1)": _red("std", np.std, real(), ddof=1),
    "norm(ord=2)": _red("norm", np_norm, away0(), ord=2),
    "norm(ord=1)": _red("norm", np_norm, away0(), ord=1),
    "norm(ord=3)": _red("norm", np_norm, away0(), ord=3),
    "norm(ord=1.5)": _red("norm", np_norm, away0(), ord=1.5),
    "norm(ord=0.5)": _red("norm", np_norm, away0(), ord=0.5),
    "norm(ord=inf)": _red("norm", np_norm, distinct_abs_sampler, ord=np.inf),
}
AXES_FOR_SHAPE = {
    (): [None],
    (4,): [None, 0, -1],
    (2, 3): [None, 0, 1, -1, (0, 1)],
    (2, 3, 4): [None, 0, -1, (0, 1), (0, 2), (-1, 0)],
}
REDUCTION_CASES = [
    pytest.param(name, shape, axis, keepdims, id=f"{name}-{sid(shape)}-axis={axis}-kd={keepdims}")
    for name in REDUCTIONS
    for shape, axes in AXES_FOR_SHAPE.items()
    for axis in axes
    for keepdims in (False, True)
    # a 0-d or 1-element std / ddof=1 reduction is degenerate (sqrt at 0, or division by 0)
    if not (shape == () and (name.startswith("std") or "ddof=1" in name))
]


@pytest.mark.parametrize("name,shape,axis,keepdims", REDUCTION_CASES)
def test_reduction(name, shape, axis, keepdims):
    call, ref, sampler = REDUCTIONS[name]
    x = sampler(rng_for("reduce", name, shape, axis, keepdims), shape)
    what = f"{name}(x of shape {shape}, axis={axis}, keepdims={keepdims})"
    out = check_grads(lambda t: call(t, axis, keepdims), x, name=what)
    assert_value(out, ref(x, axis, keepdims), what)


def test_reduction_defaults():
    """Called with no keyword: axis=None, keepdims=False, ddof=0, ord=2."""
    x = away0()(rng_for("reduce-defaults"), (2, 3))
    for name, ref in [
        ("sum", np.sum),
        ("mean", np.mean),
        ("prod", np.prod),
        ("logsumexp", np_logsumexp),
        ("var", np.var),
        ("std", np.std),
        ("norm", np_norm),
    ]:
        out = check_grads(lambda t, name=name: fn(name)(t), x, name=f"{name}(x)")
        assert_value(out, ref(x), f"{name}(x)")
    y = distinct_sampler()(rng_for("reduce-defaults-maxmin"), (2, 3))
    for name, ref in [("max", np.max), ("min", np.min)]:
        out = check_grads(lambda t, name=name: fn(name)(t), y, name=f"{name}(x)")
        assert_value(out, ref(y), f"{name}(x)")


# --------------------------------------------------------------------------------------------
# 5. softmax and log_softmax
# --------------------------------------------------------------------------------------------

SOFTMAX_CASES = [
    pytest.param(name, shape, axis, id=f"{name}-{sid(shape)}-axis={axis}")
    for name in ("softmax", "log_softmax")
    for shape, axes in [
        ((3,), ["default", 0, -1]),
        ((2, 3), ["default", 0, 1, -1, -2]),
        ((2, 3, 4), ["default", 0, 1, 2, -1, -2]),
    ]
    for axis in axes
]


@pytest.mark.parametrize("name,shape,axis", SOFTMAX_CASES)
def test_softmax(name, shape, axis):
    x = real(-3.0, 3.0)(rng_for("softmax", name, shape, axis), shape)
    ref = {"softmax": np_softmax, "log_softmax": np_log_softmax}[name]
    if axis == "default":
        f, expected = (lambda t: fn(name)(t)), ref(x)
    else:
        f, expected = (lambda t: fn(name)(t, axis=axis)), ref(x, axis=axis)
    what = f"{name}(x of shape {shape}, axis={axis})"
    out = check_grads(f, x, name=what)
    assert_value(out, expected, what)


# --------------------------------------------------------------------------------------------
# 6. shape functions
# --------------------------------------------------------------------------------------------


def _one(call, ref, shape):
    return call, ref, [shape]


SHAPE_FUNCS = {
    # reshape
    "reshape(2x3 -> (3, 2))": _one(
        lambda t: fn("reshape")(t, (3, 2)), lambda x: x.reshape(3, 2), (2, 3)
    ),
    "reshape(2x3 -> (6,))": _one(lambda t: fn("reshape")(t, (6,)), lambda x: x.reshape(6), (2, 3)),
    "reshape(2x3 -> (-1,))": _one(
        lambda t: fn("reshape")(t, (-1,)), lambda x: x.reshape(-1), (2, 3)
    ),
    "reshape(2x3 -> (1, 6))": _one(
        lambda t: fn("reshape")(t, (1, 6)), lambda x: x.reshape(1, 6), (2, 3)
    ),
    "reshape(2x3 -> (3, -1))": _one(
        lambda t: fn("reshape")(t, (3, -1)), lambda x: x.reshape(3, -1), (2, 3)
    ),
    "reshape(2x3 -> (2, 1, 3))": _one(
        lambda t: fn("reshape")(t, (2, 1, 3)), lambda x: x.reshape(2, 1, 3), (2, 3)
    ),
    "reshape(6 -> (2, 3))": _one(
        lambda t: fn("reshape")(t, (2, 3)), lambda x: x.reshape(2, 3), (6,)
    ),
    "reshape(scalar -> (1,))": _one(lambda t: fn("reshape")(t, (1,)), lambda x: x.reshape(1), ()),
    "reshape(1x1 -> ())": _one(lambda t: fn("reshape")(t, ()), lambda x: x.reshape(()), (1, 1)),
    "reshape(2x3x4 -> (4, -1))": _one(
        lambda t: fn("reshape")(t, (4, -1)), lambda x: x.reshape(4, -1), (2, 3, 4)
    ),
    # transpose and .T
    "transpose(2x3)": _one(lambda t: fn("transpose")(t), np.transpose, (2, 3)),
    "transpose(2x3x4)": _one(lambda t: fn("transpose")(t), np.transpose, (2, 3, 4)),
    "transpose(2x3x4, (1, 0, 2))": _one(
        lambda t: fn("transpose")(t, (1, 0, 2)), lambda x: x.transpose(1, 0, 2), (2, 3, 4)
    ),
    "transpose(2x3x4, axes=(2, 0, 1))": _one(
        lambda t: fn("transpose")(t, axes=(2, 0, 1)), lambda x: x.transpose(2, 0, 1), (2, 3, 4)
    ),
    "transpose(2x3x4, (-1, 0, 1))": _one(
        lambda t: fn("transpose")(t, (-1, 0, 1)), lambda x: x.transpose(-1, 0, 1), (2, 3, 4)
    ),
    "transpose(3)": _one(lambda t: fn("transpose")(t), np.transpose, (3,)),
    "(2x3).T": _one(lambda t: t.T, lambda x: x.T, (2, 3)),
    "(3,).T": _one(lambda t: t.T, lambda x: x.T, (3,)),
    # flatten
    "flatten(2x3)": _one(lambda t: fn("flatten")(t), np.ravel, (2, 3)),
    "flatten(2x3x4)": _one(lambda t: fn("flatten")(t), np.ravel, (2, 3, 4)),
    "flatten(scalar)": _one(lambda t: fn("flatten")(t), np.ravel, ()),
    # squeeze
    "squeeze(1x3x1)": _one(lambda t: fn("squeeze")(t), np.squeeze, (1, 3, 1)),
    "squeeze(1x3x1, axis=0)": _one(
        lambda t: fn("squeeze")(t, axis=0), lambda x: np.squeeze(x, 0), (1, 3, 1)
    ),
    "squeeze(1x3x1, axis=2)": _one(
        lambda t: fn("squeeze")(t, axis=2), lambda x: np.squeeze(x, 2), (1, 3, 1)
    ),
    "squeeze(1x3x1, axis=-1)": _one(
        lambda t: fn("squeeze")(t, axis=-1), lambda x: np.squeeze(x, -1), (1, 3, 1)
    ),
    "squeeze(1x3x1, axis=(0, 2))": _one(
        lambda t: fn("squeeze")(t, axis=(0, 2)), lambda x: np.squeeze(x, (0, 2)), (1, 3, 1)
    ),
    "squeeze(1 -> scalar)": _one(lambda t: fn("squeeze")(t), np.squeeze, (1,)),
    "squeeze(2x3, nothing to squeeze)": _one(lambda t: fn("squeeze")(t), np.squeeze, (2, 3)),
    # expand_dims
    "expand_dims(2x3, 0)": _one(
        lambda t: fn("expand_dims")(t, 0), lambda x: np.expand_dims(x, 0), (2, 3)
    ),
    "expand_dims(2x3, 1)": _one(
        lambda t: fn("expand_dims")(t, 1), lambda x: np.expand_dims(x, 1), (2, 3)
    ),
    "expand_dims(2x3, 2)": _one(
        lambda t: fn("expand_dims")(t, 2), lambda x: np.expand_dims(x, 2), (2, 3)
    ),
    "expand_dims(2x3, -1)": _one(
        lambda t: fn("expand_dims")(t, -1), lambda x: np.expand_dims(x, -1), (2, 3)
    ),
    "expand_dims(2x3, (0, 3))": _one(
        lambda t: fn("expand_dims")(t, (0, 3)), lambda x: np.expand_dims(x, (0, 3)), (2, 3)
    ),
    "expand_dims(scalar, 0)": _one(
        lambda t: fn("expand_dims")(t, 0), lambda x: np.expand_dims(x, 0), ()
    ),
    # flip
    "flip(2x3)": _one(lambda t: fn("flip")(t), np.flip, (2, 3)),
    "flip(2x3, axis=0)": _one(lambda t: fn("flip")(t, axis=0), lambda x: np.flip(x, 0), (2, 3)),
    "flip(2x3, axis=1)": _one(lambda t: fn("flip")(t, axis=1), lambda x: np.flip(x, 1), (2, 3)),
    "flip(2x3, axis=-1)": _one(lambda t: fn("flip")(t, axis=-1), lambda x: np.flip(x, -1), (2, 3)),
    "flip(2x3, axis=(0, 1))": _one(
        lambda t: fn("flip")(t, axis=(0, 1)), lambda x: np.flip(x, (0, 1)), (2, 3)
    ),
    "flip(3)": _one(lambda t: fn("flip")(t), np.flip, (3,)),
    "flip(2x3x4, axis=(0, 2))": _one(
        lambda t: fn("flip")(t, axis=(0, 2)), lambda x: np.flip(x, (0, 2)), (2, 3, 4)
    ),
    # concatenate
    "concatenate([2x3, 4x3])": (
        lambda a, b: fn("concatenate")([a, b]),
        lambda a, b: np.concatenate([a, b]),
        [(2, 3), (4, 3)],
    ),
    "concatenate([2x3, 2x1, 2x2], axis=1)": (
        lambda a, b, c: fn("concatenate")([a, b, c], axis=1),
        lambda a, b, c: np.concatenate([a, b, c], axis=1),
        [(2, 3), (2, 1), (2, 2)],
    ),
    "concatenate((2x3, 2x2), axis=-1) tuple": (
        lambda a, b: fn("concatenate")((a, b), axis=-1),
        lambda a, b: np.concatenate((a, b), axis=-1),
        [(2, 3), (2, 2)],
    ),
    "concatenate([3, 2])": (
        lambda a, b: fn("concatenate")([a, b], axis=0),
        lambda a, b: np.concatenate([a, b], axis=0),
        [(3,), (2,)],
    ),
    "concatenate([x, x]) same tensor twice": (
        lambda a: fn("concatenate")([a, a, a * 2.0]),
        lambda a: np.concatenate([a, a, a * 2.0]),
        [(3,)],
    ),
    # stack
    "stack([2x3, 2x3])": (
        lambda a, b: fn("stack")([a, b]),
        lambda a, b: np.stack([a, b]),
        [(2, 3), (2, 3)],
    ),
    "stack([2x3, 2x3], axis=1)": (
        lambda a, b: fn("stack")([a, b], axis=1),
        lambda a, b: np.stack([a, b], axis=1),
        [(2, 3), (2, 3)],
    ),
    "stack([2x3, 2x3], axis=2)": (
        lambda a, b: fn("stack")([a, b], axis=2),
        lambda a, b: np.stack([a, b], axis=2),
        [(2, 3), (2, 3)],
    ),
    "stack([2x3, 2x3], axis=-1)": (
        lambda a, b: fn("stack")([a, b], axis=-1),
        lambda a, b: np.stack([a, b], axis=-1),
        [(2, 3), (2, 3)],
    ),
    "stack([3, 3, 3], axis=1)": (
        lambda a, b, c: fn("stack")([a, b, c], axis=1),
        lambda a, b, c: np.stack([a, b, c], axis=1),
        [(3,), (3,), (3,)],
    ),
    "stack([scalar, scalar])": (
        lambda a, b: fn("stack")([a, b]),
        lambda a, b: np.stack([a, b]),
        [(), ()],
    ),
    "stack((x, x)) same tensor twice": (
        lambda a: fn("stack")((a, a)),
        lambda a: np.stack((a, a)),
        [(2, 3)],
    ),
    # running sums and products along an axis (None: the flattened elements)
    "cumsum(2x3x4, axis=1)": _one(
        lambda t: fn("cumsum")(t, axis=1), lambda x: np.cumsum(x, 1), (2, 3, 4)
    ),
    "cumsum(2x3)": _one(lambda t: fn("cumsum")(t), np.cumsum, (2, 3)),
    "cumsum(scalar, axis=0)": _one(lambda t: fn("cumsum")(t, 0), lambda x: x, ()),
    "cumprod(2x3x4, axis=-1)": _one(
        lambda t: fn("cumprod")(t, axis=-1), lambda x: np.cumprod(x, -1), (2, 3, 4)
    ),
    "cumprod(4x3, axis=0)": _one(lambda t: fn("cumprod")(t, 0), lambda x: np.cumprod(x, 0), (4, 3)),
    "cumprod(2x3)": _one(lambda t: fn("cumprod")(t), np.cumprod, (2, 3)),
    # triangles of the last two axes
    "tril(3x4)": _one(lambda t: fn("tril")(t), np.tril, (3, 4)),
    "tril(4x3, k=-1)": _one(lambda t: fn("tril")(t, k=-1), lambda x: np.tril(x, -1), (4, 3)),
    "tril(2x3x3, k=1)": _one(lambda t: fn("tril")(t, 1), lambda x: np.tril(x, 1), (2, 3, 3)),
    "triu(3x4)": _one(lambda t: fn("triu")(t), np.triu, (3, 4)),
    "triu(2x4x3, k=-2)": _one(lambda t: fn("triu")(t, k=-2), lambda x: np.triu(x, -2), (2, 4, 3)),
}


@pytest.mark.parametrize("case", list(SHAPE_FUNCS))
def test_shape_functions(case):
    f, ref, shapes = SHAPE_FUNCS[case]
    rng = rng_for("shape", case)
    arrays = [real()(rng, s) for s in shapes]
    out = check_grads(f, *arrays, name=case)
    assert_value(out, ref(*arrays), case, rtol=0, atol=0)


# add_n: a long +/- chain as one node; the value must be the chain's, to the last bit
ADD_N_CASES = {
    "3 scalars": [(), (), ()],
    "(2,3) + (3,) - (2,1) + scalar": [(2, 3), (3,), (2, 1), ()],
    "(3,) grows to (4,3) by (4,1)": [(3,), (4, 1), (3,), (1, 3)],
    "40 terms of (2,)": [(2,)] * 40,
    "one term": [(2, 2)],
}


@pytest.mark.parametrize("case", list(ADD_N_CASES))
def test_add_n(case):
    shapes = ADD_N_CASES[case]
    rng = rng_for("add_n", case)
    arrays = [real()(rng, s) for s in shapes]
    negated = [False] + [i % 3 == 1 for i in range(1, len(arrays))]
    out = check_grads(lambda *ts: fn("add_n")(ts, negated), *arrays, name=f"add_n {case}")
    chain = E.tensor(arrays[0])
    for a, neg in zip(arrays[1:], negated[1:], strict=True):
        chain = E.subtract(chain, E.tensor(a)) if neg else E.add(chain, E.tensor(a))
    assert_value(out, chain.data, case, rtol=0, atol=0)


def test_add_n_of_one_tensor_many_times_and_shape_errors():
    x = E.tensor([1.0, 2.0], requires_grad=True)
    E.sum(fn("add_n")([x] * 1000, [False] + [True] * 499 + [False] * 500)).backward()
    assert x.grad.data.tolist() == [2.0, 2.0]  # 1 - 499 + 500
    with pytest.raises(ShapeError, match=r"sub: shapes \(2,\) and \(3,\)"):
        fn("add_n")([x, x, E.tensor([1.0, 2.0, 3.0])], [False, False, True])


# --------------------------------------------------------------------------------------------
# 7. indexing
# --------------------------------------------------------------------------------------------

ALL = slice(None)
INDEX_CASES = [
    # (shape, key, readable key)
    ((5,), 1, "[1]"),
    ((5,), -1, "[-1]"),
    ((5,), slice(1, 3), "[1:3]"),
    ((5,), slice(None, None, 2), "[::2]"),
    ((5,), slice(None, None, -1), "[::-1]"),
    ((5,), slice(4, 0, -2), "[4:0:-2]"),
    ((5,), slice(-3, None), "[-3:]"),
    ((5,), [0, 2, 2], "[[0, 2, 2]]"),
    ((5,), [-1, 0, -1, -1], "[[-1, 0, -1, -1]]"),
    ((5,), np.array([0, 2, 2]), "[array([0, 2, 2])]"),
    ((5,), np.array([[0, 1], [4, 4]]), "[array([[0, 1], [4, 4]])]"),
    ((5,), None, "[None]"),
    ((5,), Ellipsis, "[...]"),
    ((4, 5), 1, "[1]"),
    ((4, 5), -1, "[-1]"),
    ((4, 5), (ALL, 0), "[:, 0]"),
    ((4, 5), (0, slice(1, None)), "[0, 1:]"),
    ((4, 5), (-1, -2), "[-1, -2]"),
    ((4, 5), (slice(1, -1), slice(None, None, 2)), "[1:-1, ::2]"),
    ((4, 5), (slice(None, None, -1), slice(3, 0, -1)), "[::-1, 3:0:-1]"),
    ((4, 5), [0, 2, 2], "[[0, 2, 2]]"),
    ((4, 5), (ALL, [0, 3, 3]), "[:, [0, 3, 3]]"),
    ((4, 5), ([0, 1, 1], [2, 0, 2]), "[[0, 1, 1], [2, 0, 2]]"),
    ((4, 5), (None, ALL, 1), "[None, :, 1]"),
    ((4, 5), (1, None, slice(None, None, -1)), "[1, None, ::-1]"),
    ((4, 5), (ALL, None), "[:, None]"),
    ((4, 5), (Ellipsis, 1), "[..., 1]"),
    ((4, 5), (Ellipsis, None), "[..., None]"),
    ((2, 3, 4), (1, Ellipsis, 0), "[1, ..., 0]"),
    ((2, 3, 4), (Ellipsis, slice(None, None, -1)), "[..., ::-1]"),
    ((2, 3, 4), (ALL, None, slice(1, 3), [0, 3, 3]), "[:, None, 1:3, [0, 3, 3]]"),
    ((2, 3, 4), (-1, [2, 0, 2], slice(None, None, -2)), "[-1, [2, 0, 2], ::-2]"),
    ((), Ellipsis, "scalar[...]"),
    ((), None, "scalar[None]"),
]


@pytest.mark.parametrize(
    "shape,key,label",
    INDEX_CASES,
    ids=[f"{sid(s)}{label}" for s, _k, label in INDEX_CASES],
)
def test_indexing(shape, key, label):
    x = real()(rng_for("index", shape, label), shape)
    what = f"x{label} with x of shape {shape}"
    out = check_grads(lambda t: t[key], x, name=what)
    assert_value(out, x[key], what, rtol=0, atol=0)


# --------------------------------------------------------------------------------------------
# 8. matmul and linear algebra
# --------------------------------------------------------------------------------------------

MATMUL_SHAPES = [
    ((3,), (3,)),
    ((2, 3), (3,)),
    ((3,), (3, 4)),
    ((2, 3), (3, 4)),
    ((5, 2, 3), (3, 4)),
    ((5, 2, 3), (1, 3, 4)),
    ((2, 3), (5, 3, 4)),
    ((5, 2, 3), (5, 3, 4)),
    ((5, 2, 3), (3,)),
    ((3,), (5, 3, 4)),
    ((2, 1, 2, 3), (3, 3, 2)),
]


@pytest.mark.parametrize(
    "shapes", MATMUL_SHAPES, ids=[f"{sid(a)}@{sid(b)}" for a, b in MATMUL_SHAPES]
)
@pytest.mark.parametrize("form", ["a @ b", "matmul(a, b)"])
def test_matmul(form, shapes):
    rng = rng_for("matmul", shapes)
    a, b = real()(rng, shapes[0]), real()(rng, shapes[1])
    f = (lambda x, y: x @ y) if form == "a @ b" else (lambda x, y: fn("matmul")(x, y))
    what = f"{form} with shapes {shapes}"
    out = check_grads(f, a, b, name=what)
    assert_value(out, np.matmul(a, b), what)


def _lin(name, ref, shapes, sampler=None, **kw):
    def call(*ts):
        return fn(name)(*ts, **kw)

    def reference(*xs):
        return ref(*xs, **kw)

    return call, reference, shapes, sampler or real()


LINALG = {
    "dot(3, 3)": _lin("dot", np.dot, [(3,), (3,)]),
    "dot(2x3, 3x4)": _lin("dot", np.dot, [(2, 3), (3, 4)]),
    "dot(2x3, 3)": _lin("dot", np.dot, [(2, 3), (3,)]),
    "dot(3, 3x4)": _lin("dot", np.dot, [(3,), (3, 4)]),
    "outer(3, 4)": _lin("outer", np.outer, [(3,), (4,)]),
    "outer(1, 2)": _lin("outer", np.outer, [(1,), (2,)]),
    "trace(3x3)": _lin("trace", np.trace, [(3, 3)]),
    "trace(2x3)": _lin("trace", np.trace, [(2, 3)]),
    "trace(3x2)": _lin("trace", np.trace, [(3, 2)]),
    "diag(3)": _lin("diag", np.diag, [(3,)]),
    "diag(3, k=1)": _lin("diag", np.diag, [(3,)], k=1),
    "diag(3, k=-2)": _lin("diag", np.diag, [(3,)], k=-2),
    "diag(3x3)": _lin("diag", np.diag, [(3, 3)]),
    "diag(3x3, k=1)": _lin("diag", np.diag, [(3, 3)], k=1),
    "diag(3x3, k=-1)": _lin("diag", np.diag, [(3, 3)], k=-1),
    "diag(2x4, k=2)": _lin("diag", np.diag, [(2, 4)], k=2),
    "diag(4x2, k=-1)": _lin("diag", np.diag, [(4, 2)], k=-1),
    "det(1x1)": _lin("det", np.linalg.det, [(1, 1)], well_conditioned),
    "det(2x2)": _lin("det", np.linalg.det, [(2, 2)], well_conditioned),
    "det(3x3)": _lin("det", np.linalg.det, [(3, 3)], well_conditioned),
    "det(4x4) negative det": (
        lambda t: fn("det")(t[[1, 0, 2, 3]]),
        lambda x: np.linalg.det(x[[1, 0, 2, 3]]),
        [(4, 4)],
        well_conditioned,
    ),
    "det(batched 4x3x3)": _lin("det", np.linalg.det, [(4, 3, 3)], well_conditioned),
    "inv(1x1)": _lin("inv", np.linalg.inv, [(1, 1)], well_conditioned),
    "inv(2x2)": _lin("inv", np.linalg.inv, [(2, 2)], well_conditioned),
    "inv(3x3)": _lin("inv", np.linalg.inv, [(3, 3)], well_conditioned),
    "inv(batched 4x3x3)": _lin("inv", np.linalg.inv, [(4, 3, 3)], well_conditioned),
    "solve(3x3, 3)": _lin("solve", np.linalg.solve, [(3, 3), (3,)], well_conditioned),
    "solve(3x3, 3x2)": _lin("solve", np.linalg.solve, [(3, 3), (3, 2)], well_conditioned),
    "solve(batched 4x3x3, 4x3x2)": _lin(
        "solve", np.linalg.solve, [(4, 3, 3), (4, 3, 2)], well_conditioned
    ),
    "solve(batched 4x3x3, 3) numpy2 vector b": _lin(
        "solve", np.linalg.solve, [(4, 3, 3), (3,)], well_conditioned
    ),
    "solve(batched 4x3x3, 3x2) broadcast b": _lin(
        "solve", np.linalg.solve, [(4, 3, 3), (3, 2)], well_conditioned
    ),
    **{
        f"einsum({subs}, {'; '.join(map(sid, shapes))})": (
            lambda *ts, s=subs: fn("einsum")(s, *ts),
            lambda *xs, s=subs: np.einsum(s.replace(" ", ""), *xs),
            list(shapes),
            real(),
        )
        for subs, shapes in [
            ("ij,jk->ik", [(2, 3), (3, 4)]),
            ("ii->", [(3, 3)]),
            ("ii->i", [(3, 3)]),
            ("i,j->ij", [(3,), (4,)]),
            ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),
            ("ij->ji", [(2, 3)]),
            ("i,i->", [(4,)] * 2),
            ("ij->i", [(2, 3)]),
            ("ij", [(2, 3)]),
            ("ij,jk", [(2, 3), (3, 4)]),
            ("...ij,...jk->...ik", [(5, 2, 3), (1, 3, 4)]),
            ("...ij,jk->...ik", [(2, 5, 2, 3), (3, 4)]),
            ("ij,j->i", [(2, 3), (1,)]),
            ("iij,jk->ik", [(3, 3, 2), (2, 4)]),
            ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
            ("i j , j -> i", [(3, 2), (2,)]),
        ]
    },
    "einsum(...ij->ij) sums '...'": (
        lambda t: fn("einsum")("...ij->ij", t),
        lambda x: x.sum(axis=0),
        [(4, 2, 3)],
        real(),
    ),
    "slogdet(1x1)": (
        lambda t: fn("slogdet")(t).logabsdet,
        lambda x: np.linalg.slogdet(x)[1],
        [(1, 1)],
        well_conditioned,
    ),
    "slogdet(3x3)": (
        lambda t: fn("slogdet")(t).logabsdet,
        lambda x: np.linalg.slogdet(x)[1],
        [(3, 3)],
        well_conditioned,
    ),
    "slogdet(4x4) negative det": (
        lambda t: fn("slogdet")(t[[1, 0, 2, 3]])[1],
        lambda x: np.linalg.slogdet(x[[1, 0, 2, 3]])[1],
        [(4, 4)],
        well_conditioned,
    ),
    "slogdet(batched 4x3x3)": (
        lambda t: fn("slogdet")(t).logabsdet,
        lambda x: np.linalg.slogdet(x)[1],
        [(4, 3, 3)],
        well_conditioned,
    ),
    # cholesky reads the lower triangle: differentiated through a symmetric input, whose
    # perturbations are symmetric too (its gradient, torch's, is symmetric)
    **{
        f"cholesky(sym {sid(shape)})": (
            lambda t: fn("cholesky")((t + fn("swapaxes")(t, -1, -2)) * 0.5),
            lambda x: np.linalg.cholesky((x + np.swapaxes(x, -1, -2)) * 0.5),
            [shape],
            well_conditioned,
        )
        for shape in [(1, 1), (3, 3), (2, 4, 4)]
    },
    **{
        f"pinv({sid(shape)})": (
            lambda t: fn("pinv")(t),
            np.linalg.pinv,
            [shape],
            sampler,
        )
        for shape, sampler in [
            ((3, 3), well_conditioned),
            ((2, 4), real()),
            ((4, 2), real()),
            ((3, 2, 3), real()),
        ]
    },
}


@pytest.mark.parametrize("case", list(LINALG))
def test_linalg(case):
    f, ref, shapes, sampler = LINALG[case]
    rng = rng_for("linalg", case)
    # the first argument of det/inv/solve is the (well-conditioned) matrix; b is plain random
    arrays = [sampler(rng, s) if i == 0 else real()(rng, s) for i, s in enumerate(shapes)]
    out = check_grads(f, *arrays, name=case)
    assert_value(out, ref(*arrays), case, rtol=1e-9, atol=1e-12)


# --------------------------------------------------------------------------------------------
# 9. compositions: shared subexpressions, reuse of a leaf, multi-step graphs
# --------------------------------------------------------------------------------------------


def _mlp(W, x, b):
    return fn("sum")(fn("tanh")(W @ x + b) ** 2.0)


def _xent(z, y):
    return -fn("sum")(y * fn("log_softmax")(z, axis=-1)) / 2.0


def _diamond(x):
    a = fn("exp")(x)
    return fn("mean")((a * a + a) / (1.0 + a))


def _reuse(x):
    return x * x + fn("sin")(x) * x - x / (x * x + 1.0)


def _gram(x):
    return x @ x.T


def _norm_of_matmul(A, v):
    return fn("norm")(fn("matmul")(A, v)) + fn("var")(v) + fn("sum")(fn("logsumexp")(A, axis=0))


def _index_then_reduce(x):
    return fn("sum")(x[:, [0, 2, 2]] * x[::-1, 1:2], axis=0)


def _stack_of_exprs(x, y):
    return fn("stack")([x * y, fn("sin")(x), y**2.0, fn("maximum")(x, y + 10.0)], axis=0)


COMPOSITES = {
    "sum(tanh(W @ x + b) ** 2)": (_mlp, [(3, 4), (4,), (3,)]),
    "cross entropy with log_softmax": (_xent, [(2, 5), (2, 5)]),
    "diamond: exp feeds three places": (_diamond, [(2, 3)]),
    "leaf reused many times": (_reuse, [(2, 3)]),
    "x @ x.T (same leaf both sides)": (_gram, [(3, 4)]),
    "norm(A @ v) + var(v) + sum(logsumexp(A, axis=0))": (_norm_of_matmul, [(3, 4), (4,)]),
    "sum(x[:, [0,2,2]] * x[::-1, 1:2], axis=0)": (_index_then_reduce, [(3, 4)]),
    "stack of four expressions": (_stack_of_exprs, [(3,), (3,)]),
}


@pytest.mark.parametrize("case", list(COMPOSITES))
def test_composites(case):
    f, shapes = COMPOSITES[case]
    rng = rng_for("composite", case)
    arrays = [real(-1.5, 1.5)(rng, s) for s in shapes]
    check_grads(f, *arrays, name=case)


# --------------------------------------------------------------------------------------------
# 10. float32: values and gradients within float32 tolerance of float64
# --------------------------------------------------------------------------------------------

FLOAT32_CASES = {
    "exp": (lambda t: fn("exp")(t), [(2, 3)], real()),
    "tanh": (lambda t: fn("tanh")(t), [(2, 3)], real()),
    "sigmoid": (lambda t: fn("sigmoid")(t), [(2, 3)], real()),
    "log": (lambda t: fn("log")(t), [(2, 3)], real(0.5, 3.0)),
    "x * 2.5 + 1 (Python floats keep float32)": (lambda t: t * 2.5 + 1.0, [(2, 3)], real()),
    "sqrt(x) / x": (lambda t: fn("sqrt")(t) / t, [(2, 3)], real(0.5, 3.0)),
    "matmul": (lambda a, b: a @ b, [(2, 3), (3, 4)], real()),
    "sum(axis=0)": (lambda t: fn("sum")(t, axis=0), [(2, 3)], real()),
    "mean": (lambda t: fn("mean")(t), [(2, 3)], real()),
    "softmax": (lambda t: fn("softmax")(t, axis=-1), [(2, 3)], real()),
    "log_softmax": (lambda t: fn("log_softmax")(t, axis=0), [(2, 3)], real()),
    "logsumexp": (lambda t: fn("logsumexp")(t, axis=1), [(2, 3)], real()),
    "norm": (lambda t: fn("norm")(t), [(2, 3)], away0()),
    "inv": (lambda t: fn("inv")(t), [(3, 3)], well_conditioned),
    "indexing + reshape": (lambda t: fn("reshape")(t[[0, 0, 1]], (-1,)), [(2, 3)], real()),
}


@pytest.mark.parametrize("case", list(FLOAT32_CASES))
def test_float32_matches_float64(case):
    f, shapes, sampler = FLOAT32_CASES[case]
    rng = rng_for("float32", case)
    arrays = [sampler(rng, s) for s in shapes]
    arrays = [a.astype(np.float32).astype(np.float64) for a in arrays]  # same points in both

    results = {}
    for dtype in ("float64", "float32"):
        leaves = [E.tensor(a.astype(dtype), requires_grad=True, dtype=dtype) for a in arrays]
        for i, leaf in enumerate(leaves):
            assert to_numpy(leaf).dtype == np.dtype(dtype), (
                f"{case}: E.tensor(..., dtype={dtype!r}) gave dtype {to_numpy(leaf).dtype} "
                f"for input {i}"
            )
        out = f(*leaves)
        value = to_numpy(out)
        assert value.dtype == np.dtype(dtype), (
            f"{case}: forward value is {value.dtype} for {dtype} inputs"
        )
        v = rng_for("float32-v", case).standard_normal(value.shape)
        if value.shape == ():
            out.backward()
        else:
            out.backward(E.tensor(v.astype(dtype), dtype=dtype))
        grads = []
        for i, leaf in enumerate(leaves):
            assert leaf.grad is not None, f"{case}: input {i} has no gradient ({dtype})"
            g = to_numpy(leaf.grad)
            assert g.dtype == np.dtype(dtype), (
                f"{case}: gradient of input {i} is {g.dtype} for {dtype} inputs"
            )
            grads.append(g)
        results[dtype] = (value, grads)

    v64, g64 = results["float64"]
    v32, g32 = results["float32"]
    np.testing.assert_allclose(
        v32, v64, rtol=2e-5, atol=1e-6, err_msg=f"{case}: float32 value far from float64"
    )
    for i, (a, b) in enumerate(zip(g32, g64, strict=True)):
        np.testing.assert_allclose(
            a, b, rtol=2e-5, atol=1e-5, err_msg=f"{case}: float32 gradient of input {i}"
        )


# --------------------------------------------------------------------------------------------
# 11. losses (more cases, the options and the awkward points: test_fn_losses.py)
# --------------------------------------------------------------------------------------------


def _loss_difference(name, ref, shapes):
    def make(rng):
        x, t = real()(rng, shapes[0]), real()(rng, shapes[1])
        return (lambda a, b: fn(name)(a, b)), [x, t], [0, 1], np.mean(ref(x - t))

    return make


def _loss_bce(rng):
    x, t = real(0.1, 0.9)(rng, (2, 3)), real(0.0, 1.0)(rng, (2, 3))
    ref = -(t * np.log(x) + (1 - t) * np.log1p(-x))
    return (lambda a, b: fn("binary_cross_entropy")(a, b)), [x, t], [0, 1], np.mean(ref)


def _loss_bce_logits(rng):
    x, t = real(-4.0, 4.0)(rng, (2, 3)), real(0.0, 1.0)(rng, (2, 3))
    ref = (1 - t) * x + np.logaddexp(0.0, -x)
    f = fn("binary_cross_entropy_with_logits")
    return (lambda a, b: f(a, b)), [x, t], [0, 1], np.mean(ref)


def _loss_classes(name, shape):
    def make(rng):
        x = real(-3.0, 3.0)(rng, shape)
        t = rng.integers(0, shape[1], (shape[0],)).astype(float)
        logp = np_log_softmax(x, axis=1) if name == "cross_entropy" else x
        ref = -np.mean(logp[np.arange(shape[0]), t.astype(int)])
        return (lambda a, b: fn(name)(a, b)), [x, t], [0], ref

    return make


def _loss_probs(rng):
    x, p = real(-3.0, 3.0)(rng, (3, 4)), rng.dirichlet(np.ones(4), size=3)
    ref = -np.sum(p * np_log_softmax(x, axis=1)) / 3
    return (lambda a, b: fn("cross_entropy")(a, b)), [x, p], [0, 1], ref


LOSSES = {
    "mse_loss(x, t)": _loss_difference("mse_loss", np.square, [(2, 3), (2, 3)]),
    "mse_loss(x, t) broadcast 2x3 with 3": _loss_difference("mse_loss", np.square, [(2, 3), (3,)]),
    "l1_loss(x, t)": _loss_difference("l1_loss", np.abs, [(2, 3), (2, 3)]),
    "huber_loss(x, t)": _loss_difference(
        "huber_loss",
        lambda d: np.where(np.abs(d) < 1, 0.5 * d * d, np.abs(d) - 0.5),
        [(3, 2), (2,)],
    ),
    "binary_cross_entropy(p, t)": _loss_bce,
    "binary_cross_entropy_with_logits(x, t)": _loss_bce_logits,
    "cross_entropy(x, class indices)": _loss_classes("cross_entropy", (4, 3)),
    "cross_entropy(x, probabilities)": _loss_probs,
    "nll_loss(logp, class indices)": _loss_classes("nll_loss", (4, 3)),
}


@pytest.mark.parametrize("case", list(LOSSES))
def test_losses(case):
    f, arrays, wrt, expected = LOSSES[case](rng_for("losses", case))
    out = check_grads(f, *arrays, wrt=wrt, name=case)
    assert_value(out, expected, case)
