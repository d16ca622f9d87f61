"""docs/conventions.md, "Gradient conventions" at non-differentiable points — PyTorch's,
with exact numbers.

Every expected number here was checked against torch 2.x (``torch.relu``, ``torch.abs``,
``torch.clamp``, ``torch.maximum``, ``torch.amax``, ``torch.linalg.vector_norm``,
``torch.prod``, ``torch.pow``, ``torch.where``, ``torch.logsumexp``, ``torch.softmax``,
``torch.log_softmax``, ``torch.sigmoid``, ``torch.nn.functional.softplus``); torch is not
imported here. Also the autograd mechanics a PyTorch user relies on: ``.grad`` is None until
the first backward, gradients accumulate, repeated indices accumulate, a graph can be
backpropagated twice, and deep graphs do not hit the recursion limit.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from gradcheck import to_numpy

from gradcli import autograd as E

INF = np.inf
NAN = np.nan


def fn(name: str):
    assert hasattr(E, name), f"gradcli.engine has no function {name!r}"
    return getattr(E, name)


def leaf(values):
    return E.tensor(np.array(values, dtype=np.float64), requires_grad=True)


def grads_of(f, *values, upstream=None):
    """Value of ``f`` at fresh leaves and the gradient of every leaf.

    A 0-d output is backpropagated with ``backward()``; a non-scalar output with ``upstream``
    (default: ones, i.e. the gradient of its sum).
    """
    xs = [leaf(v) for v in values]
    out = f(*xs)
    value = to_numpy(out)
    if value.shape == () and upstream is None:
        out.backward()
    else:
        u = np.ones(value.shape) if upstream is None else np.array(upstream, dtype=np.float64)
        out.backward(E.tensor(u))
    gs = []
    for i, x in enumerate(xs):
        assert x.grad is not None, f"input {i} has .grad None after backward"
        gs.append(to_numpy(x.grad))
    return value, gs


def assert_exact(actual, expected, what):
    """Equal element for element, with inf and nan in the same places (and same signs)."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, (
        f"{what}: shape {actual.shape}, expected {expected.shape}"
    )
    np.testing.assert_allclose(
        actual,
        expected,
        rtol=1e-12,
        atol=1e-12,
        equal_nan=True,
        err_msg=f"{what}: got {actual!r}, expected {expected!r}",
    )


# --------------------------------------------------------------------------------------------
# relu, abs, sign/floor/ceil/round, comparisons
# --------------------------------------------------------------------------------------------


def test_relu_derivative_at_zero_is_zero():
    value, (g,) = grads_of(lambda x: fn("relu")(x), [-1.0, 0.0, 2.0])
    assert_exact(value, [0.0, 0.0, 2.0], "relu([-1, 0, 2])")
    assert_exact(g, [0.0, 0.0, 1.0], "d relu / dx at [-1, 0, 2]")


def test_relu_derivative_at_scalar_zero():
    _, (g,) = grads_of(lambda x: fn("relu")(x), 0.0)
    assert_exact(g, 0.0, "relu'(0)")


def test_abs_derivative_at_zero_is_zero():
    value, (g,) = grads_of(lambda x: fn("abs")(x), [-1.0, 0.0, 2.0])
    assert_exact(value, [1.0, 0.0, 2.0], "abs([-1, 0, 2])")
    assert_exact(g, [-1.0, 0.0, 1.0], "d abs / dx at [-1, 0, 2]")


PIECEWISE = ["sign", "floor", "ceil", "round"]
# includes the jump points of each function: 0 for sign, integers for floor/ceil, halves for round
JUMPS = [-1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 2.5, 0.3]


@pytest.mark.parametrize("name", PIECEWISE)
def test_piecewise_constant_pass_zero_gradient(name):
    """``x + f(x)`` has gradient exactly 1 everywhere, jump points included."""
    ref = {"sign": np.sign, "floor": np.floor, "ceil": np.ceil, "round": np.round}[name]
    value, (g,) = grads_of(lambda x: x + fn(name)(x), JUMPS)
    assert_exact(value, np.array(JUMPS) + ref(np.array(JUMPS)), f"x + {name}(x)")
    assert_exact(g, np.ones(len(JUMPS)), f"d(x + {name}(x))/dx")


