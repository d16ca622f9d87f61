"""gradcli's lexer held to lark's own.

``gradcli.language.lexer._Lexer`` replaces lark's basic lexer for speed: one regular expression
over the grammar's terminals, in lark's order. In the same pass it does two things lark's
lexer leaves to others: it drops a new line inside brackets (what the post-lexer
``_BracketNewlines`` did), refuses a NAME that is not an identifier and gives a NAME's value
in Unicode normal form NFKC, as Python reads identifiers. Nothing else may differ, so on
generated texts its tokens must be lark's (type, value, line, column and offset) once those
three rules are applied to lark's stream; where lark's lexer stops at a
character it cannot match, ours must stop there too, with the same message and position.
A few cases pin positions down by hand: ``\\r\\n`` line ends, tabs, comments, brackets over
several lines, and names that the NAME pattern takes but that are not identifiers.
"""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lark.exceptions import UnexpectedCharacters

from gradcli.errors import ParseError
from gradcli.language import grammar

Tok = tuple[str, str, int, int, int]  # type, value, line, column, start_pos
Error = tuple[str, int, int] | None  # message (its start, for lark), line, column


def ours(text: str) -> tuple[list[Tok], Error, set[str]]:
    toks: list[Tok] = []
    names: set[str] = set()
    try:
        for t in grammar._lexer().tokens(text, names):
            toks.append((t.type, t.value, t.line, t.column, t.start_pos))
    except ParseError as e:
        assert e.line is not None and e.column is not None
        return toks, (e.message, e.line, e.column), names
    return toks, None, names


def larks(text: str) -> tuple[list[Tok], Error]:
    """lark's basic lexer, then our three rules: a new line is dropped while more brackets are
    open than closed (never fewer than none), a NAME must be an identifier, and its value
    is normalised (NFKC)."""
    toks: list[Tok] = []
    depth = 0
    try:
        for t in grammar._parser().lex(text):
            if t.type == "NAME" and not t.isidentifier():
                return toks, (f"`{t}` is not a valid name", t.line, t.column)
            if t.type == "NAME":
                t = t.update(value=unicodedata.normalize("NFKC", t))
            if t.type in ("LPAR", "LSQB"):
                depth += 1
            elif t.type in ("RPAR", "RSQB"):
                depth = max(0, depth - 1)
            elif t.type == "_NEWLINE" and depth:
                continue
            toks.append((t.type, t.value, t.line, t.column, t.start_pos))
    except UnexpectedCharacters as e:
        message = f"unexpected character {e.char!r} at line {e.line}, column {e.column}"
        if e.char in "\"'":  # a quote that opens no string: ours says so
            message = f"the string at line {e.line}, column {e.column} is not closed"
        return toks, (message, e.line, e.column)
    return toks, None


PIECES = [
    *["x", "ab_1", "T", "α", "ক", "x²", "²", "٣", "e\u0301", "x\u200d", "\ufeff"],
    *["0", "2.5", ".5", "2.", "1e-3", "1_000", "1__0", "...", "..", "."],
    *["+", "-", "*", "**", "^", "/", "@", "<", "<=", "==", "!=", "=", ",", ":", ";"],
    *["(", ")", "[", "]", " ", "\t", "\x0c", "\r", "\n", "\r\n", "# note", "#"],
    *["?", "$", "'", "\x00", "\xa0", "\u2028", "\x85"],
    *['"', "'ij,j->i'", '"a b"', '""'],
]
TEXTS = st.one_of(
    st.lists(st.sampled_from(PIECES), max_size=40).map("".join),
    st.text(alphabet="xe1._+-*<=!()[],;# \t\r\n²?", max_size=40),
)


@settings(max_examples=200, deadline=None)
@given(TEXTS)
def test_tokens_and_errors_are_larks(text: str) -> None:
    expected, error = larks(text)
    got, got_error, names = ours(text)
    assert got == expected
    if error is None:
        assert got_error is None
        assert names == {value for kind, value, *_ in got if kind == "NAME"}
    else:
        assert got_error is not None, error
        assert got_error[0].startswith(error[0]) and got_error[1:] == error[1:]


