"""Typed errors: one class per error kind of the JSON contract.

Every refusal gradcli makes is one of these. ``kind`` is the ``error.kind`` of the JSON
response and ``exit_code`` the process exit status the CLI uses for it (SPEC §2).
"""

from __future__ import annotations

from typing import Any


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
