"""The evaluator as a Python API: ``evaluate()`` and the ``Result`` it returns.

The CLI is built on this same function, so a script and a shell user get the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Result:
    """The value of a program and the gradient of every input and binding.

    ``grads[name]`` is ``None`` for an input that was not asked for (not in ``wrt``);
    ``intermediates[name]`` is ``(value, grad)`` with ``grad`` ``None`` where the binding
    depends on no ``wrt`` input.
    """

    expr: str
    value: np.ndarray
    inputs: dict[str, np.ndarray]
    grads: dict[str, np.ndarray | None]
    intermediates: dict[str, tuple[np.ndarray, np.ndarray | None]] = field(default_factory=dict)
    reduction: str | None = None
    clip: dict[str, float] | None = None
    id: Any = None
    warnings: list[str] = field(default_factory=list)

    @property
    def total_grad_norm(self) -> float:
        """The 2-norm of all input gradients together (the norm of the per-input norms)."""
        norms = [float(np.linalg.norm(g.ravel())) for g in self.grads.values() if g is not None]
        return float(np.linalg.norm(norms)) if norms else 0.0

    def to_json(self) -> dict[str, Any]:
        """The JSON response of SPEC §2, as a dict of plain Python values (strict JSON)."""
        from .io import json_array

        return {
            "id": self.id,
            "expr": self.expr,
            "output": {"shape": list(self.value.shape), "value": json_array(self.value)},
            "reduction": self.reduction,
            "inputs": {
                name: {
                    "shape": list(value.shape),
                    "value": json_array(value),
                    "requires_grad": self.grads[name] is not None,
                    "grad": json_array(self.grads[name]),
                }
                for name, value in self.inputs.items()
            },
            "intermediates": {
                name: {"shape": list(value.shape), "value": json_array(value), "grad": json_array(grad)}
                for name, (value, grad) in self.intermediates.items()
            },
            "clip": self.clip,
        }
