"""Gradient clipping as ``torch.nn.utils.clip_grad_norm_`` and ``clip_grad_value_`` do it,
on the gradient arrays in place."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..errors import InvalidValueError
from ..i18n import msg
from .backend import NUMPY


def norm_type_of(norm_type: Any) -> float:
    """A norm order: a positive number, ``inf``, ``"inf"`` or ``"Infinity"``."""
    p: Any = norm_type
    if isinstance(p, str):
        spelled = p.strip().lower()
        p = math.inf if spelled in ("inf", "infinity", "+inf", "+infinity") else spelled
        try:
            p = float(p)
        except ValueError:
            p = None
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not float(p) > 0:
        raise InvalidValueError(
            msg(
                "norm_type must be a positive number or inf, not {norm_type!r}", norm_type=norm_type
            )
        )
    return float(p)


def _vector_norm(x: Any, p: float) -> Any:
    from .ops.reduce import NORM

    return NORM.fwd(NUMPY, x, (0,), False, p)


def total_norm(arrays: Sequence[Any], norm_type: float) -> float:
    """The norm of the per-array norms (``inf``: the largest absolute value), as torch.

    Overflow gives inf, without NumPy's warning: the caller reports non-finite values."""
    if not arrays:
        return 0.0
    with NUMPY.quiet():
        if norm_type == math.inf:
            return max(float(NUMPY.max(NUMPY.abs(a), initial=0.0)) for a in arrays)
        norms = [_vector_norm(NUMPY.reshape(a, (-1,)), norm_type) for a in arrays]
        return float(_vector_norm(NUMPY.asarray(norms, dtype=NUMPY.float64), norm_type))


def clip_by_norm(
    arrays: Sequence[Any], max_norm: float, norm_type: float = 2.0, total: float | None = None
) -> tuple[float, float]:
    """Scale ``arrays`` in place so their total norm is at most ``max_norm``.

    Returns ``(total_norm, scale)`` with ``scale = min(1, max_norm / (total + 1e-6))``,
    exactly torch's coefficient (so a total below ``max_norm`` still gives a scale of 1).
    """
    if total is None:
        total = total_norm(arrays, norm_type)
    coef = max_norm / (total + 1e-6)
    scale = coef if math.isnan(coef) else min(1.0, coef)  # torch: nan stays nan
    with NUMPY.quiet():  # inf * 0 when the total is inf: nan, as torch
        for a in arrays:
            a *= scale
    return total, scale


def clip_by_value(arrays: Sequence[Any], clip_value: float) -> None:
    """Clamp every element of ``arrays`` into ``[-clip_value, clip_value]``, in place.

    The bound is first made a number of the array's dtype, as torch's clamp does: 1e300 is
    inf in float32 (NumPy would warn about the cast on every call instead)."""
    for a in arrays:
        with NUMPY.quiet():
            bound = a.dtype.type(clip_value)
        NUMPY.clip(a, -bound, bound, out=a)


def all_finite(a: Any) -> bool:
    return NUMPY.all_finite(a)
