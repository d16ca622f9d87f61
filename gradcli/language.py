"""The expression language: grammar loading, parsing, and evaluation into engine calls.

``compile_program(text)`` parses once (a bounded cache keyed by the text);
``Program.run(inputs)`` evaluates it with an explicit stack — never Python recursion — so
10,000 nested parentheses or 100,000 nested unary minuses are fine.
"""

from __future__ import annotations

import difflib
import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from . import engine as E
from .engine import Tensor
from .errors import (
    DomainError,
    GradcliError,
    InvalidValueError,
    LimitError,
    NamingError,
    ParseError,
    ShapeError,
)

GRAMMAR_FILE = "gradcli.lark"
#: the longest program accepted unless asked for more (``--max-program-chars``). Parsing,
#: evaluating and backpropagating cost up to ~10 µs and ~800 bytes a character, so a
#: program this long may take ~10 s and ~0.8 GB: the same envelope as one tensor at the
#: default element limit (10^8 float64 values)
DEFAULT_MAX_PROGRAM_CHARS = 1_000_000

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


# --------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------


def grammar_text() -> str:
    """The grammar, from the installed package or, in a source checkout, ``grammars/``."""
    try:
        return resources.files("gradcli.grammars").joinpath(GRAMMAR_FILE).read_text("utf-8")
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError):
        source = Path(__file__).resolve().parent.parent / "grammars" / GRAMMAR_FILE
        return source.read_text("utf-8")


class _Lexer:
    """The grammar's own terminals, in lark's order, as one regular expression.

    It replaces lark's lexer (about 2 µs a token through several layers; this is a third
    of that) and does two more things in the same pass: a newline inside brackets is white
    space, as in Python, and every NAME is checked to be an identifier.
    """

    def __init__(self, parser: Any) -> None:
        import re

        conf = parser.lexer_conf
        terminals = sorted(
            conf.terminals,
            key=lambda t: (-t.priority, -t.pattern.max_width, -len(t.pattern.value), t.name),
        )
        alternatives = (f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in terminals)
        self.match = re.compile("|".join(alternatives), conf.g_regex_flags).match
        self.ignore = frozenset(conf.ignore)
        # As lark does: a pattern's match that spells a string terminal is that terminal.
        self.retype: dict[str, dict[str, str]] = {}
        strings = [t for t in terminals if t.pattern.type == "str"]
        for t in terminals:
            if t.pattern.type == "re":
                regexp = t.pattern.to_regexp()
                spelled = {
                    s.pattern.value: s.name
                    for s in strings
                    if s.priority == t.priority
                    and (m := re.match(regexp, s.pattern.value, conf.g_regex_flags))
                    and m.group(0) == s.pattern.value
                }
                if spelled:
                    self.retype[t.name] = spelled

    def tokens(self, text: str, names: set[str] | None = None) -> Iterator[Any]:
        """The tokens of ``text``; every NAME is also added to ``names`` when given."""
        from lark import Token

        match, ignore, retype = self.match, self.ignore, self.retype
        # A Token is a str with the eight attributes lark documents; filling them in here
        # costs half of what Token(...) does through its two layers of constructors.
        new = str.__new__
        pos, end, line, line_start, depth = 0, len(text), 1, 0, 0
        while pos < end:
            m = match(text, pos)
            if m is None:
                column = pos - line_start + 1
                raise ParseError(
                    f"unexpected character {text[pos]!r} at line {line}, column {column}",
                    line=line,
                    column=column,
                    context=_caret(text, line, column),
                )
            kind: str = m.lastgroup  # type: ignore[assignment]  # a match has a group
            value, start, pos = m.group(), pos, m.end()
            tok_line, column = line, start - line_start + 1
            if "\n" in value:
                line += value.count("\n")
                line_start = start + value.rindex("\n") + 1
            if kind in ignore:
                continue
            if kind in retype:
                kind = retype[kind].get(value, kind)
            if kind == "NAME":
                if not value.isidentifier():
                    raise ParseError(
                        f"`{value}` is not a valid name (names are identifiers: letters, "
                        "digits and _, not starting with a digit)",
                        line=tok_line,
                        column=column,
                    )
                if names is not None:
                    names.add(value)
            elif kind == "LPAR" or kind == "LSQB":
                depth += 1
            elif kind == "RPAR" or kind == "RSQB":
                depth = depth - 1 if depth else 0
            elif kind == "_NEWLINE" and depth:
                continue
            tok = new(Token, value)
            tok.type = kind
            tok.value = value
            tok.start_pos = start
            tok.line = tok_line
            tok.column = column
            tok.end_line = tok.end_column = tok.end_pos = None
            yield tok

    def parse(self, parser: Any, text: str) -> Any:
        """Feed the tokens of ``text`` to the LALR ``parser``: the tree."""
        from lark import Token

        state = parser.parse_interactive().parser_state
        feed = state.feed_token
        for tok in self.tokens(text):
            feed(tok)
        line, column = _end_position(text)
        return state.feed_token(Token("$END", "", len(text), line, column), True)


