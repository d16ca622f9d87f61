"""``gradcli.nn.functional``: the engine's functions that ``torch.nn.functional`` has, under
the same names, so that ``F.gelu(x)`` or ``F.mse_loss(y, t)`` in a tutorial script runs with
``import gradcli as torch`` (docs/api.md, "PyTorch's namespaces"). Each name is the
function ``gradcli.<name>``, looked up on first use.
"""

from __future__ import annotations

from typing import Any

#: the names torch.nn.functional has and the engine registers
NAMES = (
    "relu", "sigmoid", "tanh", "softplus", "silu", "softmax", "log_softmax",
    "gelu", "leaky_relu", "elu", "softsign",
    "mse_loss", "l1_loss", "huber_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "cross_entropy", "nll_loss",
)  # fmt: skip


def __getattr__(name: str) -> Any:
    if name not in NAMES:
        raise AttributeError(f"module 'gradcli.nn.functional' has no attribute {name!r}")
    from ..autograd import FUNCTIONS

    value = FUNCTIONS[name].call
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(NAMES)


__all__ = list(NAMES)
