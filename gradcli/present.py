"""Presentation: a ``Result``, an error or warnings drawn with rich (docs/commands.md).

This module knows nothing about parsing or the engine. It makes what each command shows;
:mod:`gradcli.layout` fits it to the terminal: arrays formatted as NumPy prints them, and
never cut short. When a terminal is too narrow for the result table, ``print_result``
switches to a stacked layout (one field per line), and narrower still, a plain list. All
user text (names, expressions, messages) is shown literally and safely: it is always passed
to rich through :func:`_text`, as ``Text`` (never markup) with control characters escaped
(``errors.escape_controls``); the consoles :func:`make_console` makes escape them in plain
strings too.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .api import Result
from .errors import GradcliError, escape_controls
from .i18n import msg, tr, translate
from .layout import (
    NO_GRAD,
    ArrayCell,
    _as_list,
    _captioned,
    _fits,
    _show,
)

__all__ = [
    "make_console",
    "print_error",
    "print_functions",
    "print_result",
    "print_warnings",
    "result_table",
]

#: shown in place of the gradient of an input that does not require grad (said in the
#: active language when drawn: :func:`translate`)
CONSTANT = msg("— (constant)")


def _text(text: str, style: str = "") -> Text:
    """User text (a name, a program, a message) for rich: literal, control characters
    escaped, folded rather than cut when it is wider than the space it gets."""
    return Text(escape_controls(text), style=style, overflow="fold")


def _shape(a: np.ndarray) -> str:
    """A shape as Python writes a tuple: ``()``, ``(2,)``, ``(2, 3)``."""
    return str(tuple(int(n) for n in np.shape(a)))


def _num(x: float, precision: int = 4) -> str:
    """A scalar for a caption: ``precision + 2`` significant digits, ``inf``/``nan`` as such."""
    return f"{float(x):.{max(precision + 2, 1)}g}"


def _cell(
    a: np.ndarray | None, *, precision: int, full: bool, missing: str = NO_GRAD
) -> ArrayCell | Text:
    if a is None:
        return Text(translate(missing), style="dim")
    return ArrayCell(a, precision=precision, full=full)


_Row = tuple[Text, Text, ArrayCell | Text, ArrayCell | Text]


def _rows(result: Result, precision: int, full: bool) -> list[list[_Row]]:
    """The table's rows, grouped in sections: inputs, intermediates, output."""

    def cell(a: np.ndarray | None, missing: str = NO_GRAD) -> ArrayCell | Text:
        return _cell(a, precision=precision, full=full, missing=missing)

    inputs: list[_Row] = [
        (_text(name), Text(_shape(value)), cell(value), cell(result.grads.get(name), CONSTANT))
        for name, value in result.inputs.items()
    ]
    intermediates: list[_Row] = [
        (_text(name), Text(_shape(value)), cell(value), cell(grad))
        for name, (value, grad) in result.intermediates.items()
    ]
    output: list[_Row] = [
        (
            Text(tr("output"), style="bold"),
            Text(_shape(result.value)),
            cell(result.value),
            Text(""),
        )
    ]
    return [group for group in (inputs, intermediates, output) if group]


def _caption(result: Result, precision: int) -> Text:
    """The reduction, the total gradient norm and any clipping, one statement a line."""
    lines: list[str] = []
    if result.reduction == "sum":
        lines.append(tr("output reduced with sum() before backward, as z.sum().backward()"))
    elif result.reduction:
        reduction = escape_controls(result.reduction)
        lines.append(tr("output reduced with {reduction}() before backward", reduction=reduction))
    clip = result.clip or {}
    clipped = "clip_value" in clip or float(clip.get("scale", 1.0)) < 1.0
    if any(g is not None for g in result.grads.values()):
        norm = _num(result.total_grad_norm, precision)
        lines.append(
            tr("total gradient norm {norm} (after clipping)", norm=norm)
            if clipped
            else tr("total gradient norm {norm}", norm=norm)
        )
    else:
        lines.append(tr("no input requires grad"))
    if "max_norm" in clip:
        p = _num(float(clip.get("norm_type", 2.0)), precision)
        total = _num(clip.get("total_norm", float("nan")), precision)
        max_norm = _num(clip["max_norm"], precision)
        if clipped:
            scale = _num(clip["scale"], precision)
            lines.append(
                tr(
                    "gradients clipped: total {p}-norm {total} > max_norm {max_norm}, "
                    "scaled by {scale}",
                    p=p,
                    total=total,
                    max_norm=max_norm,
                    scale=scale,
                )
            )
        else:
            lines.append(
                tr(
                    "gradients not clipped: total {p}-norm {total} <= max_norm {max_norm}",
                    p=p,
                    total=total,
                    max_norm=max_norm,
                )
            )
    if "clip_value" in clip:
        v = _num(abs(float(clip["clip_value"])), precision)
        lines.append(tr("gradients clamped to [-{v}, {v}]", v=v))
    return Text("\n".join(lines))


def _base_table(result: Result, precision: int, *, show_header: bool = True) -> Table:
    return Table(
        title=_text(result.expr.strip()),  # a file's program ends with a newline
        caption=_caption(result, precision),
        caption_justify="left",
        box=box.HEAVY_HEAD,
        show_header=show_header,
    )


