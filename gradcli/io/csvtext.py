"""CSV and text files of numbers, read by ``np.loadtxt`` (docs/cli.md, "Files").

Rows end only at ``\\n``, ``\\r\\n`` and ``\\r``; blank rows and ``#`` comments are
skipped; the delimiter is sniffed from the first row (``,`` ``;`` tab, else whitespace);
quoted cells are unquoted; a first row with no number in it is a header. A bad cell is an
:class:`~gradcli.errors.InputError` that names its line and cell; more numbers than
``--max-elements`` is a :class:`~gradcli.errors.LimitError`, found without converting them
all. The text itself comes from :mod:`gradcli.io.bounded` or from standard input.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..errors import InputError, LimitError
from ..i18n import msg
from .jsonio import _short
from .values import _as_dtype

#: Row ends of a CSV/text file: those of np.loadtxt (and of Python's universal newlines).
#: str.splitlines() would also split on form feed, U+2028 and others inside a row.
_ROW_END = re.compile(r"\r\n|\r|\n")


#: Cell separators of a CSV/text file, sniffed in this order in its first row (outside
#: quotes); a row with none of them is split at whitespace (docs/cli.md, "Files").
_DELIMITERS = (",", ";", "\t")

_QUOTED = re.compile(r'"[^"]*"')
#: ``#`` outside quotes starts a comment that runs to the end of the row.
_COMMENT = re.compile(r'("[^"]*")|#.*', re.DOTALL)


def _sniff_delimiter(row: str) -> str | None:
    bare = _QUOTED.sub("", row)
    return next((d for d in _DELIMITERS if d in bare), None)


class _RowForm:
    """How the rows of a file with delimiter ``delim`` (None: whitespace) are put in the
    form np.loadtxt reads: whitespace around a delimiter is dropped, and whitespace between
    two numbers separates them as a delimiter does (``1,2 3`` is three numbers, as it always
    was), so that only the delimiter itself can leave an empty cell (``1,,2``). Quoted
    cells are kept whole, for np.loadtxt to unquote."""

    def __init__(self, delim: str | None) -> None:
        self.delim = delim
        space = r"[^\S\t]" if delim == "\t" else r"\s"  # in a TSV, a tab is no whitespace
        self.ends = re.compile(rf"^{space}+|{space}+$")
        sep = f"{space}*{re.escape(delim)}{space}*|" if delim else ""
        self.inner = re.compile(rf'("[^"]*")|{sep}{space}+')
        self.join = delim or " "

    def __call__(self, row: str) -> str:
        row = self.ends.sub("", row)
        return self.inner.sub(lambda m: m.group(1) or self.join, row)

    def cells(self, row: str) -> list[str]:
        """The cells of a row in this form, unquoted (NumPy splits them)."""
        return list(
            np.loadtxt(
                [row], dtype=str, delimiter=self.delim, comments=None, quotechar='"', ndmin=1
            )
        )


def _is_number(cell: str) -> bool:
    """Whether np.loadtxt reads ``cell`` as a number (it refuses ``1_000`` and ``0x10``,
    which Python's float() and NumPy's casts differ on)."""
    if not cell.strip():
        return False
    try:
        np.loadtxt([cell], dtype=np.float64, delimiter="\0", comments=None, quotechar=None)
    except ValueError:
        return False
    return True


def _loadtxt(rows: list[str], form: _RowForm, max_rows: int | None) -> np.ndarray:
    return np.loadtxt(
        rows,
        dtype=np.float64,
        delimiter=form.delim,
        comments=None,
        quotechar='"',
        ndmin=2,
        max_rows=max_rows,
    )


def _csv_error(
    rows: list[str],
    linenos: list[int],
    form: _RowForm,
    ncols: int,
    name: str,
    where: str,
    cause: str,
) -> InputError:
    """The error of the first row np.loadtxt refuses, with its line and cell. NumPy's own
    message counts rows in a way that has changed between versions, so the row is found
    again by bisection: ``log2(rows)`` more reads, on the error path only."""
    ok, bad = 0, len(rows)  # rows[:ok] are read, rows[:bad] are not
    while bad - ok > 1:
        mid = (ok + bad) // 2
        try:
            _loadtxt(rows[:mid], form, None)
        except ValueError:
            bad = mid
        else:
            ok = mid
    row, lineno = rows[bad - 1], linenos[bad - 1]
    cells = form.cells(row)
    for col, cell in enumerate(cells, start=1):
        if not cell.strip():
            return InputError(
                msg(
                    "{name}: {where}, line {lineno}, cell {col}: empty cell",
                    name=name,
                    where=where,
                    lineno=lineno,
                    col=col,
                )
            )
        if not _is_number(cell):
            return InputError(
                msg(
                    "{name}: {where}, line {lineno}, cell {col}: {cell} is not a number",
                    name=name,
                    where=where,
                    lineno=lineno,
                    col=col,
                    cell=_short(cell),
                )
            )
    if len(cells) != ncols:
        return InputError(
            msg(
                "{name}: {where}, line {lineno} has {n_cells} numbers but the first row "
                "has {ncols}",
                name=name,
                where=where,
                lineno=lineno,
                n_cells=len(cells),
                ncols=ncols,
            )
        )
    return InputError(
        msg(
            "{name}: {where}, line {lineno}: {cause}",
            name=name,
            where=where,
            lineno=lineno,
            cause=cause,
        )
    )  # pragma: no cover


def _too_many(name: str, where: str, max_elements: int) -> LimitError:
    return LimitError(
        msg(
            "{name}: {where} has more than {max_elements:,} numbers (raise it with --max-elements)",
            name=name,
            where=where,
            max_elements=max_elements,
        )
    )


def _csv_value(
    text: str, *, name: str, where: str, dt: np.dtype[Any], max_elements: int | None
) -> np.ndarray:
    """The numbers of a CSV/text document, read by np.loadtxt (docs/cli.md, "Files").

    Rows end only at ``\\n``, ``\\r\\n`` and ``\\r`` (never at a form feed or U+2028 inside a
    row); blank rows and ``#`` comments are skipped; the delimiter is sniffed from the first
    row (``,`` ``;`` tab, else whitespace); quoted cells are unquoted; a first row with no
    number in it is a header, and is skipped. Shapes as np.loadtxt gives them: one number
    → ``()``, one row or one column → 1-D, otherwise 2-D, no rows → ``(0,)``. At most
    ``max_elements // columns + 1`` rows are converted: more is a :class:`LimitError`.
    """
    rows: list[str] = []
    linenos: list[int] = []
    comments = "#" in text
    for lineno, raw in enumerate(_ROW_END.split(text), start=1):
        if comments and "#" in raw:
            raw = _COMMENT.sub(lambda m: m.group(1) or "", raw)
        if raw and not raw.isspace():
            rows.append(raw)
            linenos.append(lineno)
    if not rows:
        return np.zeros((0,), dtype=dt)
    form = _RowForm(_sniff_delimiter(rows[0]))
    if not any(_is_number(cell) for cell in form.cells(form(rows[0]))):
        del rows[0], linenos[0]  # a header row (names), as genfromtxt(names=True) skips it
        if not rows:
            return np.zeros((0,), dtype=dt)
    ncols = len(form.cells(form(rows[0])))
    max_rows = None
    if max_elements is not None:
        if ncols > max_elements:
            raise _too_many(name, where, max_elements)
        max_rows = max_elements // ncols + 1  # one row over the limit tells it is over
        del rows[max_rows:], linenos[max_rows:]
    try:
        # Rows as they are first: np.loadtxt strips the whitespace around a number itself.
        arr = _loadtxt(rows, form, max_rows)
    except ValueError:
        # Only whitespace inside a cell ("2 3", "2\f3") needs the rows' normal form.
        rows = [form(row) for row in rows]
        try:
            arr = _loadtxt(rows, form, max_rows)
        except ValueError as e:
            raise _csv_error(rows, linenos, form, ncols, name, where, str(e)) from None
    if max_elements is not None and arr.size > max_elements:
        raise _too_many(name, where, max_elements)
    return _as_dtype(np.squeeze(arr), dt)
