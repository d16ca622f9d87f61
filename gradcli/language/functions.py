"""The function table of the language, made from the engine's registrations: every
function a program may call, its parameters, aliases and derivative (``gradcli functions``).

Nothing is listed here by hand: a function registered in :mod:`gradcli.autograd.registry`
with ``language=True`` is callable from a program, with the signature of its Python
definition (docs/engine.md, "Adding a primitive").
"""

from __future__ import annotations

import difflib
from typing import Any

from ..autograd import FUNCTIONS as REGISTERED
from ..autograd.registry import REQUIRED, FunctionSpec, Param
from ..i18n import Message, msg

# Parameter kinds: how an argument's value is converted before the engine sees it.
TENSOR, TENSORS, AXIS, INT, NUMBER, BOOL, SHAPE, TEXT = (
    "tensor",
    "tensors",
    "axis",
    "int",
    "number",
    "bool",
    "shape",
    "text",
)
_REQUIRED = REQUIRED


#: a function of the language is the engine's registration of it
Function = FunctionSpec

#: every function a program may call, by name and alias
FUNCTIONS: dict[str, Function] = {key: spec for key, spec in REGISTERED.items() if spec.language}


def suggest(name: str, candidates: Any) -> Message | str:
    """`` (did you mean `x`?)`` for the nearest known names, or nothing."""
    close = difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.6)
    if not close:
        return ""
    if len(close) == 1:
        return msg(" (did you mean `{name}`?)", name=close[0])
    if len(close) == 2:
        return msg(" (did you mean `{name}` or `{name2}`?)", name=close[0], name2=close[1])
    return msg(
        " (did you mean `{name}` or `{name2}` or `{name3}`?)",
        name=close[0],
        name2=close[1],
        name3=close[2],
    )


__all__ = [
    "AXIS", "BOOL", "FUNCTIONS", "INT", "NUMBER", "SHAPE", "TENSOR", "TENSORS", "TEXT", "Function",
    "Param", "suggest",
]  # fmt: skip
