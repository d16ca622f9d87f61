"""The grammar: its text, the LALR parser (from the shipped tables when they match), and
``parse(text)`` with readable syntax errors.

``python -m gradcli.language > grammars/gradcli.tables.json`` regenerates the tables.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path
from typing import Any

from ..autograd.state import no_cycle_collection
from ..errors import LimitError, ParseError
from ..i18n import msg
from .lexer import _caret, _end_position, _Lexer

GRAMMAR_FILE = "gradcli.lark"
#: the longest program accepted unless asked for more (``--max-program-chars``). Parsing,
#: evaluating and backpropagating cost up to ~10 µs and ~800 bytes a character, so a
#: program this long may take ~10 s and ~0.8 GB: the same envelope as one tensor at the
#: default element limit (10^8 float64 values)
DEFAULT_MAX_PROGRAM_CHARS = 1_000_000


def grammar_text() -> str:
    """The grammar, from the installed package or, in a source checkout, ``grammars/``."""
    try:
        return resources.files("gradcli.grammars").joinpath(GRAMMAR_FILE).read_text("utf-8")
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError):
        source = Path(__file__).resolve().parents[2] / "grammars" / GRAMMAR_FILE
        return source.read_text("utf-8")


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
    data["parser"]["parser"] = _canonical_table(data["parser"]["parser"])
    doc = {**_tables_key(text), "data": data, "memo": memo}
    return json.dumps(_json_safe(doc), separators=(",", ":"), sort_keys=True) + "\n"


def _canonical_table(table: dict[str, Any]) -> dict[str, Any]:
    """Lark's serialised LALR table with its numbers made independent of the run.

    Lark builds the same automaton every time but numbers its states and tokens in the
    order it meets them in sets, which changes from run to run (even with PYTHONHASHSEED
    fixed). Here tokens are numbered by name, and states in the order a breadth-first walk
    from the start states meets them, taking each state's transitions in token-name order;
    every action map is written in token order. The same grammar then always gives the
    same file, and a regeneration diffs clean.
    """
    from collections import deque

    SHIFT = 0  # lark's encoding of an action: (0, next state) or (1, rule)
    tokens: dict[int, str] = table["tokens"]
    states: dict[int, dict[int, Any]] = table["states"]
    by_name = {name: i for i, name in enumerate(sorted(tokens.values()))}
    named = {
        state: sorted((tokens[tok], action) for tok, action in actions.items())
        for state, actions in states.items()
    }
    number: dict[int, int] = {}
    queue = deque(table["start_states"][start] for start in sorted(table["start_states"]))
    while queue:
        state = queue.popleft()
        if state in number:
            continue
        number[state] = len(number)
        queue.extend(arg for _, (kind, arg) in named[state] if kind == SHIFT and arg not in number)
    for state in sorted(states):  # unreachable from a start state (none in an LALR table)
        number.setdefault(state, len(number))
    return {
        "tokens": {i: name for name, i in by_name.items()},
        "states": {
            number[state]: {
                by_name[name]: (kind, number[arg] if kind == SHIFT else arg)
                for name, (kind, arg) in named[state]
            }
            for state in sorted(states, key=number.__getitem__)
        },
        "start_states": {k: number[v] for k, v in sorted(table["start_states"].items())},
        "end_states": {k: number[v] for k, v in sorted(table["end_states"].items())},
    }


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
            source = Path(__file__).resolve().parents[2] / "grammars" / TABLES_FILE
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
    "STRING": "a string",
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
_EXPR_START = {"NAME", "NUMBER", "STRING", "LPAR", "LSQB", "ADD"}


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
            msg(
                "the program is {n_text:,} characters long, over the limit of {limit:,} "
                "(raise it with --max-program-chars)",
                n_text=len(text),
                limit=limit,
            )
        )


def parse(text: str) -> Any:
    """Parse program text into a lark tree; syntax errors become ``ParseError``."""
    from lark.exceptions import UnexpectedToken

    if "\x00" in text:
        col = text.index("\x00")
        line = text.count("\n", 0, col) + 1
        column = col - (text.rfind("\n", 0, col) + 1) + 1
        raise ParseError(
            msg("a NUL character is not allowed in a program"),
            line=line,
            column=column,
            context=_caret(text.replace("\x00", " "), line, column),
        )
    try:
        with no_cycle_collection():  # a parse tree has no cycles; rescanning it is waste
            return _lexer().parse(_parser(), text)
    except UnexpectedToken as e:
        tok = e.token
        line, column = e.line, e.column
        if tok.type == "$END":
            line, column = _end_position(text)
        what = _token_text(tok)
        if "MULTIPLY" in e.expected and tok.type in ("NAME", "NUMBER", "STRING", "LPAR", "LSQB"):
            raise ParseError(
                msg(
                    "unexpected {what} at line {line}, column {column}: an operator is "
                    "missing before it (write `2*x`, not `2x`)",
                    what=what,
                    line=line,
                    column=column,
                ),
                line=line,
                column=column,
                context=_caret(text, line, column),
            ) from None
        if tok.type == "$END" and not text.strip():
            raise ParseError(
                msg("the program is empty: nothing to evaluate"), line=1, column=1
            ) from None
        raise ParseError(
            msg(
                "unexpected {what} at line {line}, column {column}; expected {describe_expected}",
                what=what,
                line=line,
                column=column,
                describe_expected=_describe_expected(set(e.expected)),
            ),
            line=line,
            column=column,
            context=_caret(text, line, column),
        ) from None
