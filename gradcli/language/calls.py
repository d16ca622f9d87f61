"""Calls: a program's values made into what the engine's functions take.

``Seq`` and ``Keyword`` are the values of list and tuple literals and of keyword arguments
before a call says what they are; ``to_tensor`` makes a value a tensor (an array literal
stacked iteratively). ``_Calls``, a base of the evaluator (``evaluate._Evaluator``),
converts a value to the kind of the parameter it is given to, binds a call's arguments to the
function's parameters and makes the call (docs/language.md, "Function calls").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .. import autograd as E
from ..autograd import Tensor
from ..autograd.replay import opaque
from ..errors import DomainError, InvalidValueError, NamingError, ShapeError, shorten
from ..i18n import msg
from .functions import (
    _REQUIRED,
    AXIS,
    BOOL,
    FUNCTIONS,
    INT,
    NUMBER,
    SHAPE,
    TENSOR,
    TENSORS,
    TEXT,
    Function,
    Param,
    suggest,
)


class Seq(list[Any]):
    """The value of a list or tuple literal before it is known whether it is a tensor
    (``[1, 2] * x``), a sequence of tensors (``concatenate([a, b])``) or a shape/axes."""

    def __init__(self, items: list[Any], is_tuple: bool) -> None:
        super().__init__(items)
        self.is_tuple = is_tuple


@dataclass
class Keyword:
    name: str
    value: Any
    line: int | None
    column: int | None


def to_tensor(value: Any, dtype: Any, what: str = "value") -> Tensor:
    """A Seq (array literal) stacked into a tensor; keyword values refused."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, Seq):
        return _stack_literal(value, dtype)
    if value is None or isinstance(value, bool):
        shown = {None: "none", True: "true", False: "false"}[value]
        raise InvalidValueError(
            msg("{what}: `{shown}` is a keyword value, not a tensor", what=what, shown=shown)
        )
    if value is Ellipsis or isinstance(value, slice):
        raise InvalidValueError(
            msg("{what}: `...` and slices are only allowed inside x[...]", what=what)
        )
    if isinstance(value, str):
        raise InvalidValueError(
            msg(
                '{what}: the string "{value}" is not a tensor; a string is only the '
                "argument of a function that takes one (`gradcli functions` shows which)",
                what=what,
                value=shorten(value),
            )
        )
    return E.constant(float(value), dtype)


def _stack_literal(seq: Seq, dtype: Any) -> Tensor:
    """Stack a (possibly nested) literal iteratively; a ragged literal is a shape error."""
    # Post-order over nested Seqs with an explicit stack.
    out: dict[int, Tensor] = {}
    stack: list[tuple[Seq, bool]] = [(seq, False)]
    while stack:
        s, done = stack.pop()
        if not done:
            stack.append((s, True))
            stack.extend((c, False) for c in s if isinstance(c, Seq) and id(c) not in out)
            continue
        items = [
            out[id(c)] if isinstance(c, Seq) else to_tensor(c, dtype, "array literal") for c in s
        ]
        if not items:
            out[id(s)] = E.zeros((0,), dtype=dtype)
            continue
        first = items[0].shape
        if len(first) >= 64:  # NumPy's limit on dimensions
            raise ShapeError(msg("array literal nested more than 64 levels deep"))
        for i, t in enumerate(items):
            if t.shape != first:
                raise ShapeError(
                    msg(
                        "ragged array literal: element 1 has shape {first} but element {i} has "
                        "shape {shape}",
                        first=first,
                        i=i + 1,
                        shape=t.shape,
                    )
                )
        if not any(t.requires_grad for t in items):
            for t in items:  # copied into a new array: a plan cannot follow the inputs
                opaque(t, "an array literal")
            E.check_size((len(items), *first), "array literal")
            out[id(s)] = E.tensor([t.data for t in items], dtype=dtype)
        else:
            out[id(s)] = E.stack(items)
    return out[id(seq)]


def _tensors(value: Any) -> list[Tensor]:
    """The tensors among an operation's operands (in lists too)."""
    if type(value) is Tensor:
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


