"""gradcli: a command-line gradient calculator.

``gradcli.evaluate(expr, inputs)`` evaluates a program of the expression language and
backpropagates. ``gradcli.tensor(...)`` is a small tensor API whose gradient handling mirrors
PyTorch's, so the autograd tutorial runs with ``import gradcli as torch``::

    x = gradcli.tensor([2.0, 3.0], requires_grad=True)
    (x * x).sum().backward()
    x.grad                        # tensor([4., 6.])

Every function registered with the engine (:mod:`gradcli.autograd.registry`) is available as
``gradcli.<name>`` and, where torch has one, as a method. Attributes are imported on first
use, so the command line starts without NumPy when it does not need it.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

__version__ = "0.1.0"

_FROM_API = ("Result", "evaluate")
_FROM_ANALYSIS = ("hvp", "jvp")  # forward mode and Hessian-vector products of a program
_FROM_COMPILED = ("Compiled", "Plans", "compile")
_FROM_ERRORS = (
    "DomainError", "GradcliError", "InputError", "InvalidValueError", "LimitError",
    "NamingError", "ParseError", "ShapeError",
)  # fmt: skip
_MODULES = ("analysis", "autograd", "func", "linalg", "nn", "optim")


def _engine_names() -> list[str]:
    autograd = importlib.import_module(".autograd", __name__)
    return [*autograd.API, *autograd.FUNCTIONS]


def __getattr__(name: str) -> Any:
    if name in _FROM_API:
        value = getattr(importlib.import_module(".api", __name__), name)
    elif name in _FROM_ANALYSIS:
        value = getattr(importlib.import_module(".analysis", __name__), name)
    elif name in _FROM_COMPILED:
        value = getattr(importlib.import_module(".compiled", __name__), name)
    elif name in _FROM_ERRORS:
        value = getattr(importlib.import_module(".errors", __name__), name)
    elif name in _MODULES:
        value = importlib.import_module(f".{name}", __name__)
    elif name == "__all__":
        # computed on first use: listing the engine's functions imports NumPy
        value = [
            *_FROM_API, *_FROM_ANALYSIS, *_FROM_COMPILED, *_FROM_ERRORS, *_engine_names(),
            *_MODULES, "__version__",
        ]  # fmt: skip
    elif name.startswith("__") or _is_submodule(name):
        # `from . import options` asks here first: answer without loading the engine
        raise AttributeError(f"module 'gradcli' has no attribute {name!r}")
    else:
        autograd = importlib.import_module(".autograd", __name__)
        if name in autograd.API:
            value = getattr(autograd, name)
        elif name in autograd.FUNCTIONS:
            value = autograd.FUNCTIONS[name].call
        else:
            raise AttributeError(f"module 'gradcli' has no attribute {name!r}")
    globals()[name] = value
    return value


def _is_submodule(name: str) -> bool:
    here = Path(__file__).parent
    return (here / f"{name}.py").is_file() or (here / name / "__init__.py").is_file()


def __dir__() -> list[str]:
    return sorted(__getattr__("__all__"))
