"""Axis arguments as NumPy reads them."""

from __future__ import annotations

import builtins
import numbers
from typing import Any

from ...errors import ShapeError

#: every axis of an array of n dimensions, for the reductions of everything
_ALL = [tuple(range(n)) for n in range(65)]


def normalize_axis(axis: Any, ndim: int, what: str) -> tuple[int, ...]:
    """``axis`` (None, int or sequence) as a sorted tuple of non-negative axes."""
    if axis is None:
        return _ALL[ndim]
    axes = (axis,) if is_int(axis) else tuple(axis)
    out = []
    for a in axes:
        if not -ndim <= a < builtins.max(ndim, 1) or (ndim == 0 and a not in (0, -1)):
            raise ShapeError(f"{what}: axis {a} is out of bounds for a {ndim}-D tensor")
        out.append(int(a) % builtins.max(ndim, 1))
    if ndim == 0:
        return ()
    if len(set(out)) != len(out):
        raise ShapeError(f"{what}: repeated axis in {tuple(axes)}")
    return tuple(sorted(out))


def is_int(value: Any) -> bool:
    return type(value) is int or isinstance(value, numbers.Integral)
