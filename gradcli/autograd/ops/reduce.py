"""Reductions and the softmax family. ``ctx`` is ``(axes, keepdims, input shape, extra)``;
a reduction that needs only shapes saves nothing else (docs/engine.md, "What a node keeps").
"""

from __future__ import annotations

import builtins
import math
from typing import Any

from ...errors import InvalidValueError, ShapeError
from ...i18n import msg
from ..backend import NUMPY, backend_of, on_data
from ..registry import TENSOR_ONLY, Axis, Primitive, primitive, public
from ..shapes import ALL_AXES, normalize_axis
from ..state import GRAD, OFF_DEFAULT, STATE
from ..tensor import Tensor, lift, record

_ndarray = NUMPY.ndarray


def kept_shape(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def unreduce(xp: Any, g: Any, ctx: tuple[Any, ...]) -> Any:
    """Bring the gradient (or output) of a reduction back to the rank of its input."""
    axes, keepdims, shape = ctx[0], ctx[1], ctx[2]
    return g if keepdims else xp.reshape(g, kept_shape(shape, axes))


def _sum_vjp(xp: Any, g: Any, ans: Any, ctx: Any) -> Any:
    if len(ctx[0]) == len(ctx[2]):  # every axis: g is one value
        return xp.broadcast_to(g, ctx[2])
    return xp.broadcast_to(unreduce(xp, g, ctx), ctx[2])


def _mean_vjp(xp: Any, g: Any, ans: Any, ctx: Any) -> Any:
    axes, shape = ctx[0], ctx[2]
    n = math.prod(shape[i] for i in axes)
    return xp.broadcast_to(unreduce(xp, g, ctx) / float(builtins.max(n, 1)), shape)


def exclusive_prod(xp: Any, x: Any, axes: tuple[int, ...]) -> Any:
    """For every element, the product of the other elements of its reduced group.

    Exact with zeros (no division): the product of a prefix and a suffix, as torch does.
    """
    if x.size == 0:
        return xp.zeros_like(x)
    keep = [i for i in range(x.ndim) if i not in axes]
    perm = keep + list(axes)
    xt = xp.transpose(x, perm)
    lead = xt.shape[: len(keep)]
    flat = xp.reshape(xt, (*lead, -1))
    ones = xp.ones((*lead, 1), dtype=x.dtype)
    left = xp.cumprod(xp.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    right = xp.cumprod(xp.concatenate([ones, flat[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
    return xp.transpose(xp.reshape(left * right, xt.shape), xp.argsort(perm))


def _others_prod_tensor(x: Tensor, axes: tuple[int, ...]) -> Tensor:
    """For tensors: the product of the other elements of each element's group, built from
    differentiable primitives (quadratic in the group size; used only for higher order)."""
    from .shape import expand_dims, reshape, transpose

    keep = [i for i in range(x.ndim) if i not in axes]
    perm = keep + list(axes)
    xt = transpose(x, perm)
    lead = xt.shape[: len(keep)]
    flat = reshape(xt, (*lead, -1))
    n = flat.shape[-1]
    eye = NUMPY.eye(n, dtype=x.dtype)
    from .elementwise import where

    rows = where(eye, 1.0, expand_dims(flat, -2))
    others = prod(rows, axis=-1)
    return transpose(reshape(others, xt.shape), tuple(NUMPY.argsort(perm)))


def _prod_vjp(xp: Any, g: Any, ans: Any, ctx: Any, x: Any) -> Any:
    ge = unreduce(xp, g, ctx)
    if isinstance(x, Tensor):
        return ge * _others_prod_tensor(x, ctx[0])
    return ge * exclusive_prod(xp, x, ctx[0])


def _extreme_vjp(xp: Any, g: Any, ans: Any, ctx: Any, x: Any) -> Any:
    mask = xp.as_float(x == unreduce(xp, ans, ctx), x)
    count = xp.sum(mask, axis=ctx[0], keepdims=True)
    return unreduce(xp, g, ctx) * (mask / count)


def _logsumexp_vjp(xp: Any, g: Any, ans: Any, ctx: Any, x: Any) -> Any:
    return unreduce(xp, g, ctx) * xp.exp(x - unreduce(xp, ans, ctx))


def logsumexp_forward(xp: Any, x: Any, axis: tuple[int, ...], keepdims: bool) -> Any:
    if x.size:
        mx = xp.max(x, axis=axis, keepdims=True)
    else:
        mx = xp.zeros(kept_shape(x.shape, axis), dtype=x.dtype)
    mx = xp.astype(xp.where(xp.isfinite(mx), mx, 0.0), x.dtype)
    out = xp.log(xp.sum(xp.exp(x - mx), axis=axis, keepdims=True)) + mx
    return out if keepdims else xp.reshape(out, [s for i, s in enumerate(x.shape) if i not in axis])


def _norm_forward(xp: Any, x: Any, axis: tuple[int, ...], keepdims: bool, ord: float) -> Any:
    ax = xp.abs(x)
    if ord == math.inf:
        return xp.max(ax, axis=axis, keepdims=keepdims, initial=0.0)
    if ord == 2:
        return xp.sqrt(xp.sum(ax * ax, axis=axis, keepdims=keepdims))
    if ord == 1:
        return xp.sum(ax, axis=axis, keepdims=keepdims)
    return xp.sum(ax**ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)


def _norm_vjp(xp: Any, g: Any, ans: Any, ctx: Any, x: Any) -> Any:
    axes, p = ctx[0], ctx[3]
    ge = unreduce(xp, g, ctx)
    ae = unreduce(xp, ans, ctx)
    if p == math.inf:
        mask = xp.as_float(xp.abs(x) == ae, x)
        return ge * xp.sign(x) * mask / xp.sum(mask, axis=axes, keepdims=True)
    if p == 1:
        return ge * xp.sign(x)
    if p == 2:
        return ge * xp.where(ae == 0, 0.0, x / ae)
    # sign(x)|x|^(p-1) / ||x||^(p-1), with torch's zero at x = 0 and at an all-zero group
    scaled = xp.where(x == 0, 0.0, xp.sign(x) * xp.abs(x) ** (p - 1.0))
    return ge * scaled * xp.where(ae == 0, 0.0, ae ** (1.0 - p))


def _std_forward(xp: Any, x: Any, axis: tuple[int, ...], keepdims: bool, ddof: float) -> Any:
    # np.std's own steps, without its "Degrees of freedom <= 0" Python warning: too few
    # elements divide by zero, a counted floating-point error
    n = math.prod(x.shape[i] for i in axis)
    d = x - xp.mean(x, axis=axis, keepdims=True)
    return xp.sqrt(xp.sum(d * d, axis=axis, keepdims=keepdims) / builtins.max(n - ddof, 0))


def _std_vjp(xp: Any, g: Any, ans: Any, ctx: Any, x: Any) -> Any:
    axes, ddof = ctx[0], ctx[3]
    n = math.prod(x.shape[i] for i in axes)
    ae = unreduce(xp, ans, ctx)
    d = x - xp.mean(x, axis=axes, keepdims=True)
    return unreduce(xp, g, ctx) * xp.where(ae == 0, 0.0, d / (ae * (n - ddof)))


def _fwd(name: str) -> Any:
    def forward(xp: Any, x: Any, axis: tuple[int, ...], keepdims: bool) -> Any:
        return getattr(xp, name)(x, axis=axis, keepdims=keepdims)

    return forward


def _sum_forward(xp: Any, x: Any, axis: tuple[int, ...], keepdims: bool) -> Any:
    return xp.sum(x, axis=axis, keepdims=keepdims)


# fmt: off
SUM = primitive("sum", _sum_forward, _sum_vjp, saves=(),
                doc="g broadcast back over the reduced axes")
MEAN = primitive("mean", _fwd("mean"), _mean_vjp, saves=(),
                 doc="g / n broadcast back over the reduced axes")
PROD = primitive("prod", _fwd("prod"), _prod_vjp, saves=("x",),
                 doc="g times the product of the other elements (exact with zeros)")
MAX = primitive("max", _fwd("max"), _extreme_vjp, saves=("x", "ans"),
                doc="g split evenly among the elements equal to the maximum")
MIN = primitive("min", _fwd("min"), _extreme_vjp, saves=("x", "ans"),
                doc="g split evenly among the elements equal to the minimum")
LOGSUMEXP = primitive("logsumexp", logsumexp_forward, _logsumexp_vjp, saves=("x", "ans"),
                      doc="g softmax(x)")
NORM = primitive("norm", _norm_forward, _norm_vjp, saves=("x", "ans"),
                 doc="g x/||x|| for ord 2; g sign(x)|x|^(p-1)/||x||^(p-1) in general; 0 at 0")
STD = primitive("std", _std_forward, _std_vjp, saves=("x", "ans"),
                doc="g (x - mean) / ((n - ddof) std); 0 where std = 0")
# fmt: on


def reduce(prim: Primitive, x: Any, axis: Any, keepdims: bool, *extra: Any) -> Tensor:
    if type(x) is not Tensor:
        x = lift(x)
    xd = x.data
    axes = ALL_AXES[xd.ndim] if axis is None else normalize_axis(axis, xd.ndim, prim.name)
    if (prim is MAX or prim is MIN) and xd.size == 0 and 0 in [xd.shape[a] for a in axes]:
        raise ShapeError(
            msg("max: cannot reduce an empty tensor (it has no maximum)")
            if prim is MAX
            else msg("min: cannot reduce an empty tensor (it has no minimum)")
        )
    keep = keepdims is True or bool(keepdims)
    ctx = (axes, keep, xd.shape, *extra) if extra else (axes, keep, xd.shape)
    saved = (xd,) if prim.save_in else ()
    if type(xd) is _ndarray and (not OFF_DEFAULT or STATE.mode <= GRAD):
        # No plan is recorded and no graph traced (docs/engine.md, "Replay"): the op needs
        # no redo, and making one (a closure a call) cost a fifth of a small sum. A sum of
        # floats is _on_numpy's first case written out (every loss.sum() comes here).
        if prim is SUM:
            out = NUMPY.sum_array(xd, axes, keep)
            if out.dtype is not xd.dtype:  # an integer tensor's sum: back to its dtype
                out = NUMPY.asarray(out, dtype=xd.dtype)
            return record(out, prim, (x,), saved, ctx)
        return record(_on_numpy(prim, xd, axes, keep, extra), prim, (x,), saved, ctx)

    def redo(xd: Any) -> Any:
        if type(xd) is _ndarray:
            return _on_numpy(prim, xd, axes, keep, extra)
        xp = backend_of(xd)  # another backend's array
        return xp.astype(prim.fwd(xp, xd, axes, keep, *extra), xd.dtype)

    if prim is SUM and len(axes) == xd.ndim:
        redo.adds_all = True  # type: ignore[attr-defined]  # a replay may fuse it (fusion.py)
    return record(redo(xd), prim, (x,), saved, ctx, redo)


def _on_numpy(prim: Primitive, xd: Any, axes: tuple[int, ...], keep: bool, extra: Any) -> Any:
    """The reduction of a NumPy array, as an array of its dtype (never a NumPy scalar)."""
    if prim is SUM:
        out = NUMPY.sum_array(xd, axes, keep)  # _sum_forward's bits, as an array
    else:
        out = prim.fwd(NUMPY, xd, axes, keep, *extra)
    dtype = xd.dtype
    if type(out) is not _ndarray or (out.dtype is not dtype and out.dtype != dtype):
        out = NUMPY.asarray(out, dtype=dtype)
    return out


@public(SUM, "sum of elements")
def sum(prim: Primitive, x: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """Sum over ``axis`` (None: all axes)."""
    return reduce(prim, x, axis, keepdims)


@public(MEAN, "mean of elements")
def mean(prim: Primitive, x: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """Arithmetic mean over ``axis``."""
    return reduce(prim, x, axis, keepdims)


@public(PROD, "product of elements")
def prod(prim: Primitive, x: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """Product over ``axis``; its gradient is exact when elements are zero."""
    return reduce(prim, x, axis, keepdims)


@public(MAX, "largest element", aliases=("amax",))
def max(prim: Primitive, x: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """Largest element over ``axis``; ties share the gradient evenly."""
    return reduce(prim, x, axis, keepdims)


@public(MIN, "smallest element", aliases=("amin",))
def min(prim: Primitive, x: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """Smallest element over ``axis``; ties share the gradient evenly."""
    return reduce(prim, x, axis, keepdims)


@public(LOGSUMEXP, "log(sum(exp(x))), stable")
def logsumexp(prim: Primitive, x: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """``log(sum(exp(x)))`` computed without overflow."""
    return reduce(prim, x, axis, keepdims)


@public(NORM, "vector p-norm of the reduced elements")
def norm(
    prim: Primitive, x: Tensor, ord: float = 2, axis: Axis = None, keepdims: bool = False
) -> Tensor:
    """Vector p-norm of the reduced elements (``ord`` > 0 or inf)."""
    p = float(ord) if ord is not None else 2.0
    if not p > 0:
        raise InvalidValueError(
            msg("norm: ord must be a positive number or inf, not {ord}", ord=ord)
        )
    return reduce(prim, x, axis, keepdims, p)


@public(None, "variance", derivative="g 2 (x - mean) / (n - ddof)")
def var(x: Tensor, axis: Axis = None, ddof: float = 0, keepdims: bool = False) -> Tensor:
    """Variance with ``ddof`` delta degrees of freedom (NumPy's default 0)."""
    x = lift(x)
    axes = normalize_axis(axis, x.data.ndim, "var")
    n = math.prod(x.data.shape[i] for i in axes)
    d = x - mean(x, axes, keepdims=True)
    # NumPy's divisor: max(n - ddof, 0), so too few elements give nan or inf, not -0
    return sum(d * d, axes, keepdims) / float(builtins.max(n - ddof, 0))


@public(STD, "standard deviation", derivative="g (x - mean) / ((n - ddof) std)")
def std(
    prim: Primitive, x: Tensor, axis: Axis = None, ddof: float = 0, keepdims: bool = False
) -> Tensor:
    """Standard deviation ``sqrt(var(x))``; its gradient is 0 where it is 0, as torch's."""
    return reduce(prim, x, axis, keepdims, float(ddof))


# ---- along one axis -----------------------------------------------------------------------


def one_axis(axis: Any, ndim: int, what: str) -> int:
    if ndim == 0:
        raise ShapeError(msg("{what}: needs at least one dimension", what=what))
    (a,) = normalize_axis(int(axis), ndim, what)
    return a


def _softmax_forward(xp: Any, x: Any, axis: int) -> Any:
    e = xp.exp(x - xp.max(x, axis=axis, keepdims=True))
    return e / xp.sum(e, axis=axis, keepdims=True)


SOFTMAX = primitive(
    "softmax",
    _softmax_forward,
    lambda xp, g, ans, ctx: ans * (g - xp.sum(g * ans, axis=ctx, keepdims=True)),
    saves=("ans",),
    doc="s (g - sum(g s)), s = softmax(x)",
)
LOG_SOFTMAX = primitive(
    "log_softmax",
    lambda xp, x, axis: x - logsumexp_forward(xp, x, (axis,), True),
    lambda xp, g, ans, ctx: g - xp.exp(ans) * xp.sum(g, axis=ctx, keepdims=True),
    saves=("ans",),
    doc="g - softmax(x) sum(g)",
)


@public(SOFTMAX, "exp(x) / sum(exp(x)) along axis")
def softmax(prim: Primitive, x: Tensor, axis: int = -1) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``axis``, stable for large arguments."""
    x = lift(x)
    a = one_axis(axis, x.data.ndim, "softmax")
    redo = on_data(prim.fwd, axis=a)
    return record(redo(x.data), prim, (x,), ctx=a, redo=redo)


@public(LOG_SOFTMAX, "x - logsumexp(x) along axis")
def log_softmax(prim: Primitive, x: Tensor, axis: int = -1) -> Tensor:
    """``x - logsumexp(x)`` along ``axis``."""
    x = lift(x)
    a = one_axis(axis, x.data.ndim, "log_softmax")
    redo = on_data(prim.fwd, axis=a)
    return record(redo(x.data), prim, (x,), ctx=a, redo=redo)


# comparisons of tensors are already 1.0/0.0 in their dtype
TENSOR_ONLY["as_float"] = lambda mask, like: mask