@pytest.mark.parametrize("name", PIECEWISE)
def test_piecewise_constant_alone(name):
    """A leaf used only through f: backward works and the gradient is zeros (torch) or None."""
    x = leaf(JUMPS)
    out = fn("sum")(fn(name)(x))
    out.backward()
    if x.grad is not None:
        assert_exact(to_numpy(x.grad), np.zeros(len(JUMPS)), f"d sum({name}(x))/dx")


def test_round_is_half_to_even_like_numpy_and_torch():
    x = E.tensor(np.array([0.5, 1.5, 2.5, -0.5, -1.5]))
    assert_exact(to_numpy(fn("round")(x)), [0.0, 2.0, 2.0, -0.0, -2.0], "round at halves")


COMPARISONS = {
    "<": (lambda a, b: a < b, np.less),
    "<=": (lambda a, b: a <= b, np.less_equal),
    ">": (lambda a, b: a > b, np.greater),
    ">=": (lambda a, b: a >= b, np.greater_equal),
    "==": (lambda a, b: a == b, np.equal),
    "!=": (lambda a, b: a != b, np.not_equal),
}


@pytest.mark.parametrize("op", list(COMPARISONS))
def test_comparisons_give_0_1_and_pass_no_gradient(op):
    f, ref = COMPARISONS[op]
    a_vals = np.array([1.0, 2.0, 3.0])
    b_vals = np.array([2.0, 2.0, 2.0])
    a, b = leaf(a_vals), leaf(b_vals)
    c = f(a, b)
    expected = ref(a_vals, b_vals).astype(np.float64)
    assert to_numpy(c).dtype == np.float64, f"a {op} b: dtype {to_numpy(c).dtype}, not float64"
    assert_exact(to_numpy(c), expected, f"[1,2,3] {op} [2,2,2]")
    # used inside a differentiable expression: the comparison contributes nothing
    out = fn("sum")(a * c + b + c)
    out.backward()
    assert_exact(to_numpy(a.grad), expected, f"d sum(a*(a {op} b) + b + (a {op} b))/da")
    assert_exact(to_numpy(b.grad), np.ones(3), f"d sum(a*(a {op} b) + b + (a {op} b))/db")


@pytest.mark.parametrize("op", list(COMPARISONS))
def test_comparisons_with_python_floats(op):
    f, ref = COMPARISONS[op]
    vals = np.array([1.0, 2.0, 3.0])
    x = leaf(vals)
    assert_exact(to_numpy(f(x, 2.0)), ref(vals, 2.0).astype(float), f"x {op} 2.0")
    assert_exact(to_numpy(f(2.0, x)), ref(2.0, vals).astype(float), f"2.0 {op} x")


# --------------------------------------------------------------------------------------------
# sqrt, clip, maximum/minimum, max/min reductions
# --------------------------------------------------------------------------------------------


def test_sqrt_derivative_at_zero_is_inf():
    value, (g,) = grads_of(lambda x: fn("sqrt")(x), [0.0, 4.0])
    assert_exact(value, [0.0, 2.0], "sqrt([0, 4])")
    assert_exact(g, [INF, 0.25], "d sqrt / dx at [0, 4]")


def test_clip_inclusive_at_both_bounds():
    value, (g,) = grads_of(lambda x: fn("clip")(x, 1.0, 2.0), [0.0, 1.0, 1.5, 2.0, 3.0])
    assert_exact(value, [1.0, 1.0, 1.5, 2.0, 2.0], "clip([0, 1, 1.5, 2, 3], 1, 2)")
    assert_exact(g, [0.0, 1.0, 1.0, 1.0, 0.0], "d clip(x, 1, 2)/dx at [0, 1, 1.5, 2, 3]")


def test_clip_inclusive_with_tensor_bounds():
    # torch.clamp(x, lo, hi) with tensor bounds: x gets the gradient where lo <= x <= hi,
    # lo where x < lo, hi where x > hi (so at the bounds themselves only x gets it)
    _, (gx, glo, ghi) = grads_of(
        lambda x, lo, hi: fn("clip")(x, lo, hi),
        [0.0, 1.0, 1.5, 2.0, 3.0],
        [1.0] * 5,
        [2.0] * 5,
    )
    assert_exact(gx, [0.0, 1.0, 1.0, 1.0, 0.0], "d clip / dx (tensor bounds)")
    assert_exact(glo, [1.0, 0.0, 0.0, 0.0, 0.0], "d clip / dlo")
    assert_exact(ghi, [0.0, 0.0, 0.0, 0.0, 1.0], "d clip / dhi")


