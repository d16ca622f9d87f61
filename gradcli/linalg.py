"""``gradcli.linalg``: the engine's linear algebra that ``torch.linalg`` has, under the same
names (``torch.linalg.det(A)``), for scripts run with ``import gradcli as torch``
(docs/api.md, "PyTorch's namespaces"). Each name is the function ``gradcli.<name>``,
looked up on first use.
"""

from __future__ import annotations

from typing import Any

#: the names torch.linalg has and the engine registers
NAMES = ("det", "inv", "solve", "slogdet", "cholesky", "pinv")


def __getattr__(name: str) -> Any:
    if name not in NAMES:
        raise AttributeError(f"module 'gradcli.linalg' has no attribute {name!r}")
    from .autograd import FUNCTIONS

    value = FUNCTIONS[name].call
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(NAMES)


__all__ = list(NAMES)
