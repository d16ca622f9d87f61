"""Running sums and products along an axis: ``cumsum`` and ``cumprod``.

``axis=None`` runs over the flattened elements, as NumPy's; torch's ``dim=`` is read as
``axis`` in the Python API (registry.torch_keywords). ``ctx`` is the axis. The gradient of
``cumprod`` is exact with zeros in the input (one or several), as torch's: no element is
divided by a zero (docs/conventions.md).
"""

from __future__ import annotations

from typing import Any

from ...errors import ShapeError
from ...i18n import msg
from ..backend import NUMPY, on_data
from ..registry import Primitive, primitive, public
from ..shapes import normalize_axis
from ..tensor import Tensor, lift, record
from .shape import reshape

_ndarray = NUMPY.ndarray


def _cumsum_forward(xp: Any, x: Any, axis: int) -> Any:
    # the backends offer no cumsum function of their own: NumPy's and Dask's arrays have
    # the method (a rule's xp.cumsum is this function on arrays, the public one on tensors)
    return x.cumsum(axis=axis)


def reversed_cumsum(xp: Any, g: Any, axis: int) -> Any:
    """``g`` summed from the end along ``axis``: out[k] = sum of g[j] for j >= k."""
    return xp.flip(xp.cumsum(xp.flip(g, axis), axis=axis), axis)


CUMSUM = primitive(
    "cumsum",
    _cumsum_forward,
    lambda xp, g, ans, ctx: reversed_cumsum(xp, g, ctx),
    saves=(),
    doc="g summed from the end along the axis",
)


def _along(x: Tensor, axis: Any, what: str) -> tuple[Tensor, int, tuple[int, ...] | None]:
    """The tensor to run along, its axis, and the shape to give the result back (a 0-d
    tensor runs as one element and stays 0-d, as torch's; None: the result as it is)."""
    nd = x.data.ndim
    if axis is None:
        return (x, 0, None) if nd == 1 else (reshape(x, (-1,)), 0, None)
    if nd == 0:  # axis 0 or -1, as torch's
        if int(axis) not in (0, -1):
            raise ShapeError(
                msg("{what}: axis {axis} is out of bounds for a 0-D tensor", what=what, axis=axis)
            )
        return reshape(x, (1,)), 0, ()
    return x, normalize_axis(int(axis), nd, what)[0], None


def _run(prim: Primitive, x: Any, axis: Any, saves_x: bool) -> Tensor:
    x = lift(x)
    t, a, back = _along(x, axis, prim.name)
    redo = on_data(prim.fwd, axis=a)
    out = record(redo(t.data), prim, (t,), (t.data,) if saves_x else (), a, redo)
    return out if back is None else reshape(out, back)


@public(CUMSUM, "running sum along axis (none: over the flattened elements)")
def cumsum(prim: Primitive, x: Tensor, axis: int | None = None) -> Tensor:
    """Running sum along ``axis``; with ``axis=None`` over the flattened elements (NumPy's
    default; torch requires ``dim``)."""
    return _run(prim, x, axis, False)


# ---- cumprod ---------------------------------------------------------------------------------
#
# d out[j] / d x[k] = prod of x[i] for i <= j, i != k (j >= k), so
#     grad[k] = sum over j >= k of g[j] prod_{i <= j, i != k} x[i].
# Before the first zero z1 of a row, that is sum_{j >= k} g[j] out[j] / x[k] (x[k] != 0; the
# terms j >= z1 are 0); at z1 it is prod_{i < z1} x[i] times sum over z1 <= j < z2 of
# g[j] prod_{z1 < i <= j} x[i] (z2 the second zero); after z1 every term has the factor
# x[z1] = 0. torch's cumprod_backward computes the same.


def _cumprod_vjp(xp: Any, g: Any, ans: Any, ctx: int, x: Any) -> Any:
    a = ctx
    if isinstance(x, Tensor):
        return _cumprod_vjp_graph(xp, g, ans, a, x)
    n = x.shape[a]
    if n <= 1:
        return g
    w = ans * g
    zero = x == 0
    if type(x) is _ndarray and not zero.any():
        return reversed_cumsum(xp, w, a) / x
    seen = xp.cumsum(xp.as_float(zero, x), axis=a)  # zeros up to each position
    before = seen == 0
    grad_before = reversed_cumsum(xp, xp.where(before, w, 0.0), a) / xp.where(before, x, 1.0)
    span = seen == 1  # from the first zero to the second
    inner = xp.cumprod(xp.where(span & ~zero, x, 1.0), axis=a)
    total = xp.sum(inner * xp.where(span, g, 0.0), axis=a, keepdims=True)
    # the product of the elements before each position: out shifted by one, 1 first
    first = [slice(None)] * x.ndim
    first[a] = slice(0, n - 1)
    shape = list(x.shape)
    shape[a] = 1
    lead = xp.concatenate([xp.ones(tuple(shape), dtype=x.dtype), xp.getitem(ans, tuple(first))], a)
    at_zero = lead * total
    return xp.where(before, grad_before, xp.where(span & zero, at_zero, 0.0))


def _cumprod_vjp_graph(xp: Any, g: Any, ans: Any, a: int, x: Tensor) -> Any:
    """For ``create_graph``: without zeros, torch's formula (an identity near x, so its
    derivative is the second derivative); with zeros, every product of the other elements
    formed (quadratic in the axis's length, as torch's), a polynomial in x differentiable
    at any order."""
    n = x.shape[a]
    if n <= 1:
        return g
    data = x.data
    if type(data) is _ndarray and not (data == 0).any():
        return reversed_cumsum(xp, ans * g, a) / x
    last = x.ndim - 1
    perm = [i for i in range(x.ndim) if i != a] + [a]
    xt, gt = xp.transpose(x, perm), xp.transpose(g, perm)
    k = NUMPY.arange(n)
    # rows[..., k, i]: x[i], with 1 at i == k; their running products along i
    rows = xp.where(k[:, None] == k[None, :], 1.0, xp.expand_dims(xt, -2))
    others = xp.cumprod(rows, axis=last + 1)  # [..., k, j]: prod_{i <= j, i != k} x[i]
    upper = k[None, :] >= k[:, None]  # j >= k
    grad = xp.sum(others * xp.where(upper, xp.expand_dims(gt, -2), 0.0), axis=last + 1)
    return xp.transpose(grad, NUMPY.argsort(perm))


CUMPROD = primitive(
    "cumprod",
    lambda xp, x, axis: xp.cumprod(x, axis=axis),
    _cumprod_vjp,
    saves=("x", "ans"),
    doc="sum over j >= k of g[j] prod_{i <= j, i != k} x[i]; exact with zeros",
)


@public(CUMPROD, "running product along axis (none: over the flattened elements)")
def cumprod(prim: Primitive, x: Tensor, axis: int | None = None) -> Tensor:
    """Running product along ``axis``; with ``axis=None`` over the flattened elements. Its
    gradient is exact with zeros (no division by them), as torch's."""
    return _run(prim, x, axis, True)


__all__ = ["cumprod", "cumsum", "reversed_cumsum"]
