"""Indexing and its adjoint, scatter-add. Both keep only the key and the shape."""

from __future__ import annotations

from typing import Any

from ...errors import InvalidValueError, ShapeError
from ..backend import NUMPY
from ..registry import Primitive, Shape, Tensor, primitive, public
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


def normalize_key(key: Any) -> tuple[Any, ...]:
    """A NumPy index key with integer arrays as int64 arrays (floats must be whole)."""
    k = key if isinstance(key, tuple) else (key,)
    out: list[Any] = []
    for part in k:
        if isinstance(part, Tensor):
            part = part.data
        if isinstance(part, (list, NUMPY.ndarray)):
            arr = NUMPY.index_array(part)
            if arr is None:
                raise InvalidValueError("index: indices must be whole numbers")
            out.append(arr)
        elif isinstance(part, float):
            if not part.is_integer():
                raise InvalidValueError(f"index: {part} is not a whole number")
            out.append(int(part))
        else:
            out.append(part)
    return tuple(out)


@public(GETITEM, "x indexed as NumPy indexes", language=False, method=False)
def getitem(prim: Primitive, x: Tensor, key: Any) -> Tensor:
    """NumPy indexing (basic, integer lists, ``None``, ``...``); repeated indices accumulate."""
    x = lift(x)
    k = normalize_key(key)
    try:
        data = x.data[k]
    except IndexError as e:
        raise ShapeError(f"index: {e}") from None
    return record(NUMPY.asarray(data), prim, (x,), ctx=(k, x.data.shape))


@public(SCATTER, "zeros with g added at the indexed places", language=False, method=False)
def scatter(prim: Primitive, g: Tensor, key: Any, shape: Shape) -> Tensor:
    """Zeros of ``shape`` with ``g`` added at ``key`` (the adjoint of indexing)."""
    g = lift(g)
    k = key if isinstance(key, tuple) else (key,)
    shape = tuple(shape)
    return record(NUMPY.scatter(g.data, k, shape), prim, (g,), ctx=(k, shape))


Tensor.__getitem__ = lambda self, key: getitem(self, key)  # type: ignore[method-assign]