def test_clip_scalar_at_bound():
    _, (g,) = grads_of(lambda x: fn("clip")(x, -1.0, 1.0), 1.0)
    assert_exact(g, 1.0, "d clip(x, -1, 1)/dx at x = 1")
    _, (g,) = grads_of(lambda x: fn("clip")(x, -1.0, 1.0), -1.0)
    assert_exact(g, 1.0, "d clip(x, -1, 1)/dx at x = -1")


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_minimum_ties_split_evenly(name):
    _, (ga, gb) = grads_of(lambda a, b: fn(name)(a, b), [1.0, 2.0, 3.0], [1.0, 0.0, 3.0])
    if name == "maximum":
        assert_exact(ga, [0.5, 1.0, 0.5], "d maximum(a, b)/da at a=[1,2,3], b=[1,0,3]")
        assert_exact(gb, [0.5, 0.0, 0.5], "d maximum(a, b)/db")
    else:
        assert_exact(ga, [0.5, 0.0, 0.5], "d minimum(a, b)/da at a=[1,2,3], b=[1,0,3]")
        assert_exact(gb, [0.5, 1.0, 0.5], "d minimum(a, b)/db")


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_minimum_ties_with_broadcasting(name):
    # torch.maximum(x, b) with x=[1,1,0] (or [1,1,2] for minimum), b = 1 (0-d):
    # x gets [.5, .5, 0]; b collects .5 + .5 + 1 = 2
    xv = [1.0, 1.0, 0.0] if name == "maximum" else [1.0, 1.0, 2.0]
    value, (gx, gb) = grads_of(lambda x, b: fn(name)(x, b), xv, 1.0)
    assert_exact(value, [1.0, 1.0, 1.0], f"{name}({xv}, 1)")
    assert_exact(gx, [0.5, 0.5, 0.0], f"d {name}(x, b)/dx")
    assert_exact(gb, 2.0, f"d {name}(x, b)/db (b broadcast)")


def test_maximum_tie_with_python_float():
    _, (g,) = grads_of(lambda x: fn("maximum")(x, 0.0), [-1.0, 0.0, 1.0])
    assert_exact(g, [0.0, 0.5, 1.0], "d maximum(x, 0.0)/dx at [-1, 0, 1]")


def test_maximum_of_a_tensor_with_itself():
    _, (g,) = grads_of(lambda x: fn("maximum")(x, x), [1.0, -2.0])
    assert_exact(g, [1.0, 1.0], "d maximum(x, x)/dx (two halves of the same leaf)")


@pytest.mark.parametrize(
    "name,values,expected",
    [
        ("max", [1.0, 3.0, 3.0], [0.0, 0.5, 0.5]),
        ("min", [1.0, 1.0, 3.0], [0.5, 0.5, 0.0]),
        ("max", [2.0, 2.0, 2.0], [1 / 3, 1 / 3, 1 / 3]),
        ("max", [[1.0, 3.0], [3.0, 0.0]], [[0.0, 0.5], [0.5, 0.0]]),
        ("min", [5.0], [1.0]),
    ],
)
def test_max_min_reduction_split_ties_evenly(name, values, expected):
    value, (g,) = grads_of(lambda x: fn(name)(x), values)
    assert_exact(value, getattr(np, name)(np.array(values)), f"{name}({values})")
    assert_exact(g, expected, f"d {name}({values})/dx")


@pytest.mark.parametrize("keepdims", [False, True])
def test_max_min_reduction_ties_along_axis(keepdims):
    x = [[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]]
    value, (g,) = grads_of(lambda t: fn("max")(t, axis=1, keepdims=keepdims), x)
    assert_exact(value, [[3.0], [2.0]] if keepdims else [3.0, 2.0], "max(x, axis=1)")
    assert_exact(g, [[0.0, 0.5, 0.5], [0.5, 0.5, 0.0]], "d max(x, axis=1)/dx")

    x = [[1.0, 3.0, 3.0], [1.0, 2.0, 0.0]]
    value, (g,) = grads_of(lambda t: fn("min")(t, axis=0, keepdims=keepdims), x)
    assert_exact(value, [[1.0, 2.0, 0.0]] if keepdims else [1.0, 2.0, 0.0], "min(x, axis=0)")
    assert_exact(g, [[0.5, 0.0, 0.0], [0.5, 1.0, 1.0]], "d min(x, axis=0)/dx")