TABLES_FILE = "gradcli.tables.json"


# Positions live on tokens only (propagating them to every node costs ~40% of parse time).
_PARSER_OPTIONS = {"parser": "lalr", "lexer": "basic", "maybe_placeholders": True}


def _build_parser(text: str) -> Any:
    from lark import Lark

    return Lark(text, **_PARSER_OPTIONS)


def _tables_key(text: str) -> dict[str, str]:
    import hashlib

    import lark

    return {
        "grammar_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "lark": lark.__version__,
        "options": repr(sorted(_PARSER_OPTIONS.items())),
    }


def parser_tables(text: str | None = None) -> str:
    """The LALR tables of the grammar as JSON text (what ``grammars/gradcli.tables.json``
    holds): building them takes ~100 ms, loading them ~5 ms, at every start."""
    import json

    from lark.grammar import Rule
    from lark.lexer import TerminalDef

    text = grammar_text() if text is None else text
    data, memo = _build_parser(text).memo_serialize([TerminalDef, Rule])
    data["options"]["postlex"] = None  # given again when loading
    doc = {**_tables_key(text), "data": data, "memo": memo}
    return json.dumps(_json_safe(doc), separators=(",", ":"), sort_keys=True) + "\n"


# JSON has only string keys and no tuples: lark's integer-keyed dicts are stored as pairs.
_INT_KEYS = "__int_keys__"


def _json_safe(obj: Any) -> Any:
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj):
            return {k: _json_safe(v) for k, v in obj.items()}
        return {_INT_KEYS: [[k, _json_safe(v)] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def _from_json(obj: dict[str, Any]) -> Any:
    if _INT_KEYS in obj:
        return {k: v for k, v in obj[_INT_KEYS]}
    return obj


@functools.lru_cache(maxsize=1)
def _parser() -> Any:
    """The LALR parser, from the shipped tables when they match this grammar and this lark
    (an edited grammar or another lark version falls back to building them)."""
    import json

    from lark import Lark

    text = grammar_text()
    try:
        raw = resources.files("gradcli.grammars").joinpath(TABLES_FILE).read_text("utf-8")
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError):
        try:
            source = Path(__file__).resolve().parent.parent / "grammars" / TABLES_FILE
            raw = source.read_text("utf-8")
        except OSError:
            raw = ""
    if raw:
        try:
            doc = json.loads(raw, object_hook=_from_json)
            if all(doc.get(k) == v for k, v in _tables_key(text).items()):
                return Lark._load_from_dict(doc["data"], doc["memo"])
        except Exception:  # any mismatch: build the tables instead
            pass
    return _build_parser(text)


@functools.lru_cache(maxsize=1)
def _lexer() -> _Lexer:
    return _Lexer(_parser())


# Readable names for the grammar's terminals, for "expected ..." in parse errors.
_TERMINALS = {
    "NAME": "a name",
    "NUMBER": "a number",
    "LPAR": "'('",
    "RPAR": "')'",
    "LSQB": "'['",
    "RSQB": "']'",
    "COMMA": "','",
    "COLON": "':'",
    "SEMICOLON": "';'",
    "EQUAL": "'='",
    "DOT": "'.'",
    "ADD": "'+' or '-'",
    "MULTIPLY": "'*', '/' or '@'",
    "POWER": "'**'",
    "COMPARE": "a comparison",
    "ELLIPSIS": "'...'",
    "_NEWLINE": "a new line",
    "$END": "the end of the program",
}
_EXPR_START = {"NAME", "NUMBER", "LPAR", "LSQB", "ADD"}


def _describe_expected(expected: set[str]) -> str:
    names = set(expected)
    parts = []
    if names >= _EXPR_START:
        parts.append("an expression")
        names -= _EXPR_START
    parts += sorted(_TERMINALS.get(n, n.lower()) for n in names if not n.startswith("__"))
    if not parts:
        return "something else"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]


