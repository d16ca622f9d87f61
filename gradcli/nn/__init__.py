"""``gradcli.nn``: PyTorch's gradient clipping (``gradcli.nn.utils``), for the tutorial's
code, and ``gradcli.nn.functional`` (activations and losses under torch's names)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

from .. import autograd as E
from ..autograd import Tensor
from . import functional


def _grads(parameters: Tensor | Iterable[Tensor]) -> list[Any]:
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    return [p.grad.data for p in params if p.grad is not None]


def clip_grad_norm_(
    parameters: Tensor | Iterable[Tensor],
    max_norm: float,
    norm_type: float | str = 2.0,
    error_if_nonfinite: bool = False,
) -> Tensor:
    """Scale the gradients in place so their total norm is at most ``max_norm``.

    As ``torch.nn.utils.clip_grad_norm_``: the total norm is the norm of the per-tensor
    norms (the largest absolute value for ``inf``), every gradient is multiplied by
    ``min(1, max_norm / (total + 1e-6))``, parameters whose grad is None are skipped, and
    the total norm *before* clipping is returned.
    """
    p = E.norm_type_of(norm_type)
    grads = _grads(parameters)
    total = E.total_norm(grads, p)
    if error_if_nonfinite and not math.isfinite(total):
        raise RuntimeError(
            f"The total norm of order {p} for gradients from `parameters` is non-finite, so "
            "it cannot be clipped. To disable this error and scale the gradients by the "
            "non-finite norm anyway, set `error_if_nonfinite=False`"
        )
    E.clip_by_norm(grads, float(max_norm), p, total)
    return E.tensor(total)


def clip_grad_value_(parameters: Tensor | Iterable[Tensor], clip_value: float) -> None:
    """Clamp every gradient element into ``[-clip_value, clip_value]`` in place."""
    E.clip_by_value(_grads(parameters), float(clip_value))


utils = SimpleNamespace(clip_grad_norm_=clip_grad_norm_, clip_grad_value_=clip_grad_value_)


__all__ = ["clip_grad_norm_", "clip_grad_value_", "functional", "utils"]