def test_max_reduction_ties_with_upstream_gradient():
    x = [[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]]
    _, (g,) = grads_of(lambda t: fn("max")(t, axis=-1), x, upstream=[2.0, -4.0])
    assert_exact(g, [[0.0, 1.0, 1.0], [-2.0, -2.0, 0.0]], "d max(x, axis=-1)/dx, upstream [2,-4]")


# --------------------------------------------------------------------------------------------
# norm and prod
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ord", [2, 1, 3, 0.5, INF], ids=lambda o: f"ord={o}")
def test_norm_of_zero_vector_has_zero_gradient(ord):
    value, (g,) = grads_of(lambda x: fn("norm")(x, ord=ord), [0.0, 0.0, 0.0])
    assert_exact(value, 0.0, f"norm(zeros, ord={ord})")
    assert_exact(g, [0.0, 0.0, 0.0], f"d norm(zeros, ord={ord})/dx")


@pytest.mark.parametrize("ord", [2, 1, 3, INF], ids=lambda o: f"ord={o}")
def test_norm_zero_row_along_axis(ord):
    value, (g,) = grads_of(lambda x: fn("norm")(x, ord=ord, axis=1), [[0.0, 0.0], [3.0, 4.0]])
    expected_value = {2: 5.0, 1: 7.0, 3: (27.0 + 64.0) ** (1 / 3), INF: 4.0}[ord]
    row = {
        2: [0.6, 0.8],
        1: [1.0, 1.0],
        3: [9.0 / 91.0 ** (2 / 3), 16.0 / 91.0 ** (2 / 3)],
        INF: [0.0, 1.0],
    }[ord]
    assert_exact(value, [0.0, expected_value], f"norm([[0,0],[3,4]], ord={ord}, axis=1)")
    assert_exact(g, [[0.0, 0.0], row], f"d norm(x, ord={ord}, axis=1)/dx")


def test_norm_inf_ties_split_evenly():
    # torch.linalg.vector_norm(ord=inf) splits among the tied maxima of |x|, with their signs
    _, (g,) = grads_of(lambda x: fn("norm")(x, ord=INF), [3.0, -3.0, 1.0])
    assert_exact(g, [0.5, -0.5, 0.0], "d norm([3, -3, 1], inf)/dx")


@pytest.mark.parametrize(
    "values,expected_value,expected_grad",
    [
        ([2.0, 5.0, 3.0], 30.0, [15.0, 6.0, 10.0]),
        ([2.0, 0.0, 3.0], 0.0, [0.0, 6.0, 0.0]),
        ([0.0, 2.0, 0.0], 0.0, [0.0, 0.0, 0.0]),
        ([0.0, 0.0, 0.0], 0.0, [0.0, 0.0, 0.0]),
        ([0.0], 0.0, [1.0]),
        ([-2.0, 0.0, 3.0, 0.5], 0.0, [0.0, -3.0, 0.0, 0.0]),
    ],
)
def test_prod_exact_with_zeros(values, expected_value, expected_grad):
    value, (g,) = grads_of(lambda x: fn("prod")(x), values)
    assert_exact(value, expected_value, f"prod({values})")
    assert_exact(g, expected_grad, f"d prod({values})/dx")


def test_prod_with_zeros_along_axis():
    x = [[2.0, 0.0, 3.0], [1.0, 2.0, 3.0], [0.0, 2.0, 0.0]]
    value, (g,) = grads_of(lambda t: fn("prod")(t, axis=1), x)
    assert_exact(value, [0.0, 6.0, 0.0], "prod(x, axis=1)")
    assert_exact(g, [[0.0, 6.0, 0.0], [6.0, 3.0, 2.0], [0.0, 0.0, 0.0]], "d prod(x, axis=1)/dx")


