"""The autograd engine: tensors, graph nodes, the backward pass and the primitives with
their derivative rules (docs/engine.md).

* :mod:`.state` — grad mode, the element limit and floating-point counting, per thread
* :mod:`.backend` — the array namespace (NumPy); rules never import NumPy themselves
* :mod:`.node` and :mod:`.tensor` — a tensor's ``grad_fn`` is a node that keeps only what
  its rule reads
* :mod:`.backward` — ``backward()`` and ``grad()``
* :mod:`.registry` — one registration per primitive; from it, everything else
* :mod:`.ops` — the primitives by family; :mod:`.creation`, :mod:`.clip`

Every registered function is an attribute of this module (``autograd.tanh``), of
``gradcli`` and, where torch has one, a Tensor method.
"""

from __future__ import annotations

from typing import Any

from . import ops
from .backend import NUMPY
from .backward import grad
from .clip import all_finite, clip_by_norm, clip_by_value, norm_type_of, total_norm
from .creation import constant, generator, manual_seed
from .node import AccumulateGrad, Node
from .ops.elementwise import add_n
from .registry import FUNCTIONS, OPS, Primitive, namespaces
from .shapes import normalize_axis
from .state import (
    DEFAULT_MAX_ELEMENTS,
    check_size,
    computation,
    element_limit,
    enable_grad,
    floating_errors,
    is_grad_enabled,
    no_cycle_collection,
    no_grad,
    set_grad_enabled,
    tracing,
)
from .tensor import Size, Tensor, const, from_numpy, lift, tensor

float32 = NUMPY.float32
float64 = NUMPY.float64

#: names of ``gradcli`` that are not registered functions
API = (
    "Size", "Tensor", "tensor", "from_numpy", "no_grad", "enable_grad", "set_grad_enabled",
    "is_grad_enabled", "grad", "manual_seed", "float32", "float64",
)  # fmt: skip

globals().update({name: spec.call for name, spec in FUNCTIONS.items()})

from . import functional  # noqa: E402  (torch.autograd.functional; uses the functions above)


def __getattr__(name: str) -> Any:
    """Registered functions are set above; this only tells type checkers they exist."""
    spec = FUNCTIONS.get(name)
    if spec is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return spec.call


__all__ = [
    "API",
    "DEFAULT_MAX_ELEMENTS",
    "FUNCTIONS",
    "NUMPY",
    "OPS",
    "AccumulateGrad",
    "Node",
    "Primitive",
    "Size",
    "Tensor",
    "add_n",
    "all_finite",
    "backward",
    "check_size",
    "clip_by_norm",
    "clip_by_value",
    "computation",
    "const",
    "constant",
    "element_limit",
    "enable_grad",
    "float32",
    "float64",
    "floating_errors",
    "from_numpy",
    "functional",
    "generator",
    "grad",
    "is_grad_enabled",
    "lift",
    "manual_seed",
    "namespaces",
    "no_cycle_collection",
    "no_grad",
    "norm_type_of",
    "normalize_axis",
    "ops",
    "set_grad_enabled",
    "tensor",
    "total_norm",
    "tracing",
]  # fmt: skip
