"""The expression language: grammar loading, parsing, and evaluation into engine calls.

``grammar`` holds the grammar, the parser and ``parse``; ``lexer`` the lexer that feeds it;
``functions`` the registry of the language's functions; ``evaluate`` the evaluator,
``Program`` and ``compile_program``; ``calls`` the values a call takes and the call. The names
other modules use are importable from here.
"""

from __future__ import annotations

from .calls import Keyword, Seq, np_linalg_error, to_tensor
from .evaluate import (
    CACHED_PROGRAM_CHARS,
    CONSTANTS,
    KEYWORD_VALUES,
    Evaluation,
    Program,
    compile_program,
)
from .functions import (
    AXIS,
    BOOL,
    FUNCTIONS,
    INT,
    NUMBER,
    SHAPE,
    TENSOR,
    TENSORS,
    Function,
    Param,
    suggest,
)
from .grammar import (
    DEFAULT_MAX_PROGRAM_CHARS,
    GRAMMAR_FILE,
    TABLES_FILE,
    check_program_length,
    grammar_text,
    parse,
    parser_tables,
)
from .lexer import normalize_name

__all__ = [
    "AXIS",
    "BOOL",
    "CACHED_PROGRAM_CHARS",
    "CONSTANTS",
    "DEFAULT_MAX_PROGRAM_CHARS",
    "FUNCTIONS",
    "GRAMMAR_FILE",
    "INT",
    "KEYWORD_VALUES",
    "NUMBER",
    "SHAPE",
    "TABLES_FILE",
    "TENSOR",
    "TENSORS",
    "Evaluation",
    "Function",
    "Keyword",
    "Param",
    "Program",
    "Seq",
    "check_program_length",
    "compile_program",
    "grammar_text",
    "normalize_name",
    "np_linalg_error",
    "parse",
    "parser_tables",
    "suggest",
    "to_tensor",
]