def _caret(text: str, line: int, column: int) -> str:
    # Lines are counted at "\n" only, as positions are (str.splitlines also splits at
    # "\r", "\x0c", "\u2028" ...); a control character shows as a space, one column wide.
    lines = text.split("\n")
    src = lines[line - 1].rstrip("\r") if 0 < line <= len(lines) else ""
    shown = "".join(c if c.isprintable() else " " for c in src)
    return f"  {shown}\n  {' ' * (column - 1)}^"


def _token_text(tok: Any) -> str:
    if tok.type == "$END":
        return "end of the program"
    if tok.type == "_NEWLINE":
        return "new line"
    return f"'{tok}'"


def check_program_length(text: str, limit: int) -> None:
    """Refuse a program longer than ``limit`` characters before parsing it."""
    if len(text) > limit:
        raise LimitError(
            f"the program is {len(text):,} characters long, over the limit of {limit:,} "
            "(raise it with --max-program-chars)"
        )


def parse(text: str) -> Any:
    """Parse program text into a lark tree; syntax errors become ``ParseError``."""
    from lark.exceptions import UnexpectedToken

    if "\x00" in text:
        col = text.index("\x00")
        line = text.count("\n", 0, col) + 1
        column = col - (text.rfind("\n", 0, col) + 1) + 1
        raise ParseError(
            "a NUL character is not allowed in a program",
            line=line,
            column=column,
            context=_caret(text.replace("\x00", " "), line, column),
        )
    try:
        with E.no_cycle_collection():  # a parse tree has no cycles; rescanning it is waste
            return _lexer().parse(_parser(), text)
    except UnexpectedToken as e:
        tok = e.token
        line, column = e.line, e.column
        if tok.type == "$END":
            line, column = _end_position(text)
        what = _token_text(tok)
        if "MULTIPLY" in e.expected and tok.type in ("NAME", "NUMBER", "LPAR", "LSQB"):
            raise ParseError(
                f"unexpected {what} at line {line}, column {column}: an operator is missing "
                f"before it (write `2*x`, not `2x`)",
                line=line,
                column=column,
                context=_caret(text, line, column),
            ) from None
        if tok.type == "$END" and not text.strip():
            raise ParseError(
                "the program is empty: nothing to evaluate", line=1, column=1
            ) from None
        raise ParseError(
            f"unexpected {what} at line {line}, column {column}; expected "
            f"{_describe_expected(set(e.expected))}",
            line=line,
            column=column,
            context=_caret(text, line, column),
        ) from None


def _end_position(text: str) -> tuple[int, int]:
    stripped = text.rstrip()
    line = stripped.count("\n") + 1
    column = len(stripped) - (stripped.rfind("\n") + 1) + 1
    return line, column


# --------------------------------------------------------------------------------------
# The function registry: every function of the language, its parameters and aliases
# --------------------------------------------------------------------------------------

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
_REQUIRED = object()


@dataclass(frozen=True)
class Param:
    name: str
    kind: str
    default: Any = _REQUIRED
    varargs: bool = False  # takes the remaining positional arguments (shapes as ints)


@dataclass(frozen=True)
class Function:
    name: str
    call: Callable[..., Tensor]
    params: tuple[Param, ...]
    summary: str
    derivative: str
    aliases: tuple[str, ...] = ()
    needs_context: bool = False  # constructors: get dtype (and the generator) as keywords

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


FUNCTIONS: dict[str, Function] = {}


def _register(
    name: str,
    call: Callable[..., Tensor],
    params: tuple[Param, ...],
    summary: str,
    derivative: str | None = None,
    aliases: tuple[str, ...] = (),
    needs_context: bool = False,
) -> None:
    op = E.OPS.get(name)
    rule = derivative if derivative is not None else (op.doc if op else "")
    fn = Function(name, call, params, summary, rule, aliases, needs_context)
    FUNCTIONS[name] = fn
    for alias in aliases:
        FUNCTIONS[alias] = fn


