"""Layout: arrays and tables fitted to the terminal's width (docs/commands.md, "Tables").

This module knows nothing of what a command shows (that is :mod:`gradcli.present`), only how
it is fitted. Numbers are printed the way NumPy prints them (``np.array2string``),
summarised with ``...`` past NumPy's threshold unless ``full`` is asked for, and never cut
short to fit the terminal: a wide value is re-wrapped by NumPy at the width its table cell
gets (:class:`ArrayCell`), between elements, never inside a number. A table that a terminal
is too narrow for even so is printed as a plain list (:func:`_print_table`), and no line
ends in spaces (:class:`_Trimmed`).
"""

from __future__ import annotations

import re
import sys
from typing import Any

import numpy as np
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

__all__ = ["NO_GRAD", "ArrayCell", "format_array"]

#: shown in place of a gradient that does not exist
NO_GRAD = "—"

# NumPy's own defaults, passed explicitly so global print options set elsewhere do not leak in
_NP_THRESHOLD = 1000
_NP_EDGEITEMS = 3
_NP_LINEWIDTH = 75
# the widest a cell asks to be: wider lines than this are wrapped by NumPy anyway
# (formatting very long lines takes NumPy time quadratic in their length)
_WIDEST = 1000

_BARE_POINT = re.compile(r"(?<=\d)\.(?=$|e)")


def format_array(
    a: np.ndarray | None,
    *,
    precision: int = 4,
    full: bool = False,
    linewidth: int | None = None,
    corners: bool = False,
) -> str:
    """Format an array as NumPy prints it; ``None`` (no gradient) becomes ``"—"``.

    ``precision`` digits after the point at most (``floatmode="maxprec"``), no suppression
    of small numbers, a ``...`` summary past NumPy's threshold of 1000 elements unless
    ``full``. ``linewidth`` is NumPy's ``max_line_width`` (default 75); NumPy wraps between
    elements, never inside one. A 0-d array is a bare number, written with a digit after the
    point (``20.0``, ``1.0e+20``) where NumPy would write ``20.``.
    """
    if a is None:
        return NO_GRAD
    if corners:  # already the corners of a larger array (viewable)
        arr = np.asarray(a)
    else:
        arr, corners = viewable(a, full)
    text = np.array2string(
        arr,
        max_line_width=_NP_LINEWIDTH if linewidth is None else max(1, linewidth),
        precision=precision,
        suppress_small=False,
        separator=" ",
        threshold=0 if corners else sys.maxsize if full else _NP_THRESHOLD,
        edgeitems=_NP_EDGEITEMS,
        floatmode="maxprec",
        legacy=False,
    )
    if arr.ndim == 0 and arr.dtype.kind == "f":
        text = _BARE_POINT.sub(".0", text)
    return text


def viewable(a: Any, full: bool = False) -> tuple[np.ndarray, bool]:
    """``(array, corners)``: what NumPy formats to show ``a``. A lazy array (the Dask
    backend's, a Zarr array) too large to be shown whole is read only where NumPy's summary
    shows it (:func:`summary_part`), which formatted with a summary at every size
    (``corners``) prints as the whole array would. Where that part was learnt already
    (an array's ``shown``: :func:`shown_part`, computed in the pass that wrote it), it is
    not read again."""
    if isinstance(a, np.ndarray) or not hasattr(a, "shape"):
        return np.asarray(a), False
    part = summary_part(a)
    shown = getattr(a, "shown", None)  # what shown_part gave
    if part is None:  # small enough to be shown whole
        return np.asarray(a if shown is None else shown), False
    if full:
        return np.asarray(a), False
    return np.asarray(part if shown is None else shown), True


def shown_part(a: Any) -> Any:
    """What a table shows of ``a`` without ``--full``: :func:`summary_part`, or the whole
    of a small array (lazily, for a lazy array)."""
    part = summary_part(a)
    return a if part is None else part


def summary_part(a: Any) -> Any:
    """The part of ``a`` NumPy's summary shows (lazily, for a lazy array): along each long
    axis its first three and last three elements and one between (never shown). None
    when ``a`` is small enough to be shown whole. Cut with slices, not a list of indices,
    so that a lazy array's part depends on its first and last chunks only."""
    from .autograd.backend import backend_of

    size = 1
    for n in a.shape:
        size *= n
    if size <= _NP_THRESHOLD:
        return None
    e = _NP_EDGEITEMS
    part = a
    for axis, n in enumerate(a.shape):
        if n > 2 * e:
            head = part[(slice(None),) * axis + (slice(0, e + 1),)]
            tail = part[(slice(None),) * axis + (slice(n - e, n),)]
            part = backend_of(part).concatenate([head, tail], axis=axis)
    return part