def test_prod_with_zeros_along_axis0_keepdims():
    x = [[2.0, 0.0, 3.0], [1.0, 2.0, 0.0]]
    value, (g,) = grads_of(lambda t: fn("prod")(t, axis=0, keepdims=True), x)
    assert_exact(value, [[2.0, 0.0, 0.0]], "prod(x, axis=0, keepdims=True)")
    assert_exact(g, [[1.0, 2.0, 0.0], [2.0, 0.0, 3.0]], "d prod(x, axis=0, keepdims=True)/dx")


# --------------------------------------------------------------------------------------------
# x ** y at x = 0, as torch.pow
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "y,value,dx,dy",
    [
        (2.0, 0.0, 0.0, 0.0),
        (1.0, 0.0, 1.0, 0.0),
        (0.0, 1.0, 0.0, 0.0),
        (0.5, 0.0, INF, 0.0),
        (3.0, 0.0, 0.0, 0.0),
        (1.5, 0.0, 0.0, 0.0),
    ],
)
@pytest.mark.parametrize("form", ["x ** y", "pow(x, y)"])
def test_pow_at_zero_base_matches_torch(form, y, value, dx, dy):
    def f(a, b):
        return a**b if form == "x ** y" else fn("pow")(a, b)

    v, (gx, gy) = grads_of(f, 0.0, y)
    assert_exact(v, value, f"0 ** {y}")
    assert_exact(gx, dx, f"d (x ** y)/dx at x=0, y={y}")
    assert_exact(gy, dy, f"d (x ** y)/dy at x=0, y={y} (torch masks log(0) to 0 for y >= 0)")


def test_pow_at_zero_base_vectorised():
    v, (gx, gy) = grads_of(lambda a, b: a**b, [0.0, 0.0, 0.0, 0.0, 2.0], [2.0, 1.0, 0.0, 0.5, 3.0])
    assert_exact(v, [0.0, 0.0, 1.0, 0.0, 8.0], "x ** y")
    assert_exact(gx, [0.0, 1.0, 0.0, INF, 12.0], "d (x ** y)/dx")
    assert_exact(gy, [0.0, 0.0, 0.0, 0.0, 8.0 * math.log(2.0)], "d (x ** y)/dy")


@pytest.mark.parametrize(
    "exponent,dx", [(2.0, 0.0), (1.0, 1.0), (0.0, 0.0), (0.5, INF), (3.0, 0.0)]
)
def test_pow_zero_base_python_float_exponent(exponent, dx):
    v, (g,) = grads_of(lambda a: a**exponent, 0.0)
    assert_exact(v, 0.0**exponent, f"0 ** {exponent}")
    assert_exact(g, dx, f"d (x ** {exponent})/dx at 0")


def test_pow_python_float_exponent_zero_gives_zero_gradient_everywhere():
    _, (g,) = grads_of(lambda a: a**0.0, [0.0, 1.0, -2.0])
    assert_exact(g, [0.0, 0.0, 0.0], "d (x ** 0.0)/dx")


def test_pow_python_float_zero_base():
    # torch.pow(0.0, y): gradient w.r.t. y masked to 0 where y >= 0
    v, (g,) = grads_of(lambda b: 0.0**b, [0.0, 1.0, 2.0])
    assert_exact(v, [1.0, 0.0, 0.0], "0.0 ** y")
    assert_exact(g, [0.0, 0.0, 0.0], "d (0.0 ** y)/dy")


def test_pow_negative_base_integer_exponent():
    # torch: d/dx x**2 at x=-2 is -4 (no nan from log of a negative number)
    v, (g,) = grads_of(lambda a: a**2.0, [-2.0, -0.5])
    assert_exact(v, [4.0, 0.25], "x ** 2.0 at negative x")
    assert_exact(g, [-4.0, -1.0], "d (x ** 2.0)/dx at negative x")


# --------------------------------------------------------------------------------------------
# numerical stability at |x| = 1000
# --------------------------------------------------------------------------------------------


def _finite(what, *arrays):
    for a in arrays:
        assert np.all(np.isfinite(a)), f"{what}: non-finite numbers in {a!r}"


