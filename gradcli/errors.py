"""Typed errors: one class per error kind of the JSON contract.

Every refusal gradcli makes is one of these. ``kind`` is the ``error.kind`` of the JSON
response and ``exit_code`` the process exit status the CLI uses for it (docs/json.md,
"Exit codes and error kinds").

:func:`escape_controls` is the one way user text (names, programs, messages) is made safe to
show on a terminal.
"""

from __future__ import annotations

import re
from typing import Any

# Characters a terminal acts on instead of showing: C0 controls (ESC starts escape
# sequences, BEL ends an OSC title, CR overwrites a line ...) but tab and line feed, which
# only lay text out; DEL; C1 controls (0x9B is a one-byte CSI, 0x9D an OSC on some
# terminals); the bidirectional embeddings, overrides and isolates (U+202A-U+202E,
# U+2066-U+2069), which reorder what follows them ("Trojan Source"); and the Unicode line
# and paragraph separators U+2028/U+2029, which terminals show inconsistently. Each is shown
# as Python writes it in a string literal (the form ``repr`` uses in other messages):
# ``\x1b``, ``\r``, ``\x9b``, ``\u202e``. Every other character, printable Unicode
# (Bengali, CJK) and joiners included, is kept as it is.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\r":
        return "\\r"
    return f"\\x{ord(char):02x}" if ord(char) <= 0xFF else f"\\u{ord(char):04x}"


def escape_controls(text: str) -> str:
    """``text`` with every control character escaped, ready for a terminal.

    Used for all user text shown in tables, trees and on stderr; JSON output is data and
    keeps the text as it is (JSON escapes control characters itself). Tab and line feed are
    kept; see ``_CONTROLS`` for what is escaped and how.
    """
    return _CONTROLS.sub(_escaped, text)


def shorten(text: str, limit: int = 40) -> str:
    """``text`` cut to at most ``limit`` characters (ending in ``...`` when cut), so that a
    huge name or value echoed in a message cannot flood stderr."""
    return text if len(text) <= limit else text[: max(limit - 3, 0)] + "..."


class GradcliError(Exception):
    """Base class of every error gradcli reports to a user."""

    kind = "value"
    exit_code = 1

    def __init__(
        self,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
        context: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column
        #: extra lines shown under the message on a terminal (e.g. the source line and a caret)
        self.context = context

    def to_json(self) -> dict[str, Any]:
        error: dict[str, Any] = {"kind": self.kind, "message": self.message}
        if self.line is not None:
            error["line"] = self.line
        if self.column is not None:
            error["column"] = self.column
        return error


class ParseError(GradcliError):
    """The program text is not in the language (bad syntax, bad number, bad name)."""

    kind = "parse"
    exit_code = 2


class NamingError(GradcliError):
    """An unknown name or function, a name bound twice, or a bad keyword or arity."""

    kind = "name"
    exit_code = 2


class InputError(GradcliError):
    """A value, file, request or option the user gave cannot be used."""

    kind = "input"
    exit_code = 2


class ShapeError(GradcliError):
    """Shapes that do not fit an operation, or an axis or index out of range."""

    kind = "shape"
    exit_code = 1


class InvalidValueError(GradcliError):
    """An argument with a value the operation cannot take (e.g. a non-integer index)."""

    kind = "value"
    exit_code = 1


class DomainError(GradcliError):
    """A mathematically undefined operation, such as inverting a singular matrix."""

    kind = "domain"
    exit_code = 1


class LimitError(GradcliError):
    """A request over one of gradcli's limits (elements per tensor, program size ...)."""

    kind = "limit"
    exit_code = 1


KINDS: dict[str, type[GradcliError]] = {
    cls.kind: cls
    for cls in (
        ParseError,
        NamingError,
        InputError,
        ShapeError,
        InvalidValueError,
        DomainError,
        LimitError,
    )
}
