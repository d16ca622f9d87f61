"""The function table of the language, made from the engine's registrations: every
function a program may call, its parameters, aliases and derivative (``gradcli functions``).

Nothing is listed here by hand: a function registered in :mod:`gradcli.autograd.registry`
with ``language=True`` is callable from a program, with the signature of its Python
definition (docs/engine.md, "Adding a primitive").
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..autograd import FUNCTIONS as REGISTERED
from ..autograd import Tensor
from ..autograd.registry import REQUIRED, Param

# Parameter kinds: how an argument's value is converted before the engine sees it.
TENSOR, TENSORS, AXIS, INT, NUMBER, BOOL, SHAPE = (
    "tensor",
    "tensors",
    "axis",
    "int",
    "number",
    "bool",
    "shape",
)
_REQUIRED = REQUIRED


@dataclass(frozen=True)
class Function:
    name: str
    call: Callable[..., Tensor]
    params: tuple[Param, ...]
    summary: str
    derivative: str
    aliases: tuple[str, ...] = ()
    needs_context: bool = False  # constructors: get dtype (and the generator) as keywords
    random: bool = False  # draws from the program's generator (``rng``)

    @property
    def signature(self) -> str:
        parts = []
        for p in self.params:
            if p.varargs:
                parts.append(f"*{p.name}")
            elif p.default is _REQUIRED:
                parts.append(p.name)
            else:
                d = p.default
                shown = "none" if d is None else str(d).lower() if isinstance(d, bool) else d
                parts.append(f"{p.name}={shown}")
        return f"{self.name}({', '.join(parts)})"


def _table() -> dict[str, Function]:
    table: dict[str, Function] = {}
    made: dict[str, Function] = {}
    for key, spec in REGISTERED.items():
        if not spec.language:
            continue
        fn = made.get(spec.name)
        if fn is None:
            fn = made[spec.name] = Function(
                spec.name,
                spec.call,
                spec.params,
                spec.summary,
                spec.derivative,
                spec.aliases,
                needs_context=bool(spec.context),
                random="rng" in spec.context,
            )
        table[key] = fn
    return table


FUNCTIONS: dict[str, Function] = _table()


def suggest(name: str, candidates: Any) -> str:
    """`` (did you mean `x`?)`` for the nearest known names, or nothing."""
    close = difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.6)
    if not close:
        return ""
    return " (did you mean " + " or ".join(f"`{c}`" for c in close) + "?)"
