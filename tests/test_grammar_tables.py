"""The shipped LALR tables must be those of the shipped grammar (they make start-up fast).

Lark numbers its states differently from run to run, so the tables are compared by what
they do: the same trees and the same errors as a parser built from the grammar.
"""

import json
from pathlib import Path

import pytest

from gradcli.language import grammar

ROOT = Path(__file__).resolve().parent.parent
REGENERATE = "python -m gradcli.language > grammars/gradcli.tables.json"

PROGRAMS = [
    "a*b+b",
    "h = tanh(W @ x + b)\nsum(h ** 2)  # comment",
    "-x**2; 2**-1; x ^ y ^ z",
    "sum(x, axis=(0, 1), keepdims=true) < 3 == 1",
    "x[0, 1:, ::2, [0, 2, 2], ..., None].T",
    "ক = [1, 2]; ক*2",
    "(\n1 +\n 2)",
    "zeros(()) + (1,) ; [] ;",
    "f(x,)[1:2:3]",
]
BAD = ["a +", "(1", "2x", ")", "x[", "sum(x,,)", "a = ", "[1, 2"]


def test_shipped_tables_were_made_from_this_grammar() -> None:
    doc = json.loads((ROOT / "grammars" / grammar.TABLES_FILE).read_text("utf-8"))
    key = grammar._tables_key(grammar.grammar_text())
    assert doc["grammar_sha256"] == key["grammar_sha256"], f"stale tables: {REGENERATE}"
    assert doc["lark"] == key["lark"], f"tables of another lark version: {REGENERATE}"
    assert doc["options"] == key["options"], f"tables of other parser options: {REGENERATE}"


def test_the_parser_is_loaded_from_the_tables() -> None:
    assert grammar._parser().source_path == "<deserialized>"


@pytest.mark.parametrize("text", PROGRAMS)
def test_loaded_and_built_parsers_give_the_same_tree(text: str) -> None:
    built = grammar._build_parser(grammar.grammar_text())
    lexer = grammar._lexer()
    assert lexer.parse(grammar._parser(), text) == lexer.parse(built, text)


@pytest.mark.parametrize("text", BAD)
def test_loaded_and_built_parsers_give_the_same_error(text: str) -> None:
    from lark.exceptions import UnexpectedInput

    built = grammar._build_parser(grammar.grammar_text())
    errors = []
    for parser in (grammar._parser(), built):
        with pytest.raises(UnexpectedInput) as info:
            grammar._lexer().parse(parser, text)
        e = info.value
        errors.append((type(e), e.line, e.column, sorted(getattr(e, "expected", None) or [])))
    assert errors[0] == errors[1]