class _Calls:
    """The evaluator's conversions and function calls; the state they read is the
    evaluator's, set by ``evaluate._Evaluator.__init__``."""

    dtype: Any
    seed: int
    _rng: Any
    trace: list[Any] | None
    operands: list[Tensor]

    # --- conversions ------------------------------------------------------------------
    def tensor(self, value: Any, what: str) -> Tensor:
        return to_tensor(value, self.dtype, what)

    def _int(self, value: Any, what: str) -> int:
        if isinstance(value, bool) or value is None:
            raise InvalidValueError(
                msg("{what}: expected a whole number, got {value}", what=what, value=value)
            )
        t = self.tensor(value, what)
        if t.ndim != 0:
            raise InvalidValueError(
                msg("{what}: expected a whole number, got shape {shape}", what=what, shape=t.shape)
            )
        opaque(t, what)  # read into Python: a plan cannot hold it if it depends on inputs
        f = float(t.data)
        if not math.isfinite(f) or not f.is_integer():
            raise InvalidValueError(
                msg("{what}: expected a whole number, got {f:g}", what=what, f=f)
            )
        return int(f)

    def _ints(self, value: Any, what: str) -> tuple[int, ...]:
        if isinstance(value, Seq):
            return tuple(self._int(v, what) for v in value)
        t = self.tensor(value, what)
        if t.ndim == 0:
            return (self._int(t, what),)
        if t.ndim != 1:
            raise InvalidValueError(
                msg("{what}: expected whole numbers, got shape {shape}", what=what, shape=t.shape)
            )
        opaque(t, what)
        return tuple(self._int(E.constant(float(v), self.dtype), what) for v in t.data)

    def _index_part(self, part: Any) -> Any:
        if part is None or part is Ellipsis or isinstance(part, slice):
            return part
        if isinstance(part, bool):
            raise InvalidValueError(msg("index: true/false cannot index; use where(...)"))
        t = self.tensor(part, "index")
        if t.ndim == 0:
            return self._int(t, "index")
        opaque(t, "index")
        return t.data  # an integer array (checked by the engine)

    def _convert(self, fn: Function, p: Param, value: Any) -> Any:
        what: str = msg("{function}: argument `{name}`", function=fn.name, name=p.name)
        if value is None and p.default is None:
            return None  # `weight=none` where the signature shows it
        if p.kind == TENSOR:
            return self.tensor(value, what)
        if p.kind == TENSORS:
            if isinstance(value, Seq):
                return [self.tensor(v, what) for v in value]
            return self.tensor(value, what)
        if p.kind == TEXT:
            if not isinstance(value, str):
                raise InvalidValueError(
                    msg(
                        '{what}: expected a string in quotes, as "{default}"',
                        what=what,
                        default=p.default,
                    )
                    if isinstance(p.default, str)
                    else msg("{what}: expected a string in quotes", what=what)
                )
            return value
        if p.kind == AXIS:
            if value is None:
                return None
            ints = self._ints(value, what)
            is_scalar = not isinstance(value, Seq) and self.tensor(value, what).ndim == 0
            return ints[0] if is_scalar else ints
        if p.kind == INT:
            return self._int(value, what)
        if p.kind == BOOL:
            if isinstance(value, bool):
                return value
            return bool(self._int(value, what))
        if p.kind == NUMBER:
            t = self.tensor(value, what)
            if t.ndim != 0:
                raise InvalidValueError(
                    msg("{what}: expected a number, got shape {shape}", what=what, shape=t.shape)
                )
            opaque(t, what)
            return float(t.data)
        if p.kind == SHAPE:
            return self._ints(value, what)
        raise AssertionError(p.kind)  # pragma: no cover

    def _call(self, node: Any, args: list[Any]) -> Tensor:
        tok = node.children[0]
        name = str(tok)
        fn = FUNCTIONS.get(name)
        if fn is None:
            hint = suggest(name, FUNCTIONS)
            raise NamingError(
                msg(
                    "unknown function `{name}`{hint}; `gradcli functions` lists them all",
                    name=shorten(name),
                    hint=hint,
                ),
                line=tok.line,
                column=tok.column,
            )
        bound = self._bind(fn, args, tok)
        positional = [bound[p.name] for p in fn.params]
        if self.trace is not None:
            self.operands = _tensors(
                [bound[p.name] for p in fn.params if p.kind in (TENSOR, TENSORS)]
            )
        context: dict[str, Any] = {}
        if fn.needs_context:
            if fn.random:
                if self._rng is None:
                    self._rng = E.generator(self.seed)
                context["rng"] = self._rng
            context["dtype"] = self.dtype
        try:
            out = fn.call(*positional, **context)
        except np_linalg_error() as err:
            raise DomainError(msg("{name}: {err}", name=fn.name, err=err)) from None
        if isinstance(out, tuple):  # several tensors (slogdet's sign, logabsdet): stacked
            return E.stack(list(out))
        return out

    def _bind(self, fn: Function, args: list[Any], tok: Any) -> dict[str, Any]:
        positional = [a for a in args if not isinstance(a, Keyword)]
        keywords = [a for a in args if isinstance(a, Keyword)]
        params = fn.params
        bound: dict[str, Any] = {}
        i = 0
        for p in params:
            if p.varargs:
                rest = positional[i:]
                i = len(positional)
                if p.kind == TENSOR and rest:  # operands (einsum's): a tuple of tensors
                    bound[p.name] = tuple(self._convert(fn, p, r) for r in rest)
                elif len(rest) == 1:
                    bound[p.name] = self._convert(fn, p, rest[0])
                elif rest:
                    bound[p.name] = tuple(v for r in rest for v in self._convert(fn, p, r))
                break
            if i < len(positional):
                bound[p.name] = self._convert(fn, p, positional[i])
                i += 1
        if i < len(positional):
            raise NamingError(
                msg(
                    "{signature} takes at most {n_params} arguments, got {n_positional}",
                    signature=fn.signature,
                    n_params=len(params),
                    n_positional=len(positional),
                )
                if len(params) != 1
                else msg(
                    "{signature} takes at most 1 argument, got {n_positional}",
                    signature=fn.signature,
                    n_positional=len(positional),
                ),
                line=tok.line,
                column=tok.column,
            )
        names = [p.name for p in params]
        for kw in keywords:
            target = next((q for q in params if q.name == kw.name), None)
            if target is None:
                raise NamingError(
                    msg(
                        "{name}() has no argument `{name2}`{suggest}; it takes {signature}",
                        name=fn.name,
                        name2=kw.name,
                        suggest=suggest(kw.name, names),
                        signature=fn.signature,
                    ),
                    line=kw.line,
                    column=kw.column,
                )
            if target.name in bound:
                raise NamingError(
                    msg("{name}() got argument `{name2}` twice", name=fn.name, name2=kw.name),
                    line=kw.line,
                    column=kw.column,
                )
            bound[target.name] = self._convert(fn, target, kw.value)
        for p in params:
            if p.name not in bound:
                if p.default is _REQUIRED:
                    raise NamingError(
                        msg(
                            "{name}() is missing the argument `{name2}`: {signature}",
                            name=fn.name,
                            name2=p.name,
                            signature=fn.signature,
                        ),
                        line=tok.line,
                        column=tok.column,
                    )
                if not p.varargs:
                    bound[p.name] = p.default
        if any(p.varargs for p in params):
            p = next(p for p in params if p.varargs)
            if p.name not in bound:
                raise NamingError(
                    msg(
                        "{name}() is missing the argument `{name2}`: {signature}",
                        name=fn.name,
                        name2=p.name,
                        signature=fn.signature,
                    ),
                    line=tok.line,
                    column=tok.column,
                )
        return bound


def np_linalg_error() -> type[Exception]:
    """The backend's error for a singular matrix (NumPy's LinAlgError)."""
    return E.NUMPY.LinAlgError