def result_table(result: Result, *, precision: int = 4, full: bool = False) -> Table:
    """The result as a table: name, shape, value, gradient of every input, binding and output.

    Sections: inputs (in order), intermediates (in order), then the ``output`` row in bold.
    An input that does not require grad shows ``— (constant)``, a binding without gradient
    ``—``. Title: the expression; caption: reduction, total gradient norm, clipping.
    """
    table = _base_table(result, precision)
    for header in _headers():
        table.add_column(header, overflow="fold")
    for group in _rows(result, precision, full):
        for i, row in enumerate(group):
            table.add_row(*row, end_section=i == len(group) - 1)
    return table


def _headers() -> tuple[str, str, str, str]:
    """The result table's column headers, in the active language."""
    return (tr("name"), tr("shape"), tr("value"), tr("gradient"))


def _stacked_table(result: Result, *, precision: int = 4, full: bool = False) -> Table:
    """The same content as ``result_table``, one field a line, for narrow terminals."""
    table = _base_table(result, precision, show_header=False)
    table.add_column(style="dim", no_wrap=True)
    table.add_column(overflow="fold")
    entries = [row for group in _rows(result, precision, full) for row in group]
    for i, (name, shape, value, grad) in enumerate(entries):
        fields = list(zip(_headers(), (name, shape, value, grad), strict=True))
        if isinstance(grad, Text) and not grad.plain:  # the output row has no gradient cell
            fields.pop()
        for j, (label, content) in enumerate(fields):
            last = j == len(fields) - 1 and i < len(entries) - 1
            table.add_row(Text(label), content, end_section=last)
    return table


def print_result(
    result: Result, console: Console, *, precision: int = 4, full: bool = False
) -> None:
    """Print the result table; on a terminal too narrow for it, a stacked layout (one field
    a line) instead, and a plain list where even that does not fit: a column is never drawn
    narrower than its numbers, so no number is cut short or dropped."""
    table = result_table(result, precision=precision, full=full)
    if not _fits(console, table):
        stacked = _stacked_table(result, precision=precision, full=full)
        table = stacked if _fits(console, stacked) else table
    _show(console, _captioned(table) if _fits(console, table) else _as_list(table))


def print_error(err: GradcliError, console: Console) -> None:
    """Print ``error: <message>`` and then the error's context lines verbatim (no wrapping)."""
    # one line whatever the terminal width: scripts read the cause from the first line
    message = escape_controls(translate(err.message))
    console.print(Text.assemble((tr("error"), "bold red"), ": ", message), soft_wrap=True)
    if err.context:
        # the context holds a source line and a caret: not wrapped, not cropped, not styled
        # (the lexer already shows a control character there as a space, keeping the caret
        # under its column; escaping is the safety net)
        context = Text(escape_controls(err.context))
        console.print(context, soft_wrap=True, highlight=False, markup=False)


def print_warnings(warnings: Iterable[str], console: Console, *, notes: Iterable[str] = ()) -> None:
    """Print each warning as ``warning: <text>``, then each note as ``note: <text>``: one
    line each, whatever the terminal's width."""
    for label, style, lines in ((tr("warning"), "yellow", warnings), (tr("note"), "cyan", notes)):
        for line in lines:
            text = Text.assemble((label, style), ": ", escape_controls(translate(line)))
            console.print(text, soft_wrap=True)


class _TerminalConsole(Console):
    """A rich console that escapes control characters in every plain string it is given
    (``console.print("...")``, a string cell or title), as :func:`_text` does for ``Text``."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(escape_controls(text), **kwargs)


def make_console(stderr: bool = False) -> Console:
    """A console with rich's colour rules (off when not a terminal, ``NO_COLOR`` honoured)
    that shows control characters in plain strings escaped, and ``:name:`` as typed, never
    as an emoji (it could only come from a user's program or file name)."""
    return _TerminalConsole(stderr=stderr, highlight=False, soft_wrap=False, emoji=False)


def print_functions(functions: Iterable[Any], console: Console) -> None:
    """The table of ``gradcli functions``: name (and aliases), signature, meaning, derivative;
    its caption says that forward mode and H v use the same rules (docs/commands.md, "jvp")."""
    table = Table(
        title=tr("gradcli functions"),
        box=box.SIMPLE_HEAD,
        caption=Text(
            tr(
                "forward mode (gradcli jvp, jacobian --mode forward) and Hessian-vector "
                "products (hessian --vector) use these rules too, with the same values at kinks"
            )
        ),
    )
    table.add_column(tr("function"), no_wrap=True, style="bold")
    table.add_column(tr("signature"), overflow="fold")
    table.add_column(tr("what it computes"), overflow="fold")
    table.add_column(tr("derivative (VJP of upstream g)"), overflow="fold")
    for f in functions:
        name = f.name + (f" ({', '.join(f.aliases)})" if f.aliases else "")
        table.add_row(Text(name), Text(f.signature), Text(f.summary), Text(f.derivative))
    _show(console, _captioned(table))
