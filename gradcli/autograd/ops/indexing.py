"""Indexing and its adjoint, scatter-add. Both keep only the key and the shape."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from ...errors import InvalidValueError, ShapeError
from ...i18n import Message, msg
from ..backend import NUMPY, as_data, backend_call, backend_of
from ..registry import Primitive, Shape, Tensor, primitive, public
from ..replay import opaque
from ..tensor import lift, record

GETITEM = primitive(
    "getitem",
    lambda xp, x, key: xp.getitem(x, key),
    lambda xp, g, ans, ctx: xp.scatter(g, ctx[0], ctx[1]),
    saves=(),
    doc="g added into zeros at the indexed places (repeats accumulate)",
)
SCATTER = primitive(
    "scatter",
    lambda xp, g, key, shape: xp.scatter(g, key, shape),
    lambda xp, g, ans, ctx: xp.getitem(g, ctx[0]),
    saves=(),
    doc="g indexed",
)

_ndarray = NUMPY.ndarray


def normalize_key(key: Any) -> tuple[Any, ...]:
    """A NumPy index key with integer arrays as int64 arrays (floats must be whole)."""
    k = key if isinstance(key, tuple) else (key,)
    out: list[Any] = []
    for part in k:
        opaque(part, "an index")  # a plan cannot hold an index that depends on the inputs
        if isinstance(part, Tensor):
            part = part.data
        if isinstance(part, (list, NUMPY.ndarray)):
            try:
                arr = NUMPY.index_array(part)
            except ValueError:  # a ragged list
                raise InvalidValueError(
                    msg("index: an index list must be rectangular (rows of one length)")
                ) from None
            if arr is None:
                raise InvalidValueError(msg("index: indices must be whole numbers"))
            out.append(arr)
        elif isinstance(part, float):
            if not part.is_integer():
                raise InvalidValueError(msg("index: {part} is not a whole number", part=part))
            out.append(int(part))
        else:
            out.append(part)
    return tuple(out)


def _beyond_int64(key: Any, shape: tuple[int, ...]) -> Message | None:
    """NumPy's out-of-bounds message for a whole-number index beyond int64, such as
    ``x[[0, 1e20]]``, naming the index as it was given; None when the key has none.

    NumPy cannot hold such an index: a cast wraps 1e20 round to -2**63 and a Python int of
    70 bits is refused as not an integer. ``index_array`` makes it an end of int64, out of
    bounds for any axis, and the refusal NumPy gives for that is reworded here.
    """
    parts = [_as_array(p) for p in (key if isinstance(key, tuple) else (key,))]
    widths = [_axes_taken(p) for p in parts]
    rest = len(shape) - sum(w for w in widths if w is not None)
    axis = 0
    for part, width in zip(parts, widths, strict=True):
        if width is None:  # the ellipsis: the axes the other parts leave
            width = max(rest, 0)
        value = _first_beyond_int64(part) if width == 1 else None
        if value is not None and axis < len(shape):
            return msg(
                "index: index {value} is out of bounds for axis {axis} with size {size}",
                value=_as_written(value),
                axis=axis,
                size=shape[axis],
            )
        axis += width
    return None


def _as_array(part: Any) -> Any:
    """A part of a key as an array (None, the ellipsis and slices as they are)."""
    if part is None or part is Ellipsis or isinstance(part, slice):
        return part
    if isinstance(part, Tensor):
        return part.data
    try:
        return NUMPY.asarray(part)
    except ValueError:  # a ragged list: NumPy refuses it with its own message
        return None


def _axes_taken(part: Any) -> int | None:
    """How many axes of the indexed array a part of a key takes (None for the ellipsis)."""
    if part is Ellipsis:
        return None
    if part is None:
        return 0
    if isinstance(part, NUMPY.ndarray) and part.dtype.kind == "b":
        return part.ndim  # a mask takes as many axes as it has (a single bool: a new one)
    return 1


def _first_beyond_int64(part: Any) -> int | float | None:
    """The first whole number of an index part (an array) that int64 cannot hold."""
    if not isinstance(part, NUMPY.ndarray):
        return None
    kind = part.dtype.kind
    if kind == "f":
        beyond = part[NUMPY.isfinite(part) & (NUMPY.abs(part) >= 2.0**63)]
        return float(beyond.flat[0]) if beyond.size else None
    if kind == "u":
        beyond = part[part > 2**63 - 1]
        return int(beyond.flat[0]) if beyond.size else None
    if kind == "O":
        for v in part.ravel().tolist():
            if isinstance(v, int) and not -(2**63) <= v < 2**63:
                return v
            if isinstance(v, float) and v.is_integer() and abs(v) >= 2.0**63:
                return v
    return None


def _as_written(value: float | int) -> str:
    """An index as a whole number, all its digits (1e20 as 100000000000000000000, the value
    the language's scalar index shows too); beyond 40 digits in scientific notation."""
    digits = str(int(value))
    if len(digits.lstrip("-")) <= 40:
        return digits
    if isinstance(value, int) and value.bit_length() < 1024 and float(value) == value:
        value = float(value)  # a whole float, come through the language as an int
    return repr(value) if isinstance(value, float) else f"{Decimal(value):.6e}"


@public(GETITEM, "x indexed as NumPy indexes", language=False, method=False)
def getitem(prim: Primitive, x: Tensor, key: Any) -> Tensor:
    """NumPy indexing (basic, integer lists, ``None``, ``...``); repeated indices accumulate."""
    x = lift(x)
    k = normalize_key(key)
    xd = x.data
    try:
        data = xd[k] if type(xd) is _ndarray else backend_of(xd).getitem(xd, k)
    except IndexError as e:
        raise ShapeError(_beyond_int64(key, x.data.shape) or msg("index: {e}", e=e)) from None
    return record(as_data(data), prim, (x,), ctx=(k, x.data.shape), redo=_indexer(k))


def _indexer(k: tuple[Any, ...]) -> Any:
    def redo(xd: Any) -> Any:
        return as_data(xd[k])

    return redo


@public(SCATTER, "zeros with g added at the indexed places", language=False, method=False)
def scatter(prim: Primitive, g: Tensor, key: Any, shape: Shape) -> Tensor:
    """Zeros of ``shape`` with ``g`` added at ``key`` (the adjoint of indexing)."""
    g = lift(g)
    k = key if isinstance(key, tuple) else (key,)
    shape = tuple(shape)
    redo = backend_call("scatter", key=k, shape=shape)
    return record(redo(g.data), prim, (g,), ctx=(k, shape), redo=redo)


Tensor.__getitem__ = lambda self, key: getitem(self, key)  # type: ignore[method-assign]