X = (Param("x", TENSOR),)
REDUCE = (Param("x", TENSOR), Param("axis", AXIS, None), Param("keepdims", BOOL, False))

_UNARY = {
    "abs": "absolute value",
    "sign": "sign (-1, 0 or 1)",
    "sqrt": "square root",
    "square": "x * x",
    "exp": "e ** x",
    "expm1": "exp(x) - 1, accurate near 0",
    "log": "natural logarithm",
    "log2": "base-2 logarithm",
    "log10": "base-10 logarithm",
    "log1p": "log(1 + x), accurate near 0",
    "sin": "sine",
    "cos": "cosine",
    "tan": "tangent",
    "arcsin": "inverse sine",
    "arccos": "inverse cosine",
    "arctan": "inverse tangent",
    "sinh": "hyperbolic sine",
    "cosh": "hyperbolic cosine",
    "tanh": "hyperbolic tangent",
    "arcsinh": "inverse hyperbolic sine",
    "arccosh": "inverse hyperbolic cosine",
    "arctanh": "inverse hyperbolic tangent",
    "sigmoid": "1 / (1 + exp(-x)), stable for large |x|",
    "relu": "max(x, 0)",
    "softplus": "log(1 + exp(x)), stable for large |x|",
    "floor": "largest whole number <= x",
    "ceil": "smallest whole number >= x",
    "round": "nearest whole number (halves to even)",
}
_ALIASES = {
    "arcsin": ("asin",),
    "arccos": ("acos",),
    "arctan": ("atan",),
    "arcsinh": ("asinh",),
    "arccosh": ("acosh",),
    "arctanh": ("atanh",),
}
for _name, _summary in _UNARY.items():
    _register(_name, getattr(E, _name), X, _summary, aliases=_ALIASES.get(_name, ()))

_AB = (Param("a", TENSOR), Param("b", TENSOR))
_register("maximum", E.maximum, _AB, "elementwise larger of a and b")
_register("minimum", E.minimum, _AB, "elementwise smaller of a and b")
_register(
    "arctan2",
    E.arctan2,
    (Param("y", TENSOR), Param("x", TENSOR)),
    "angle of the point (x, y)",
    aliases=("atan2",),
)
_register("pow", E.power, _AB, "a ** b")
_register(
    "clip",
    E.clip,
    (Param("x", TENSOR), Param("lo", TENSOR), Param("hi", TENSOR)),
    "x clamped into [lo, hi]",
)
_register(
    "where",
    E.where,
    (Param("cond", TENSOR), Param("a", TENSOR), Param("b", TENSOR)),
    "a where cond is nonzero, else b",
)
_register("sum", E.sum, REDUCE, "sum of elements")
_register("mean", E.mean, REDUCE, "mean of elements")
_register("prod", E.prod, REDUCE, "product of elements")
_register("max", E.max, REDUCE, "largest element", aliases=("amax",))
_register("min", E.min, REDUCE, "smallest element", aliases=("amin",))
_register("logsumexp", E.logsumexp, REDUCE, "log(sum(exp(x))), stable")
_register(
    "norm",
    E.norm,
    (Param("x", TENSOR), Param("ord", NUMBER, 2), *REDUCE[1:]),
    "vector p-norm of the reduced elements",
)
_VAR = (Param("x", TENSOR), Param("axis", AXIS, None), Param("ddof", NUMBER, 0),
        Param("keepdims", BOOL, False))  # fmt: skip
_register("var", E.var, _VAR, "variance", "g 2 (x - mean) / (n - ddof)")
_register("std", E.std, _VAR, "standard deviation", "g (x - mean) / ((n - ddof) std)")
_SOFT = (Param("x", TENSOR), Param("axis", INT, -1))
_register("softmax", E.softmax, _SOFT, "exp(x) / sum(exp(x)) along axis")
_register("log_softmax", E.log_softmax, _SOFT, "x - logsumexp(x) along axis")

_register("reshape", E.reshape, (Param("x", TENSOR), Param("shape", SHAPE, varargs=True)),
          "the elements in a new shape (-1: inferred)")  # fmt: skip
