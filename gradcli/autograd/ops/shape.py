"""Shape primitives: they move elements, so their rules need only shapes and axes (``ctx``),
never a value (docs/engine.md, "What a node keeps")."""

from __future__ import annotations

import operator
from typing import Any

from ...errors import InvalidValueError, ShapeError
from ...i18n import msg
from ..backend import NUMPY, backend_call, backend_of, on_data
from ..registry import Axis, Primitive, Shape, Tensors, primitive, public
from ..shapes import is_int, normalize_axis
from ..state import check_size
from ..tensor import Tensor, lift, record

_ndarray = NUMPY.ndarray


def _inverse(perm: tuple[int, ...]) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


# fmt: off
RESHAPE = primitive("reshape", lambda xp, x, shape: xp.reshape(x, shape),
                    lambda xp, g, ans, ctx: xp.reshape(g, ctx), saves=(), doc="g reshaped back")
TRANSPOSE = primitive("transpose", lambda xp, x, perm: xp.transpose(x, perm),
                      lambda xp, g, ans, ctx: xp.transpose(g, ctx), saves=(),
                      doc="g transposed back")
BROADCAST_TO = primitive("broadcast_to", lambda xp, x, shape: xp.broadcast_to(x, shape),
                         lambda xp, g, ans, ctx: xp.sum_to(g, ctx), saves=(),
                         doc="g summed over the broadcast axes")
SUM_TO = primitive("sum_to", lambda xp, x, shape: xp.sum_to(x, shape),
                   lambda xp, g, ans, ctx: xp.broadcast_to(g, ctx), saves=(),
                   doc="g broadcast back")
FLIP = primitive("flip", lambda xp, x, axes: xp.flip(x, axes),
                 lambda xp, g, ans, ctx: xp.flip(g, ctx), saves=(), doc="g flipped back")
# fmt: on


@public(RESHAPE, "the elements in a new shape (-1: inferred)", method=False)
def reshape(prim: Primitive, x: Tensor, *shape: Shape) -> Tensor:
    """The same elements in a new shape (one dimension may be -1): ``reshape(x, (2, 3))``
    or ``reshape(x, 2, 3)``."""
    x = lift(x)
    if len(shape) == 1 and not is_int(shape[0]):
        shape = shape[0]
    new = (shape,) if is_int(shape) else tuple(shape)
    xd = x.data
    try:
        data = xd.reshape(new) if type(xd) is _ndarray else backend_of(xd).reshape(xd, new)
    except ValueError:
        raise ShapeError(
            msg(
                "reshape: cannot reshape a tensor of shape {shape} ({size} elements) "
                "into shape {new}",
                shape=x.data.shape,
                size=x.data.size,
                new=new,
            )
        ) from None
    # a new node even when nothing changes: a binding `h = reshape(x, ...)` is not `x`
    return record(data, prim, (x,), ctx=x.data.shape, redo=lambda xd: xd.reshape(new))


@public(TRANSPOSE, "axes permuted (reversed by default); also x.T", method=False)
def transpose(prim: Primitive, x: Tensor, axes: Axis = None) -> Tensor:
    """Permute the axes (reverse them when ``axes`` is None)."""
    x = lift(x)
    nd = x.data.ndim
    if axes is None:
        perm = tuple(range(nd - 1, -1, -1))
    else:
        axes = (axes,) if is_int(axes) else axes
        perm = tuple(int(a) % nd if nd else int(a) for a in axes)
        if sorted(perm) != list(range(nd)):
            raise ShapeError(
                msg(
                    "transpose: axes {axes} are not a permutation of {nd} axes",
                    axes=tuple(axes),
                    nd=nd,
                )
            )
    redo = operator.methodcaller("transpose", perm)
    return record(redo(x.data), prim, (x,), ctx=_inverse(perm), redo=redo)


@public(None, "two axes swapped", derivative="g with the axes swapped back", language=False,
        method=False)  # fmt: skip
