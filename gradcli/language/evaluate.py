"""Evaluation: a parsed program run on inputs into engine calls.

``compile_program(text)`` parses once (a bounded cache keyed by the text);
``Program.run(inputs)`` evaluates it with an explicit stack — never Python recursion — so
10,000 nested parentheses or 100,000 nested unary minuses are fine. The evaluator walks the
tree and combines operators here; how its values become a function's arguments, and the
call, are in :mod:`gradcli.language.calls`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import autograd as E
from ..autograd import Tensor
from ..autograd.state import STATE
from ..errors import (
    DomainError,
    GradcliError,
    LimitError,
    NamingError,
    ParseError,
    ShapeError,
    shorten,
)
from ..i18n import msg
from .calls import Keyword, Seq, _Calls, _tensors, to_tensor
from .functions import FUNCTIONS, suggest
from .grammar import parse

CONSTANTS = {"pi": math.pi, "e": math.e, "inf": math.inf, "nan": math.nan}
#: keyword values: usable where a function takes a flag, an axis or nothing (``None``)
KEYWORD_VALUES: dict[str, Any] = {
    "true": True,
    "True": True,
    "false": False,
    "False": False,
    "none": None,
    "None": None,
}


@dataclass
class Evaluation:
    """What running a program gives: the output and every binding, in order."""

    output: Tensor
    bindings: dict[str, Tensor] = field(default_factory=dict)
    #: a number literal too large for a float (it became inf)
    literal_overflow: bool = False


def _position(node: Any) -> tuple[int | None, int | None]:
    """Where a node starts: the position of its first token (looked up only for errors, so
    parsing need not record positions on every tree node)."""
    while node is not None and hasattr(node, "children"):
        node = next((c for c in node.children if c is not None), None)
    if node is None:
        return None, None
    return getattr(node, "line", None), getattr(node, "column", None)


def _located(err: GradcliError, node: Any) -> GradcliError:
    if err.line is None:
        err.line, err.column = _position(node)
    return err


class Program:
    """A parsed program: its bindings and output expression, ready to run on inputs."""

    def __init__(self, text: str, tree: Any) -> None:
        self.text = text
        statements = list(tree.children)
        if not statements:
            raise ParseError(msg("the program is empty: nothing to evaluate"), line=1, column=1)
        *bindings, output = statements
        if getattr(output, "data", None) == "binding":
            name = output.children[0]
            raise ParseError(
                msg(
                    "the program ends with the binding `{name}` but needs an output "
                    "expression after it (e.g. add `; {name}`)",
                    name=name,
                ),
                line=name.line,
                column=name.column,
            )
        for b in bindings:
            if getattr(b, "data", None) != "binding":
                line, column = _position(b)
                raise ParseError(
                    msg(
                        "only the last item of a program can be a bare expression; give the "
                        "others a name (`name = ...`)"
                    ),
                    line=line,
                    column=column,
                )
        self.bindings = [(b.children[0], b.children[1]) for b in bindings]
        self.output = output

    @property
    def binding_names(self) -> list[str]:
        return [str(name) for name, _ in self.bindings]

    def run(
        self,
        inputs: dict[str, Tensor],
        *,
        dtype: Any = "float64",
        seed: int = 0,
        retain: bool = True,
    ) -> Evaluation:
        """Evaluate on ``inputs``; bindings retain their gradients when ``retain``."""
        for name in inputs:
            if name in FUNCTIONS:
                raise NamingError(
                    msg("an input cannot be named `{name}`: that is a function", name=name)
                )
        ev = _Evaluator(inputs, seed, dtype)
        bindings: dict[str, Tensor] = {}
        for name_tok, expr in self.bindings:
            name = str(name_tok)
            where = {"line": name_tok.line, "column": name_tok.column}
            if name in FUNCTIONS:
                raise NamingError(
                    msg("cannot bind `{name}`: it is the name of a function", name=name), **where
                )
            if name in inputs:
                raise NamingError(
                    msg("cannot bind `{name}`: it is already an input", name=name), **where
                )
            if name in bindings:
                raise NamingError(msg("`{name}` is bound twice", name=name), **where)
            value = ev.evaluate_tensor(expr, f"binding `{name}`")
            if retain and value.requires_grad:
                value.retain_grad()
            bindings[name] = value
            ev.env[name] = value
        output = ev.evaluate_tensor(self.output, "the output")
        return Evaluation(output, bindings, ev.literal_overflow)

    def free_names(self) -> set[str]:
        """Names the program reads that it does not bind and that are no functions (the
        name of a keyword argument, `axis=`, or of `.T` is not read)."""
        read: set[str] = set()
        stack = [expr for _, expr in self.bindings] + [self.output]
        while stack:
            node = stack.pop()
            if node.data == "name":
                read.add(str(node.children[0]))
            else:
                stack.extend(c for c in node.children if hasattr(c, "children"))
        bound = set(self.binding_names)
        return {
            n
            for n in read - bound
            if n not in FUNCTIONS and n not in CONSTANTS and n not in KEYWORD_VALUES
        }


#: programs up to this long are kept after parsing (the last 256 of them), so a stream of
#: requests parses each expression once; a longer one is parsed each time, as its tree
#: takes ~330 bytes a character (256 of a million characters would hold 85 GB)
CACHED_PROGRAM_CHARS = 4096


def _text(tok: Any) -> str:
    """A string literal's text, without its quotes (see the grammar's STRING)."""
    return str(tok)[1:-1]


def compile_program(text: str) -> Program:
    """Parse ``text``; a short text parsed before comes from a bounded cache."""
    if len(text) > CACHED_PROGRAM_CHARS:
        return Program(text, parse(text))
    return _compile_cached(text)


@functools.lru_cache(maxsize=256)
def _compile_cached(text: str) -> Program:
    return Program(text, parse(text))


_BINARY: dict[str, Callable[[Any, Any], Tensor]] = {
    "+": E.add,
    "-": E.subtract,
    "*": E.multiply,
    "/": E.divide,
    "@": E.matmul,
    "**": E.power,
    "^": E.power,
    "<": E.less,
    "<=": E.less_equal,
    ">": E.greater,
    ">=": E.greater_equal,
    "==": E.equal,
    "!=": E.not_equal,
}
_OP_NAMES = {"@": "matmul (@)", "**": "power (**)", "^": "power (^)"}
#: trees whose children alternate operand, operator token, operand ...
_CHAINS = frozenset({"sum", "product", "comparison", "power"})
#: a sum of more terms is one node of the graph (E.add_n), not a chain of binary adds:
#: the same value, a quarter of the time; `gradcli graph` shows it as one "add"
_LONG_SUM = 32


#: the name of the one graph node an operation of the program is drawn as (``_one_op``)
_KIND_OPS = {"index": "getitem", "attribute": "transpose", "sign": "neg", "array": "stack",
             "sum": "add"}  # fmt: skip


#: primitives drawn as the operation that made them: a product of matrices and vectors is
#: one primitive (mm, mv or dot, named as torch names its node), but the program wrote `@`,
#: matmul() or dot()
_PRODUCTS = frozenset({"mm", "mv", "dot"})


def _one_op(trace: list[Any], mark: int, out: Any, name: str, operands: list[Tensor]) -> None:
    """Make the ops traced since ``mark`` one op of the graph: ``out`` = ``name(operands)``.

    ``gradcli graph`` draws the operations the program writes. One of them may be several
    primitives (``W @ x`` of a vector is a reshape, a matrix product and a reshape;
    ``var(x)`` a mean, a difference, a square and a sum): those are traced one by one and
    redrawn here as the one operation, from the operands it reads (docs/engine.md, "Node
    names and the graph of a program").
    """
    if type(out) is not Tensor:
        return
    if len(trace) - mark == 1:
        t, prim_name, inputs = trace[mark]
        if t is out and prim_name in _PRODUCTS:
            trace[mark] = (out, name, inputs)  # `W @ x` is drawn as matmul, not mv
        return
    if len(trace) - mark < 2:
        return
    if not any(t is out for t, _, _ in trace[mark:]):
        return
    del trace[mark:]
    trace.append((out, name, tuple(operands)))


class _Evaluator(_Calls):
    def __init__(self, inputs: dict[str, Tensor], seed: int, dtype: Any) -> None:
        self.env: dict[str, Tensor] = dict(inputs)
        self.seed = seed
        self._rng: Any = None  # one generator per program, made when first drawn from
        self.dtype = dtype
        self.literal_overflow = False
        #: the trace of ``gradcli graph`` while it is being made, else None
        self.trace: list[Any] | None = STATE.trace
        #: while tracing: the tensors the last function call was given as tensor arguments
        self.operands: list[Tensor] = []

    def evaluate_tensor(self, root: Any, what: str) -> Tensor:
        try:
            return to_tensor(self.evaluate(root), self.dtype, what)
        except GradcliError as err:
            raise _located(err, root) from None

    # An explicit post-order walk: children first (on a value stack), then the node. A
    # stack entry is a node still to visit, or (node, number of operands) once its
    # operands are queued; names and numbers are leaves and are evaluated at once.
    def evaluate(self, root: Any) -> Any:
        values: list[Any] = []
        push_value = values.append
        stack: list[Any] = [root]
        push, pop = stack.append, stack.pop
        while stack:
            item = pop()
            if type(item) is tuple:
                node, n = item
                args = values[-n:] if n else []
                if n:
                    del values[-n:]
                try:
                    if self.trace is None:
                        push_value(self._combine(node, args))
                    else:
                        push_value(self._traced(node, args, self.trace))
                except GradcliError as err:
                    raise _located(err, node) from None
                except (ValueError, IndexError, TypeError) as err:
                    raise _located(
                        ShapeError(msg("{what}: {err}", what=self._what(node), err=err)), node
                    ) from None
                except ZeroDivisionError as err:
                    raise _located(
                        DomainError(msg("{what}: {err}", what=self._what(node), err=err)), node
                    ) from None
                except MemoryError:
                    raise _located(
                        LimitError(
                            msg(
                                "{what}: out of memory (the result is too large)",
                                what=self._what(node),
                            )
                        ),
                        node,
                    ) from None
                continue
            if item is None:
                push_value(None)
                continue
            kind = getattr(item, "data", None)
            if kind is None:  # a token: ... inside an index
                push_value(Ellipsis)
            elif kind == "name":
                push_value(self._lookup(item.children[0]))
            elif kind == "number":
                push_value(self._number(item.children[0]))
            elif kind == "string":
                push_value(_text(item.children[0]))
            else:
                kids = self._operands(item)
                push((item, len(kids)))
                stack.extend(reversed(kids))
        return values[0]

    @staticmethod
    def _operands(node: Any) -> list[Any]:
        kind = node.data
        if kind in ("name", "number", "string"):
            return []
        children = node.children
        if kind in _CHAINS:  # operand, operator, operand, ...
            return children[0::2]
        if kind in ("call", "keyword", "attribute"):
            start = 1 if kind != "attribute" else 0
            return [c for c in children[start:] if kind != "attribute" or hasattr(c, "children")]
        return [c for c in children if c is None or hasattr(c, "children") or c.type == "ELLIPSIS"]

    @staticmethod
    def _what(node: Any) -> str:
        kind = node.data
        if kind == "call":
            return str(node.children[0])
        for c in node.children:
            if hasattr(c, "type") and c.type in ("ADD", "MULTIPLY", "POWER", "COMPARE"):
                return _OP_NAMES.get(str(c), f"'{c}'")
        return {"index": "index", "array": "array literal"}.get(kind, kind)

    def _traced(self, node: Any, args: list[Any], trace: list[Any]) -> Any:
        """:meth:`_combine` for ``gradcli graph``: each operation one op of the trace."""
        kind = node.data
        if kind in _CHAINS and not (kind == "sum" and len(args) > _LONG_SUM):
            acc = args[0]
            for op, rhs in zip(node.children[1::2], args[1:], strict=True):
                fn, op = _BINARY[str(op)], str(op)
                x, y = self.tensor(acc, op), self.tensor(rhs, op)
                mark = len(trace)
                acc = fn(x, y)
                _one_op(trace, mark, acc, fn.__name__, [x, y])
            return acc
        mark = len(trace)
        self.operands = []
        out = self._combine(node, args)
        if kind == "call":
            spec = FUNCTIONS.get(str(node.children[0]))
            name = spec.name if spec is not None else str(node.children[0])
            operands = self.operands  # the tensors its tensor parameters were given
        else:
            name = _KIND_OPS.get(kind, kind)
            operands = _tensors(args[:1] if kind in ("index", "attribute", "sign") else args)
        _one_op(trace, mark, out, name, operands)
        return out

    def _combine(self, node: Any, args: list[Any]) -> Any:
        kind = node.data
        if kind == "number":
            return self._number(node.children[0])
        if kind == "name":
            return self._lookup(node.children[0])
        if kind == "string":
            return _text(node.children[0])
        if kind == "sum" and len(args) > _LONG_SUM:
            ops = [str(op) for op in node.children[1::2]]
            terms = [self.tensor(args[0], ops[0])]
            terms += [self.tensor(a, op) for a, op in zip(args[1:], ops, strict=True)]
            return E.add_n(terms, [False] + [op == "-" for op in ops])
        if kind in _CHAINS:
            acc, tensor = args[0], self.tensor
            for op, rhs in zip(node.children[1::2], args[1:], strict=True):
                op = str(op)
                acc = _BINARY[op](tensor(acc, op), tensor(rhs, op))
            return acc
        if kind == "sign":
            value = self.tensor(args[0], "unary -")
            return E.negative(value) if str(node.children[0]) == "-" else value
        if kind == "call":
            return self._call(node, args)
        if kind == "keyword":
            tok = node.children[0]
            return Keyword(str(tok), args[0], tok.line, tok.column)
        if kind == "array":
            return Seq(args, is_tuple=False)
        if kind == "tuple":
            return Seq(args, is_tuple=True)
        if kind == "subscripts":
            return tuple(args)
        if kind == "slice":
            return slice(*(None if a is None else self._int(a, "slice") for a in args))
        if kind == "index":
            target = self.tensor(args[0], "index")
            parts = args[1]
            if len(parts) == 1 and isinstance(parts[0], Seq) and parts[0].is_tuple:
                parts = tuple(parts[0])  # x[(0, 1)] is x[0, 1] and x[()] is x, as in NumPy
            return E.getitem(target, tuple(self._index_part(p) for p in parts))
        if kind == "attribute":
            attr = node.children[1]
            if str(attr) == "T":
                return E.transpose(self.tensor(args[0], ".T"))
            raise NamingError(
                msg(
                    "unknown attribute `.{attr}`: the only attribute is `.T` (transpose)", attr=attr
                ),
                line=attr.line,
                column=attr.column,
            )
        raise ParseError(msg("unsupported construct {kind!r}", kind=kind))  # pragma: no cover

    # --- leaves -------------------------------------------------------------------
    def _number(self, tok: Any) -> Tensor:
        value = float(str(tok).replace("_", ""))
        if math.isinf(value):
            self.literal_overflow = True
        return E.constant(value, self.dtype)

    def _lookup(self, tok: Any) -> Any:
        name = str(tok)
        value = self.env.get(name)
        if value is not None:
            return value
        if name in CONSTANTS:
            return E.constant(CONSTANTS[name], self.dtype)
        if name in KEYWORD_VALUES:
            return KEYWORD_VALUES[name]
        if name in FUNCTIONS:
            raise NamingError(
                msg(
                    "`{name}` is a function: call it, as in {signature}",
                    name=name,
                    signature=FUNCTIONS[name].signature,
                ),
                line=tok.line,
                column=tok.column,
            )
        known = [*self.env, *CONSTANTS]
        shown = shorten(name)
        raise NamingError(
            msg(
                "unknown name `{shown}`{suggest}: give it a value as {shown}=VALUE",
                shown=shown,
                suggest=suggest(name, known + list(FUNCTIONS)),
            ),
            line=tok.line,
            column=tok.column,
        )