_register(
    "transpose",
    E.transpose,
    (Param("x", TENSOR), Param("axes", AXIS, None)),
    "axes permuted (reversed by default); also x.T",
)
_register("flatten", E.flatten, X, "the elements as a 1-D tensor", "g reshaped back")
_register("squeeze", E.squeeze, (Param("x", TENSOR), Param("axis", AXIS, None)),
          "axes of length one removed", "g reshaped back")  # fmt: skip
_register("expand_dims", E.expand_dims, (Param("x", TENSOR), Param("axis", AXIS)),
          "an axis of length one inserted", "g reshaped back")  # fmt: skip
_SEQ = (Param("tensors", TENSORS), Param("axis", INT, 0))
_register("concatenate", E.concatenate, _SEQ, "tensors joined along an existing axis",
          "g split back into the pieces", aliases=("concat",))  # fmt: skip
_register("stack", E.stack, _SEQ, "tensors joined along a new axis", "g split back into the pieces")
_register("flip", E.flip, (Param("x", TENSOR), Param("axis", AXIS, None)), "order reversed")

_register("matmul", E.matmul, _AB, "matrix product (NumPy's rules); also a @ b")
_register("dot", E.dot, _AB, "dot product of 1-D or 2-D tensors", E.MATMUL.doc)
_register("outer", E.outer, _AB, "outer product", "da = g b, db = g^T a")
_register("trace", E.trace, X, "sum of the diagonal", "g on the diagonal")
_register("diag", E.diag, (Param("x", TENSOR), Param("k", INT, 0)),
          "diagonal matrix of a vector, or diagonal of a matrix",
          "g's diagonal / g on the diagonal")  # fmt: skip
_register("det", E.det, X, "determinant")
_register("inv", E.inv, X, "matrix inverse")
_register("solve", E.solve, _AB, "x with a @ x == b")

_CONST = "none (a constant)"
_SHAPE = (Param("shape", SHAPE, varargs=True),)
_register("zeros", E.zeros, _SHAPE, "zeros of a shape", _CONST, needs_context=True)
_register("ones", E.ones, _SHAPE, "ones of a shape", _CONST, needs_context=True)
_register("full", E.full, (Param("shape", SHAPE), Param("value", NUMBER)),
          "a shape filled with a value", _CONST, needs_context=True)  # fmt: skip
_register("eye", E.eye, (Param("n", INT), Param("m", INT, None), Param("k", INT, 0)),
          "identity matrix", _CONST, needs_context=True)  # fmt: skip
_register("arange", E.arange, (Param("start", NUMBER), Param("stop", NUMBER, None),
          Param("step", NUMBER, 1)), "evenly spaced values in [start, stop)", _CONST,
          needs_context=True)  # fmt: skip
_register("linspace", E.linspace, (Param("start", NUMBER), Param("stop", NUMBER),
          Param("num", INT, 50)), "num evenly spaced values in [start, stop]", _CONST,
          needs_context=True)  # fmt: skip
_register("rand", E.rand, _SHAPE, "uniform random numbers in [0, 1) (seeded)", _CONST,
          needs_context=True)  # fmt: skip
_register("randn", E.randn, _SHAPE, "standard normal random numbers (seeded)", _CONST,
          needs_context=True)  # fmt: skip
_RANDOM = {"rand", "randn"}


def suggest(name: str, candidates: Any) -> str:
    """`` (did you mean `x`?)`` for the nearest known names, or nothing."""
    close = difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.6)
    if not close:
        return ""
    return " (did you mean " + " or ".join(f"`{c}`" for c in close) + "?)"


# --------------------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------------------


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