def test_logsumexp_large():
    v, (g,) = grads_of(lambda x: fn("logsumexp")(x), [1000.0, 1000.0])
    _finite("logsumexp([1000, 1000])", v, g)
    assert_exact(v, 1000.0 + math.log(2.0), "logsumexp([1000, 1000])")
    assert_exact(g, [0.5, 0.5], "d logsumexp([1000, 1000])/dx")

    v, (g,) = grads_of(lambda x: fn("logsumexp")(x), [1000.0, -1000.0, 0.0])
    _finite("logsumexp([1000, -1000, 0])", v, g)
    assert_exact(v, 1000.0, "logsumexp([1000, -1000, 0])")
    assert_exact(g, [1.0, 0.0, 0.0], "d logsumexp([1000, -1000, 0])/dx")

    v, (g,) = grads_of(lambda x: fn("logsumexp")(x), [-1000.0, -1000.0])
    _finite("logsumexp([-1000, -1000])", v, g)
    assert_exact(v, -1000.0 + math.log(2.0), "logsumexp([-1000, -1000])")
    assert_exact(g, [0.5, 0.5], "d logsumexp([-1000, -1000])/dx")


def test_logsumexp_large_along_axis_keepdims():
    x = [[1000.0, 1000.0], [-1000.0, 0.0]]
    v, (g,) = grads_of(lambda t: fn("logsumexp")(t, axis=1, keepdims=True), x)
    _finite("logsumexp(axis=1)", v, g)
    assert_exact(v, [[1000.0 + math.log(2.0)], [0.0]], "logsumexp(x, axis=1, keepdims=True)")
    assert_exact(g, [[0.5, 0.5], [0.0, 1.0]], "d logsumexp(x, axis=1)/dx")


def test_softmax_large():
    v, (g,) = grads_of(lambda x: fn("softmax")(x), [1000.0, -1000.0, 0.0], upstream=[1, 2, 3])
    _finite("softmax([1000, -1000, 0])", v, g)
    assert_exact(v, [1.0, 0.0, 0.0], "softmax([1000, -1000, 0])")
    assert_exact(g, [0.0, 0.0, 0.0], "d softmax([1000,-1000,0]) . [1,2,3] / dx")

    v, (g,) = grads_of(lambda x: fn("softmax")(x), [1000.0, 1000.0, -1000.0], upstream=[1, 2, 3])
    _finite("softmax([1000, 1000, -1000])", v, g)
    assert_exact(v, [0.5, 0.5, 0.0], "softmax([1000, 1000, -1000])")
    assert_exact(g, [-0.25, 0.25, 0.0], "d softmax([1000,1000,-1000]) . [1,2,3] / dx")


def test_log_softmax_large():
    v, (g,) = grads_of(lambda x: fn("log_softmax")(x), [1000.0, -1000.0, 0.0])
    _finite("log_softmax([1000, -1000, 0])", v, g)
    assert_exact(v, [0.0, -2000.0, -1000.0], "log_softmax([1000, -1000, 0])")
    assert_exact(g, [-2.0, 1.0, 1.0], "d sum(log_softmax([1000, -1000, 0]))/dx")

    v, (g,) = grads_of(lambda x: fn("log_softmax")(x), [1000.0, 1000.0, -1000.0])
    _finite("log_softmax([1000, 1000, -1000])", v, g)
    lg2 = math.log(2.0)
    assert_exact(v, [-lg2, -lg2, -2000.0 - lg2], "log_softmax([1000, 1000, -1000])")
    assert_exact(g, [-0.5, -0.5, 1.0], "d sum(log_softmax([1000, 1000, -1000]))/dx")


def test_softmax_large_along_axis0():
    x = [[1000.0, 0.0], [-1000.0, 0.0]]
    v, (g,) = grads_of(lambda t: fn("log_softmax")(t, axis=0), x)
    _finite("log_softmax(axis=0)", v, g)
    lg2 = math.log(2.0)
    assert_exact(v, [[0.0, -lg2], [-2000.0, -lg2]], "log_softmax(x, axis=0)")
    assert_exact(g, [[-1.0, 0.0], [1.0, 0.0]], "d sum(log_softmax(x, axis=0))/dx")


def test_sigmoid_large():
    v, (g,) = grads_of(lambda x: fn("sigmoid")(x), [1000.0, -1000.0, 0.0])
    _finite("sigmoid([1000, -1000, 0])", v, g)
    assert_exact(v, [1.0, 0.0, 0.5], "sigmoid([1000, -1000, 0])")
    assert_exact(g, [0.0, 0.0, 0.25], "d sigmoid / dx at [1000, -1000, 0]")


