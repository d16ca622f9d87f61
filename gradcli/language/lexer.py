"""The lexer: the grammar's terminals as one regular expression, and text positions.

``_Lexer`` replaces lark's basic lexer; ``_caret`` and ``_end_position`` locate a place in
the program text for its errors and for the parser's errors (``grammar.parse``).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from typing import Any

from ..errors import ParseError
from ..i18n import msg


def normalize_name(name: str) -> str:
    """``name`` as Python reads an identifier: in Unicode normal form NFKC, so that names
    that look the same are the same (``ﬁ`` is ``fi``; U+09DF is U+09AF U+09BC). Every name
    is read through this: in programs (the lexer), ``NAME=VALUE``, JSON requests and the
    API (``api.prepare``). See docs/conventions.md, "Names"."""
    return name if name.isascii() else unicodedata.normalize("NFKC", name)


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
                if text[pos] in "\"'":
                    raise ParseError(
                        msg(
                            "the string at line {line}, column {column} is not closed: "
                            "it ends with a {text} on the same line",
                            line=line,
                            column=column,
                            text=text[pos],
                        ),
                        line=line,
                        column=column,
                        context=_caret(text, line, column),
                    )
                raise ParseError(
                    msg(
                        "unexpected character {text!r} at line {line}, column {column}",
                        text=text[pos],
                        line=line,
                        column=column,
                    ),
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
                if not value.isascii():
                    if not value.isidentifier():
                        raise ParseError(
                            msg(
                                "`{value}` is not a valid name (names are identifiers: "
                                "letters, digits and _, not starting with a digit)",
                                value=value,
                            ),
                            line=tok_line,
                            column=column,
                        )
                    value = normalize_name(value)
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


def _caret(text: str, line: int, column: int) -> str:
    """The program line holding (``line``, ``column``) and a caret under that column.

    Columns count code points, as every position does; the caret is placed by the cells a
    terminal draws: a CJK character takes two, a combining mark none (rich's measure, as
    the tables use).
    """
    from rich.cells import cell_len

    # Lines are counted at "\n" only, as positions are (str.splitlines also splits at
    # "\r", "\x0c", "\u2028" ...); a control character shows as a space, one column wide.
    lines = text.split("\n")
    src = lines[line - 1].rstrip("\r") if 0 < line <= len(lines) else ""
    shown = "".join(c if c.isprintable() else " " for c in src)
    before = shown[: max(column - 1, 0)]
    pad = cell_len(before) + max(column - 1 - len(before), 0)
    return f"  {shown}\n  {' ' * pad}^"


def _end_position(text: str) -> tuple[int, int]:
    stripped = text.rstrip()
    line = stripped.count("\n") + 1
    column = len(stripped) - (stripped.rfind("\n") + 1) + 1
    return line, column
