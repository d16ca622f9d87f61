"""Shape rules as NumPy has them: which axes an argument names, and broadcasting."""

from __future__ import annotations

import builtins
import numbers
from collections.abc import Sequence
from typing import Any

from ..errors import ShapeError
from ..i18n import msg
from .state import check_size

#: every axis of an array of n dimensions, for the reductions of everything
ALL_AXES = [tuple(range(n)) for n in range(65)]


def normalize_axis(axis: Any, ndim: int, what: str) -> tuple[int, ...]:
    """``axis`` (None, int or sequence) as a sorted tuple of non-negative axes."""
    if axis is None:
        return ALL_AXES[ndim]
    axes = (axis,) if is_int(axis) else tuple(axis)
    out = []
    for a in axes:
        if not -ndim <= a < builtins.max(ndim, 1) or (ndim == 0 and a not in (0, -1)):
            raise ShapeError(
                msg(
                    "{what}: axis {a} is out of bounds for a {ndim}-D tensor",
                    what=what,
                    a=a,
                    ndim=ndim,
                )
            )
        out.append(int(a) % builtins.max(ndim, 1))
    if ndim == 0:
        return ()
    if len(set(out)) != len(out):
        raise ShapeError(msg("{what}: repeated axis in {axes}", what=what, axes=tuple(axes)))
    return tuple(sorted(out))


def is_int(value: Any) -> bool:
    return type(value) is int or isinstance(value, numbers.Integral)


def check_broadcast(name: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The broadcast shape, refused when the shapes do not broadcast or the result would
    be over the element limit."""
    try:
        shape = broadcast_shape(*shapes)
    except ValueError:
        raise_shapes(name, shapes)
    check_size(shape, name)
    return shape


def raise_shapes(name: str, shapes: Sequence[tuple[int, ...]]) -> None:
    if len(shapes) == 2:
        raise ShapeError(
            msg(
                "{name}: shapes {shapes} and {shapes2} cannot be broadcast together",
                name=name,
                shapes=shapes[0],
                shapes2=shapes[1],
            )
        ) from None
    shown = ", ".join(map(str, shapes))
    raise ShapeError(
        msg("{name}: shapes {shown} cannot be broadcast together", name=name, shown=shown)
    ) from None


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy's broadcasting of shapes (np.broadcast_shapes stops at 32 dimensions; arrays
    may have 64). Raises ValueError when the shapes do not broadcast."""
    nd = max(len(s) for s in shapes)
    out = [1] * nd
    for s in shapes:
        for i, d in enumerate(s, nd - len(s)):
            if d != 1:
                if out[i] != 1 and out[i] != d:
                    raise ValueError(f"shapes {shapes} cannot be broadcast together")
                out[i] = d
    return tuple(out)
