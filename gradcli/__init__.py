"""gradcli: a command-line gradient calculator.

``gradcli.evaluate(expr, inputs)`` evaluates a program of the expression language and
backpropagates. ``gradcli.tensor(...)`` is a small tensor API whose gradient handling mirrors
PyTorch's, so the autograd tutorial runs with ``import gradcli as torch``::

    x = gradcli.tensor([2.0, 3.0], requires_grad=True)
    (x * x).sum().backward()
    x.grad                        # tensor([4., 6.])

Every function of the language is available as ``gradcli.<name>`` and as a method.
Attributes are imported on first use, so the command line starts without NumPy when it
does not need it.
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

__version__ = "0.1.0"

_FROM_API = ("Result", "evaluate")
_FROM_ERRORS = (
    "DomainError", "GradcliError", "InputError", "InvalidValueError", "LimitError",
    "NamingError", "ParseError", "ShapeError",
)  # fmt: skip
_FROM_ENGINE = (
    "Tensor", "tensor", "from_numpy", "no_grad", "grad", "manual_seed", "float32", "float64",
    "add", "subtract", "multiply", "divide", "power", "negative", "absolute",
    "less", "less_equal", "greater", "greater_equal", "equal", "not_equal",
    "abs", "sign", "sqrt", "square", "exp", "expm1", "log", "log2", "log10", "log1p", "sin",
    "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh",
    "arctanh", "sigmoid", "relu", "softplus", "floor", "ceil", "round", "maximum", "minimum",
    "arctan2", "pow", "clip", "where", "sum", "mean", "prod", "max", "min", "amax", "amin",
    "logsumexp", "norm", "var", "std", "softmax", "log_softmax", "reshape", "transpose",
    "flatten", "squeeze", "expand_dims", "concatenate", "stack", "flip", "matmul", "dot",
    "outer", "trace", "diag", "det", "inv", "solve", "zeros", "ones", "full", "eye",
    "arange", "linspace", "rand", "randn",
)  # fmt: skip
_ALIASES = {
    "asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh",
    "acosh": "arccosh", "atanh": "arctanh", "atan2": "arctan2", "concat": "concatenate",
}  # fmt: skip

__all__ = [
    *_FROM_API, *_FROM_ERRORS, *_FROM_ENGINE, *_ALIASES, "analysis", "autograd", "nn", "optim",
    "__version__",
]  # fmt: skip


# functions that take an axis: they also accept torch's ``dim=`` and ``keepdim=``
_AXIS_FUNCTIONS = {
    "sum", "mean", "prod", "max", "min", "amax", "amin", "logsumexp", "norm", "var", "std",
    "softmax", "log_softmax", "squeeze", "expand_dims", "flip", "concatenate", "concat",
    "stack",
}  # fmt: skip


def __getattr__(name: str) -> Any:
    if name in _FROM_ENGINE or name in _ALIASES:
        engine = importlib.import_module(".engine", __name__)
        value = getattr(engine, _ALIASES.get(name, name))
        if name in _AXIS_FUNCTIONS:
            value = engine.torch_keywords(value)
    elif name in _FROM_API:
        value = getattr(importlib.import_module(".api", __name__), name)
    elif name in _FROM_ERRORS:
        value = getattr(importlib.import_module(".errors", __name__), name)
    elif name in ("nn", "optim", "analysis"):
        value = importlib.import_module(f".{name}", __name__)
    elif name == "autograd":
        engine = importlib.import_module(".engine", __name__)
        value = SimpleNamespace(grad=engine.grad)
    else:
        raise AttributeError(f"module 'gradcli' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