def swapaxes(x: Tensor, a: int, b: int) -> Tensor:
    x = lift(x)
    perm = list(range(x.data.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(x, perm)


@public(BROADCAST_TO, "x broadcast to a shape", language=False, method=False)
def broadcast_to(prim: Primitive, x: Tensor, shape: Shape) -> Tensor:
    x = lift(x)
    shape = tuple(shape)
    if x.data.shape == shape:
        return x
    check_size(shape, "broadcast_to")
    redo = backend_call("broadcast_to", shape=shape)
    return record(redo(x.data), prim, (x,), ctx=x.data.shape, redo=redo)


@public(SUM_TO, "x summed down to a shape", language=False, method=False)
def sum_to(prim: Primitive, x: Tensor, shape: Shape) -> Tensor:
    x = lift(x)
    shape = tuple(shape)
    if x.data.shape == shape:
        return x
    redo = backend_call("sum_to", shape=shape)
    return record(redo(x.data), prim, (x,), ctx=x.data.shape, redo=redo)


@public(None, "the elements as a 1-D tensor", derivative="g reshaped back")
def flatten(x: Tensor) -> Tensor:
    """A 1-D copy of the elements (row-major)."""
    return reshape(x, (-1,))


@public(None, "axes of length one removed", derivative="g reshaped back")
def squeeze(x: Tensor, axis: Axis = None) -> Tensor:
    """Remove axes of length one (all of them, or those in ``axis``)."""
    x = lift(x)
    shape = x.data.shape
    if axis is None:
        new = tuple(s for s in shape if s != 1)
    else:
        axes = normalize_axis(axis, x.data.ndim, "squeeze")
        for a in axes:
            if shape[a] != 1:
                raise ShapeError(
                    msg("squeeze: axis {a} has length {shape}, not 1", a=a, shape=shape[a])
                )
        new = tuple(s for i, s in enumerate(shape) if i not in axes)
    return reshape(x, new)


@public(None, "an axis of length one inserted", derivative="g reshaped back")
def expand_dims(x: Tensor, axis: Axis) -> Tensor:
    """Insert axes of length one at ``axis`` (an int or a tuple, NumPy's rules)."""
    x = lift(x)
    axes = (axis,) if is_int(axis) else tuple(axis)
    nd = x.data.ndim + len(axes)
    pos = normalize_axis(axes, nd, "expand_dims")
    it = iter(x.data.shape)
    new = tuple(1 if i in pos else next(it) for i in range(nd))
    return reshape(x, new)


# ---- joining: one node of n inputs -----------------------------------------------------


def _concat_vjp(xp: Any, g: Any, ans: Any, ctx: Any, i: int) -> Any:
    axis, offsets = ctx
    key = (slice(None),) * axis + (slice(offsets[i], offsets[i + 1]),)
    return xp.getitem(g, key)


def _stack_vjp(xp: Any, g: Any, ans: Any, ctx: Any, i: int) -> Any:
    return xp.getitem(g, (slice(None),) * ctx + (i,))


CONCATENATE = primitive(
    "concatenate",
    lambda xp, *xs, axis: xp.concatenate(xs, axis=axis),
    _concat_vjp,
    saves=(),
    doc="g split back into the pieces",
    nary=True,
)
STACK = primitive(
    "stack",
    lambda xp, *xs, axis: xp.stack(xs, axis=axis),
    _stack_vjp,
    saves=(),
    doc="g split back into the pieces",
    nary=True,
)


def as_sequence(seq: Any) -> list[Tensor]:
    if isinstance(seq, Tensor):
        if seq.data.ndim == 0:
            raise ShapeError(msg("expected a sequence of tensors, got a scalar"))
        from .indexing import getitem

        return [getitem(seq, i) for i in range(seq.data.shape[0])]
    return [lift(t) for t in seq]


@public(
    CONCATENATE,
    "tensors joined along an existing axis",
    aliases=("concat",),
    method=False,
    api_aliases=("cat",),  # torch's name: gradcli.cat(tensors, dim=0)
)
def concatenate(prim: Primitive, tensors: Tensors, axis: int = 0) -> Tensor:
    """Join tensors along an existing axis (their lengths along it may differ)."""
    ts = as_sequence(tensors)
    if not ts:
        raise ShapeError(msg("concatenate: needs at least one tensor"))
    ts = [lift(t, ts[0]) for t in ts]
    nd = ts[0].data.ndim
    if nd == 0:
        raise ShapeError(msg("concatenate: zero-dimensional tensors cannot be concatenated"))
    a = normalize_axis(int(axis), nd, "concatenate")[0]
    s0 = ts[0].data.shape
    for t in ts:
        s = t.data.shape
        if len(s) != nd or s[:a] + s[a + 1 :] != s0[:a] + s0[a + 1 :]:
            raise ShapeError(
                msg(
                    "concatenate: shapes {s0} and {s} do not match except along axis {a}",
                    s0=s0,
                    s=s,
                    a=a,
                )
            )
    offsets = [0]
    for t in ts:
        offsets.append(offsets[-1] + t.data.shape[a])
    shape = list(s0)
    shape[a] = offsets[-1]
    check_size(shape, "concatenate")
    redo = on_data(prim.fwd, axis=a)
    return record(redo(*[t.data for t in ts]), prim, tuple(ts), ctx=(a, offsets), redo=redo)


@public(STACK, "tensors joined along a new axis", method=False)
def stack(prim: Primitive, tensors: Tensors, axis: int = 0) -> Tensor:
    """Join tensors of one shape along a new axis."""
    ts = as_sequence(tensors)
    if not ts:
        raise ShapeError(msg("stack: needs at least one tensor"))
    ts = [lift(t, ts[0]) for t in ts]
    s0 = ts[0].data.shape
    for t in ts:
        if t.data.shape != s0:
            raise ShapeError(
                msg(
                    "stack: all tensors need one shape, got {s0} and {shape}",
                    s0=s0,
                    shape=t.data.shape,
                )
            )
    a = normalize_axis(int(axis), len(s0) + 1, "stack")[0]
    check_size((len(ts), *s0), "stack")
    redo = on_data(prim.fwd, axis=a)
    return record(redo(*[t.data for t in ts]), prim, tuple(ts), ctx=a, redo=redo)


@public(FLIP, "order reversed")
def flip(prim: Primitive, x: Tensor, axis: Axis = None) -> Tensor:
    """Reverse the order of elements along ``axis`` (all axes when None)."""
    x = lift(x)
    axes = normalize_axis(axis, x.data.ndim, "flip")
    redo = backend_call("flip", axis=axes)
    return record(redo(x.data), prim, (x,), ctx=axes, redo=redo)


# ---- triangles of the last two axes: the rule is the same mask (ctx: k) ------------------


def _triangle(lower: bool) -> Any:
    def forward(xp: Any, x: Any, k: int) -> Any:
        n, m = x.shape[-2], x.shape[-1]
        # column - row: 0 on the main diagonal, k on the k-th (above it for k > 0)
        offset = xp.reshape(xp.arange(m), (1, m)) - xp.reshape(xp.arange(n), (n, 1))
        return xp.where(offset <= k if lower else offset >= k, x, 0.0)

    return forward


TRIL = primitive("tril", _triangle(True), lambda xp, g, ans, ctx: xp.tril(g, ctx), saves=(),
                 doc="tril(g, k)")  # fmt: skip
TRIU = primitive("triu", _triangle(False), lambda xp, g, ans, ctx: xp.triu(g, ctx), saves=(),
                 doc="triu(g, k)")  # fmt: skip


def _triangle_of(prim: Primitive, x: Any, k: Any, torch_spelling: dict[str, Any]) -> Tensor:
    """``prim`` of ``x`` with diagonal ``k``; ``diagonal=`` (torch's keyword) is ``k``."""
    if torch_spelling:
        unknown = sorted(set(torch_spelling) - {"diagonal"})
        if unknown:
            raise TypeError(f"{prim.name}() got an unexpected keyword argument {unknown[0]!r}")
        if k != 0:
            raise TypeError(f"{prim.name}() got the diagonal twice: give k or diagonal")
        k = torch_spelling["diagonal"]
    x = lift(x)
    if x.data.ndim < 2:
        raise ShapeError(
            msg(
                "{name}: needs at least 2 dimensions (a matrix, or a batch of them), got "
                "shape {shape}",
                name=prim.name,
                shape=x.data.shape,
            )
        )
    if not is_int(k):
        raise InvalidValueError(
            msg("{name}: k must be a whole number, not {k!r}", name=prim.name, k=k)
        )
    redo = on_data(prim.fwd, k=int(k))
    return record(redo(x.data), prim, (x,), ctx=int(k), redo=redo)


@public(TRIL, "lower triangle of the last two axes: zero above diagonal k")
def tril(prim: Primitive, x: Tensor, k: int = 0, **diagonal: int) -> Tensor:
    """The elements on and below the ``k``-th diagonal of the last two axes (above it for
    ``k > 0``, below for ``k < 0``); the others 0. torch's ``diagonal=`` is ``k``."""
    return _triangle_of(prim, x, k, diagonal)


@public(TRIU, "upper triangle of the last two axes: zero below diagonal k")
def triu(prim: Primitive, x: Tensor, k: int = 0, **diagonal: int) -> Tensor:
    """The elements on and above the ``k``-th diagonal of the last two axes; the others 0.
    torch's ``diagonal=`` is ``k``."""
    return _triangle_of(prim, x, k, diagonal)


def _reshape_method(self: Tensor, *shape: Any) -> Tensor:
    """``x.reshape(2, 3)`` or ``x.reshape((2, 3))``."""
    return reshape(self, *shape)


def _transpose_method(self: Tensor, *dims: Any) -> Tensor:
    """torch's ``x.transpose(0, 1)`` swaps two axes; ``x.transpose()`` reverses them all, and a
    full permutation (``x.transpose((2, 0, 1))`` or three or more ints) is NumPy's."""
    if not dims:
        return transpose(self)
    if len(dims) == 2 and all(is_int(d) for d in dims):
        return swapaxes(self, int(dims[0]), int(dims[1]))
    return transpose(self, dims[0] if len(dims) == 1 else dims)


Tensor.reshape = _reshape_method  # type: ignore[attr-defined]
Tensor.transpose = _transpose_method  # type: ignore[attr-defined]
Tensor.T = property(lambda self: transpose(self))  # type: ignore[attr-defined]