def to_tensor(value: Any, dtype: Any, what: str = "value") -> Tensor:
    """A Seq (array literal) stacked into a tensor; keyword values refused."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, Seq):
        return _stack_literal(value, dtype)
    if value is None or isinstance(value, bool):
        shown = {None: "none", True: "true", False: "false"}[value]
        raise InvalidValueError(f"{what}: `{shown}` is a keyword value, not a tensor")
    if value is Ellipsis or isinstance(value, slice):
        raise InvalidValueError(f"{what}: `...` and slices are only allowed inside x[...]")
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
            raise ShapeError("array literal nested more than 64 levels deep")
        for i, t in enumerate(items):
            if t.shape != first:
                raise ShapeError(
                    f"ragged array literal: element 1 has shape {first} but element {i + 1} "
                    f"has shape {t.shape}"
                )
        if not any(t.requires_grad for t in items):
            E.check_size((len(items), *first), "array literal")
            out[id(s)] = E.tensor([t.data for t in items], dtype=dtype)
        else:
            out[id(s)] = E.stack(items)
    return out[id(seq)]


class Program:
    """A parsed program: its bindings and output expression, ready to run on inputs."""

    def __init__(self, text: str, tree: Any) -> None:
        self.text = text
        statements = list(tree.children)
        if not statements:
            raise ParseError("the program is empty: nothing to evaluate", line=1, column=1)
        *bindings, output = statements
        if getattr(output, "data", None) == "binding":
            name = output.children[0]
            raise ParseError(
                f"the program ends with the binding `{name}` but needs an output expression "
                f"after it (e.g. add `; {name}`)",
                line=name.line,
                column=name.column,
            )
        for b in bindings:
            if getattr(b, "data", None) != "binding":
                line, column = _position(b)
                raise ParseError(
                    "only the last item of a program can be a bare expression; give the "
                    "others a name (`name = ...`)",
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
                raise NamingError(f"an input cannot be named `{name}`: that is a function")
        ev = _Evaluator(inputs, seed, dtype)
        bindings: dict[str, Tensor] = {}
        for name_tok, expr in self.bindings:
            name = str(name_tok)
            where = {"line": name_tok.line, "column": name_tok.column}
            if name in FUNCTIONS:
                raise NamingError(f"cannot bind `{name}`: it is the name of a function", **where)
            if name in inputs:
                raise NamingError(f"cannot bind `{name}`: it is already an input", **where)
            if name in bindings:
                raise NamingError(f"`{name}` is bound twice", **where)
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


class _Evaluator:
    def __init__(self, inputs: dict[str, Tensor], seed: int, dtype: Any) -> None:
        self.env: dict[str, Tensor] = dict(inputs)
        self.seed = seed
        self._rng: Any = None  # one generator per program, made when first drawn from
        self.dtype = dtype
        self.literal_overflow = False

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
                    push_value(self._combine(node, args))
                except GradcliError as err:
                    raise _located(err, node) from None
                except (ValueError, IndexError, TypeError) as err:
                    raise _located(ShapeError(f"{self._what(node)}: {err}"), node) from None
                except ZeroDivisionError as err:
                    raise _located(DomainError(f"{self._what(node)}: {err}"), node) from None
                except MemoryError:
                    raise _located(
                        LimitError(f"{self._what(node)}: out of memory (the result is too large)"),
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
            else:
                kids = self._operands(item)
                push((item, len(kids)))
                stack.extend(reversed(kids))
        return values[0]

    @staticmethod
    def _operands(node: Any) -> list[Any]:
        kind = node.data
        if kind in ("name", "number"):
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

    def _combine(self, node: Any, args: list[Any]) -> Any:
        kind = node.data
        if kind == "number":
            return self._number(node.children[0])
        if kind == "name":
            return self._lookup(node.children[0])
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
                f"unknown attribute `.{attr}`: the only attribute is `.T` (transpose)",
                line=attr.line,
                column=attr.column,
            )
        raise ParseError(f"unsupported construct {kind!r}")  # pragma: no cover

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
                f"`{name}` is a function: call it, as in {FUNCTIONS[name].signature}",
                line=tok.line,
                column=tok.column,
            )
        known = [*self.env, *CONSTANTS]
        raise NamingError(
            f"unknown name `{name}`{suggest(name, known + list(FUNCTIONS))}: give it a value "
            f"as {name}=VALUE",
            line=tok.line,
            column=tok.column,
        )

    # --- conversions ------------------------------------------------------------------
    def tensor(self, value: Any, what: str) -> Tensor:
        return to_tensor(value, self.dtype, what)

    def _int(self, value: Any, what: str) -> int:
        if isinstance(value, bool) or value is None:
            raise InvalidValueError(f"{what}: expected a whole number, got {value}")
        t = self.tensor(value, what)
        if t.ndim != 0:
            raise InvalidValueError(f"{what}: expected a whole number, got shape {t.shape}")
        f = float(t.data)
        if not math.isfinite(f) or not f.is_integer():
            raise InvalidValueError(f"{what}: expected a whole number, got {f:g}")
        return int(f)

    def _ints(self, value: Any, what: str) -> tuple[int, ...]:
        if isinstance(value, Seq):
            return tuple(self._int(v, what) for v in value)
        t = self.tensor(value, what)
        if t.ndim == 0:
            return (self._int(t, what),)
        if t.ndim != 1:
            raise InvalidValueError(f"{what}: expected whole numbers, got shape {t.shape}")
        return tuple(self._int(E.constant(float(v), self.dtype), what) for v in t.data)

    def _index_part(self, part: Any) -> Any:
        if part is None or part is Ellipsis or isinstance(part, slice):
            return part
        if isinstance(part, bool):
            raise InvalidValueError("index: true/false cannot index; use where(...)")
        t = self.tensor(part, "index")
        if t.ndim == 0:
            return self._int(t, "index")
        return t.data  # an integer array (checked by the engine)

    def _convert(self, fn: Function, p: Param, value: Any) -> Any:
        what = f"{fn.name}: argument `{p.name}`"
        if p.kind == TENSOR:
            return self.tensor(value, what)
        if p.kind == TENSORS:
            if isinstance(value, Seq):
                return [self.tensor(v, what) for v in value]
            return self.tensor(value, what)
        if value is None and p.default is None:
            return None
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
                raise InvalidValueError(f"{what}: expected a number, got shape {t.shape}")
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
                f"unknown function `{name}`{hint}; `gradcli functions` lists them all",
                line=tok.line,
                column=tok.column,
            )
        bound = self._bind(fn, args, tok)
        positional = [bound[p.name] for p in fn.params]
        context: dict[str, Any] = {}
        if fn.needs_context:
            if fn.name in _RANDOM:
                if self._rng is None:
                    self._rng = E.generator(self.seed)
                context["rng"] = self._rng
            context["dtype"] = self.dtype
        try:
            return fn.call(*positional, **context)
        except np_linalg_error() as err:
            raise DomainError(f"{fn.name}: {err}") from None

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
                if len(rest) == 1:
                    bound[p.name] = self._convert(fn, p, rest[0])
                elif rest:
                    bound[p.name] = tuple(v for r in rest for v in self._convert(fn, p, r))
                break
            if i < len(positional):
                bound[p.name] = self._convert(fn, p, positional[i])
                i += 1
        if i < len(positional):
            raise NamingError(
                f"{fn.signature} takes at most {len(params)} argument"
                f"{'s' if len(params) != 1 else ''}, got {len(positional)}",
                line=tok.line,
                column=tok.column,
            )
        names = [p.name for p in params]
        for kw in keywords:
            target = next((q for q in params if q.name == kw.name), None)
            if target is None:
                raise NamingError(
                    f"{fn.name}() has no argument `{kw.name}`{suggest(kw.name, names)}; "
                    f"it takes {fn.signature}",
                    line=kw.line,
                    column=kw.column,
                )
            if target.name in bound:
                raise NamingError(
                    f"{fn.name}() got argument `{kw.name}` twice",
                    line=kw.line,
                    column=kw.column,
                )
            bound[target.name] = self._convert(fn, target, kw.value)
        for p in params:
            if p.name not in bound:
                if p.default is _REQUIRED:
                    raise NamingError(
                        f"{fn.name}() is missing the argument `{p.name}`: {fn.signature}",
                        line=tok.line,
                        column=tok.column,
                    )
                if not p.varargs:
                    bound[p.name] = p.default
        if any(p.varargs for p in params):
            p = next(p for p in params if p.varargs)
            if p.name not in bound:
                raise NamingError(
                    f"{fn.name}() is missing the argument `{p.name}`: {fn.signature}",
                    line=tok.line,
                    column=tok.column,
                )
        return bound


def np_linalg_error() -> type[Exception]:
    """NumPy's LinAlgError, looked up through the engine's backend."""
    return E.np.linalg.LinAlgError


if __name__ == "__main__":  # python -m gradcli.language > grammars/gradcli.tables.json
    import sys

    sys.stdout.write(parser_tables())