def test_softplus_large():
    v, (g,) = grads_of(lambda x: fn("softplus")(x), [1000.0, -1000.0, 0.0])
    _finite("softplus([1000, -1000, 0])", v, g)
    assert_exact(v, [1000.0, 0.0, math.log(2.0)], "softplus([1000, -1000, 0])")
    assert_exact(g, [1.0, 0.0, 0.5], "d softplus / dx at [1000, -1000, 0]")


def test_stable_functions_on_scalars():
    for name, x, value, grad in [
        ("sigmoid", 1000.0, 1.0, 0.0),
        ("sigmoid", -1000.0, 0.0, 0.0),
        ("softplus", 1000.0, 1000.0, 1.0),
        ("softplus", -1000.0, 0.0, 0.0),
    ]:
        v, (g,) = grads_of(lambda t, name=name: fn(name)(t), x)
        assert_exact(v, value, f"{name}({x})")
        assert_exact(g, grad, f"{name}'({x})")


# --------------------------------------------------------------------------------------------
# where: PyTorch's nan pitfall
# --------------------------------------------------------------------------------------------


def test_where_sqrt_at_zero_gives_nan_gradient_like_torch():
    # the unselected branch still backpropagates 0 * sqrt'(0) = 0 * inf = nan
    v, (g,) = grads_of(lambda x: fn("where")(x > 0.0, fn("sqrt")(x), 0.0), [0.0, 4.0])
    assert_exact(v, [0.0, 2.0], "where(x > 0, sqrt(x), 0)")
    assert np.isnan(g[0]), f"d where(x > 0, sqrt(x), 0)/dx at x=0: got {g[0]!r}, torch gives nan"
    assert_exact(g[1], 0.25, "d where(x > 0, sqrt(x), 0)/dx at x=4")


def test_where_passes_no_gradient_to_cond():
    c = leaf([1.0, 0.0, -2.0])
    a, b = leaf([1.0, 2.0, 3.0]), leaf([4.0, 5.0, 6.0])
    out = fn("sum")(fn("where")(c, a, b) * c)
    out.backward()
    # cond is truthy where nonzero: picks a, b, a; c's gradient comes only from "* c"
    assert_exact(to_numpy(a.grad), [1.0, 0.0, -2.0], "d/da")
    assert_exact(to_numpy(b.grad), [0.0, 0.0, 0.0], "d/db")
    assert_exact(to_numpy(c.grad), [1.0, 5.0, 3.0], "d/dc (only through the product)")


# --------------------------------------------------------------------------------------------
# autograd mechanics
# --------------------------------------------------------------------------------------------


def test_repeated_index_accumulates():
    _, (g,) = grads_of(lambda x: fn("sum")(x[[0, 0, 1]]), [1.0, 2.0, 3.0])
    assert_exact(g, [2.0, 1.0, 0.0], "d sum(x[[0, 0, 1]])/dx")
    _, (g,) = grads_of(lambda x: x[[0, 0, 1]], [1.0, 2.0, 3.0], upstream=[1.0, 2.0, 3.0])
    assert_exact(g, [3.0, 3.0, 0.0], "x[[0, 0, 1]] backpropagated with [1, 2, 3]")


def test_repeated_index_accumulates_2d():
    x = np.arange(6.0).reshape(2, 3)
    _, (g,) = grads_of(lambda t: fn("sum")(t[:, [2, 2, 0]]), x)
    assert_exact(g, [[1.0, 0.0, 2.0], [1.0, 0.0, 2.0]], "d sum(x[:, [2, 2, 0]])/dx")
    _, (g,) = grads_of(lambda t: fn("sum")(t[[1, 1], [0, 0]]), x)
    assert_exact(g, [[0.0, 0.0, 0.0], [2.0, 0.0, 0.0]], "d sum(x[[1, 1], [0, 0]])/dx")


def test_grad_is_none_before_backward_and_for_constants():
    x = leaf([1.0, 2.0])
    c = E.tensor(np.array([3.0, 4.0]))
    assert x.grad is None, "a leaf's .grad must be None before any backward"
    fn("sum")(x * c).backward()
    assert_exact(to_numpy(x.grad), [3.0, 4.0], "d sum(x * c)/dx")
    assert c.grad is None, "a tensor without requires_grad gets no .grad"


