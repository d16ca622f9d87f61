"""gradcli: a command-line gradient calculator.

``gradcli.evaluate(expr, inputs)`` evaluates a program of the expression language and
backpropagates; ``gradcli.tensor(...)`` is a small tensor API whose gradient handling
mirrors PyTorch's.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .api import Result, evaluate
from .engine import Tensor, from_numpy, grad, no_grad, tensor
from .errors import (
    DomainError,
    GradcliError,
    InputError,
    InvalidValueError,
    LimitError,
    NamingError,
    ParseError,
    ShapeError,
)

__all__ = [
    "DomainError",
    "GradcliError",
    "InputError",
    "InvalidValueError",
    "LimitError",
    "NamingError",
    "ParseError",
    "Result",
    "ShapeError",
    "Tensor",
    "__version__",
    "evaluate",
    "from_numpy",
    "grad",
    "no_grad",
    "tensor",
]