class ArrayCell:
    """A table cell holding an array, formatted by NumPy at the width the cell is given.

    Its minimum width is that of NumPy's one-element-a-line layout (the widest element with
    its brackets), its maximum the unwrapped layout, so rich never has to split a number.
    """

    def __init__(self, array: np.ndarray, *, precision: int = 4, full: bool = False) -> None:
        self.array, self.corners = viewable(array, full)
        self.precision = precision
        self.full = full
        self._cache: dict[int, str] = {}

    def text(self, linewidth: int) -> str:
        """The array formatted for lines of at most ``linewidth`` characters."""
        if linewidth not in self._cache:
            self._cache[linewidth] = format_array(
                self.array,
                precision=self.precision,
                full=self.full,
                linewidth=linewidth,
                corners=self.corners,
            )
        return self._cache[linewidth]

    def _widths(self) -> tuple[int, int]:
        """(narrowest, widest) line widths NumPy lays the array out in (widest capped)."""
        wide = self.text(_WIDEST)
        widest = max(len(line) for line in wide.splitlines())
        return min(_narrowest(self.array, wide), widest), widest

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(*self._widths())

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(1, options.max_width)
        text = self.text(width)
        lines = text.splitlines()
        if all(len(line) <= width for line in lines):
            # NumPy already wrapped it: emit the lines as they are (fast for --full)
            for line in lines:
                yield Segment(line)
                yield Segment.line()
        else:  # narrower than one element: fold rather than crop, so nothing is lost
            yield Text(text, overflow="fold")


def _narrowest(arr: np.ndarray, text: str) -> int:
    """The widest line of NumPy's one-element-a-line layout, from any layout of the array.

    (Formatting at width 1 directly takes time quadratic in the number of elements.)
    NumPy pads every element to one width ``w``: the widest integer part, the point and the
    widest fraction (with exponent) for floats, the longest word otherwise. A narrow line
    holds one element and at most ``ndim`` brackets or indent spaces on either side.
    """
    lines = text.splitlines()
    if arr.ndim == 0 or arr.size == 0:
        return max(len(line) for line in lines)
    ints = fracs = plain = 0
    for line in lines:
        for word in line.split():
            word = word.strip("[]")
            if word == "...":
                continue
            whole, point, frac = word.partition(".")
            if point:
                ints, fracs = max(ints, len(whole)), max(fracs, len(frac))
            else:
                plain = max(plain, len(word))
    w = max(ints + 1 + fracs if ints else 0, plain, 5 if arr.dtype.kind == "b" else 0)
    return 2 * arr.ndim + max(w, 3)


def _as_list(table: Table) -> Group:
    """``table`` drawn as a plain list, for a terminal too narrow for its columns: the
    title, then each row's cells, one a line after its column's header, and the caption.
    An array gets the terminal's full width (under its header), so NumPy wraps it between
    elements and folds inside a number only when one element is wider than the terminal:
    every number is shown. Empty cells are left out."""

    def text(content: Any, style: str = "") -> Text:
        out = content.copy() if isinstance(content, Text) else Text(str(content))
        out.overflow = "fold"
        if style:
            out.stylize(style)
        return out

    parts: list[RenderableType] = []
    if table.title:
        parts.append(text(table.title, "bold"))
    columns = [(text(column.header, "dim"), list(column.cells)) for column in table.columns]
    for r in range(table.row_count):
        parts.append(Text(""))
        for header, cells in columns:
            cell = text(cells[r]) if isinstance(cells[r], str) else cells[r]
            if isinstance(cell, Text):
                if cell.plain:
                    label = Text.assemble(header, " ") if header.plain else Text()
                    parts.append(text(Text.assemble(label, cell)))
            else:  # an array: under its header, at full width
                parts += [header, cell] if header.plain else [cell]
    if table.caption:
        parts += [Text(""), text(table.caption)]
    return Group(*parts)


class _Trimmed:
    """``renderable`` with the spaces that end its lines removed: rich pads a centred title,
    a caption and a table without side borders out to the table's width, and a line that
    ends in spaces is noise in a file or a pipe (docs/commands.md, "Tables")."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.renderable)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in Segment.split_lines(console.render(self.renderable, options)):
            while line and not line[-1].control and not line[-1].text.rstrip(" "):
                line.pop()
            if line and not line[-1].control:
                text, style, _ = line[-1]
                line[-1] = Segment(text.rstrip(" "), style)
            yield from line
            yield Segment.line()


def _show(console: Console, renderable: RenderableType, **options: Any) -> None:
    """Print ``renderable`` without trailing spaces on its lines (:class:`_Trimmed`)."""
    console.print(_Trimmed(renderable), **options)


def _captioned(table: Table) -> RenderableType:
    """``table`` with its caption as lines of their own under it, left-aligned and wrapped
    at the console's width: rich wraps a caption at the table's width, so a caption longer
    than a narrow table would fold onto lines that a wide terminal has room for."""
    caption = table.caption
    if not caption:
        return table
    table.caption = None
    return Group(table, caption if isinstance(caption, Text) else Text(str(caption)))


def _fits(console: Console, table: Table) -> bool:
    """Whether ``table`` can be drawn within the console's width without cutting a cell's
    longest word (a number) short."""
    return _min_width(console, table) <= console.width


def _print_table(console: Console, table: Table) -> None:
    """Print ``table``, or, on a terminal too narrow for it, the same content as a list."""
    _show(console, _captioned(table) if _fits(console, table) else _as_list(table))


def _min_width(console: Console, table: Table) -> int:
    """The narrowest the table can be drawn without splitting any cell's longest word."""
    return Measurement.get(console, console.options.update_width(10**6), table).minimum