def test_tensor_defaults_to_float64():
    for data in ([1, 2, 3], 3, [[1.5, 2.0]], np.array([1, 2], dtype=np.int32)):
        t = E.tensor(data)
        assert to_numpy(t).dtype == np.float64, f"E.tensor({data!r}) has dtype {t.data.dtype}"
    t = E.tensor([1, 2], dtype="float32")
    assert to_numpy(t).dtype == np.float32, "E.tensor(..., dtype='float32') is not float32"


def test_backward_accepts_ndarray_and_tensor_gradient():
    for upstream in (np.array([1.0, -2.0]), E.tensor(np.array([1.0, -2.0]))):
        x = leaf([3.0, 4.0])
        (x * x).backward(upstream)
        assert_exact(to_numpy(x.grad), [6.0, -16.0], "x*x backpropagated with [1, -2]")


def test_backward_twice_on_fresh_graphs_accumulates():
    x = leaf([1.0, 2.0, 3.0])
    fn("sum")(x * x).backward()
    assert_exact(to_numpy(x.grad), [2.0, 4.0, 6.0], "after one backward")
    fn("sum")(x * x).backward()
    assert_exact(to_numpy(x.grad), [4.0, 8.0, 12.0], "after two backwards (accumulated)")
    fn("sum")(x * 3.0).backward()
    assert_exact(to_numpy(x.grad), [7.0, 11.0, 15.0], "after a third, different backward")


def test_second_backward_on_same_graph_gives_same_contribution():
    """No stale intermediate buffers: two backwards through one graph = 2 x one backward."""

    def build(x, W, b):
        h = fn("tanh")(W @ x + b)
        z = h * h + fn("exp")(h) * x[0] + fn("sum")(h[[0, 0, 2]])
        return fn("sum")(fn("softmax")(z) * fn("log1p")(h * h)) + fn("max")(z) + fn("norm")(h)

    rng = np.random.default_rng(7)
    xv, Wv, bv = rng.standard_normal(4), rng.standard_normal((3, 4)), rng.standard_normal(3)

    once = [leaf(xv), leaf(Wv), leaf(bv)]
    build(*once).backward()
    g_once = [to_numpy(t.grad).copy() for t in once]

    twice = [leaf(xv), leaf(Wv), leaf(bv)]
    out = build(*twice)
    out.backward(retain_graph=True)
    out.backward()
    for name, t, g1 in zip("xWb", twice, g_once, strict=True):
        np.testing.assert_allclose(
            to_numpy(t.grad),
            2.0 * g1,
            rtol=1e-12,
            atol=1e-14,
            err_msg=f"d out/d{name}: two backwards on the same graph != 2 x one backward",
        )


def test_intermediate_used_twice_and_second_backward():
    x = leaf([2.0])
    y = x * x  # intermediate reused by both branches below
    out = fn("sum")(y * y + y)  # x**4 + x**2 -> 4x^3 + 2x = 36
    out.backward(retain_graph=True)
    assert_exact(to_numpy(x.grad), [36.0], "d(x^4 + x^2)/dx at 2")
    out.backward()
    assert_exact(to_numpy(x.grad), [72.0], "after a second backward of the same graph")
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        out.backward()


def test_long_chain_of_multiplications_no_recursion_error():
    n = 100_000
    x = leaf(1.0)
    y = x
    for _ in range(n):
        y = y * 1.0000001
    y.backward()
    expected = 1.0000001**n
    np.testing.assert_allclose(to_numpy(y), expected, rtol=1e-9)
    np.testing.assert_allclose(to_numpy(x.grad), expected, rtol=1e-9)


def test_long_chain_of_additions_no_recursion_error():
    n = 100_000
    x = leaf([1.0, 2.0])
    y = x
    for _ in range(n):
        y = y + x
    fn("sum")(y).backward()
    assert_exact(to_numpy(y), [n + 1.0, 2.0 * (n + 1)], "x added to itself 100000 times")
    assert_exact(to_numpy(x.grad), [n + 1.0, n + 1.0], "gradient of the 100001-term sum")