def tokens(text: str) -> list[Tok]:
    got, error, _ = ours(text)
    assert error is None, error
    return got


def test_crlf_line_ends() -> None:
    # the \r is white space; the \n alone is the new line, at the \r's next column
    assert tokens("a = 1\r\nb = a\r\n") == [
        ("NAME", "a", 1, 1, 0),
        ("EQUAL", "=", 1, 3, 2),
        ("NUMBER", "1", 1, 5, 4),
        ("_NEWLINE", "\n", 1, 7, 6),
        ("NAME", "b", 2, 1, 7),
        ("EQUAL", "=", 2, 3, 9),
        ("NAME", "a", 2, 5, 11),
        ("_NEWLINE", "\n", 2, 7, 13),
    ]


def test_a_tab_is_one_column() -> None:
    assert tokens("\tx\t+\ty") == [
        ("NAME", "x", 1, 2, 1),
        ("ADD", "+", 1, 4, 3),
        ("NAME", "y", 1, 6, 5),
    ]


def test_comments_run_to_the_end_of_the_line() -> None:
    assert tokens("x  # one\n# two\r\ny") == [
        ("NAME", "x", 1, 1, 0),
        ("_NEWLINE", "\n", 1, 9, 8),
        ("_NEWLINE", "\n", 2, 7, 15),
        ("NAME", "y", 3, 1, 16),
    ]


def test_new_lines_inside_nested_brackets_are_dropped() -> None:
    assert tokens("f(\n  [1,\n   (2)\n  ]\n)\ny") == [
        ("NAME", "f", 1, 1, 0),
        ("LPAR", "(", 1, 2, 1),
        ("LSQB", "[", 2, 3, 5),
        ("NUMBER", "1", 2, 4, 6),
        ("COMMA", ",", 2, 5, 7),
        ("LPAR", "(", 3, 4, 12),
        ("NUMBER", "2", 3, 5, 13),
        ("RPAR", ")", 3, 6, 14),
        ("RSQB", "]", 4, 3, 18),
        ("RPAR", ")", 5, 1, 20),
        ("_NEWLINE", "\n", 5, 2, 21),
        ("NAME", "y", 6, 1, 22),
    ]


def test_an_extra_closing_bracket_does_not_hide_the_next_new_line() -> None:
    # the depth stays at 0 after `)`; the unclosed `(` then hides the last new line
    assert tokens(")\n(\nx") == [
        ("RPAR", ")", 1, 1, 0),
        ("_NEWLINE", "\n", 1, 2, 1),
        ("LPAR", "(", 2, 1, 2),
        ("NAME", "x", 3, 1, 4),
    ]


def test_names_are_collected() -> None:
    _, error, names = ours("h = sum(x, axis=0).T\nক * h")
    assert error is None
    assert names == {"h", "sum", "x", "axis", "T", "ক"}


@pytest.mark.parametrize(
    ("text", "name", "line", "column"),
    [
        ("y = x²", "x²", 1, 5),
        ("(a +\n  ²b)", "²b", 2, 3),
        ("f(\n\tx\u200d)", "x\u200d", 2, 2),  # a zero-width joiner
        ("\ufeffx", "\ufeffx", 1, 1),  # a byte-order mark
    ],
)
def test_a_name_that_is_not_an_identifier(text: str, name: str, line: int, column: int) -> None:
    assert not name.isidentifier()
    with pytest.raises(ParseError) as info:
        grammar.parse(text)
    assert info.value.message.startswith(f"`{name}` is not a valid name")
    assert (info.value.line, info.value.column) == (line, column)


@pytest.mark.parametrize(
    ("text", "char", "line", "column"),
    [("(x +\n  ?", "?", 2, 3), ("a\r\n\tb $", "$", 2, 4), ("(\n\n  x\xa0", "\xa0", 3, 4)],
)
def test_an_unexpected_character(text: str, char: str, line: int, column: int) -> None:
    with pytest.raises(ParseError) as info:
        grammar.parse(text)
    e = info.value
    assert e.message == f"unexpected character {char!r} at line {line}, column {column}"
    assert (e.line, e.column) == (line, column)
