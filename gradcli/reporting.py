"""What a command leaves on the streams: its result (:func:`_emit`: one line of JSON, or drawn
on the console), its warnings and notes on stderr (:func:`_report`), and every failure
(:class:`_failures`, :func:`_fail`, and click's own usage errors, :func:`_click_error`): one
line on stderr, the exit code of its kind, and in ``--json`` mode an error object on stdout
(docs/json.md, "Error", "Exit codes and error kinds"; docs/commands.md, "Notes and warnings").

``present``, ``io`` and the engine are imported inside the functions, so that
``gradcli --help`` starts fast.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, NoReturn

import typer

from . import streams


class _State:
    id: Any = None


class _failures:
    """Context manager that turns any failure into an error's output and exit code
    (docs/json.md, "Error", "Exit codes and error kinds")."""

    def __init__(self, json_out: bool, debug: bool) -> None:
        self.json_out = json_out
        self.debug = debug
        self.state = _State()

    def __enter__(self) -> _State:
        return self.state

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        # an OutputError goes on to _Group.main: no error object could be written either
        if isinstance(exc, Exception) and not isinstance(exc, typer.Exit | streams.OutputError):
            _fail(exc, self.json_out, self.state.id, self.debug)


def _print_line(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _emit(result: Any, json_out: bool, quiet: bool, show: Callable[[Any], None]) -> None:
    """The result's warnings (and its notes, without a table) on stderr, then the result as
    one line of JSON, or drawn by ``show`` on the console."""
    _report(result, quiet=quiet, table=not json_out)
    if json_out:
        from .io import dumps

        _print_line(dumps(result.to_json()))
    else:
        from . import present

        show(present.make_console())


def _report(result: Any, *, quiet: bool, table: bool) -> None:
    """The result's warnings on stderr, and its notes (the implicit sum, clipping, a thinned
    history) when no table is printed: a table's caption says them, and a thing is said
    once. ``--quiet``: neither (docs/commands.md, "Notes and warnings")."""
    notes = [] if table else getattr(result, "notes", [])
    if (result.warnings or notes) and not quiet:
        from . import present

        present.print_warnings(result.warnings, present.make_console(stderr=True), notes=notes)


def _fail(exc: BaseException, json_out: bool, request_id: Any, debug: bool) -> NoReturn:
    from . import present
    from .api import as_gradcli_error
    from .i18n import tr, translate
    from .io import dumps

    if debug:
        raise exc
    err = as_gradcli_error(exc)
    console = present.make_console(stderr=True)
    lost: streams.OutputError | None = None
    if json_out:
        try:
            _print_line(dumps({"id": request_id, "error": err.to_json()}))
        except streams.OutputError as e:
            lost = e
        # the kind is the JSON's, in every language; the words are the reader's
        said = f"{tr('error')} ({err.kind}): {translate(err.message)}"
        console.print(said, markup=False, soft_wrap=True)
    else:
        present.print_error(err, console)
    if lost is not None:  # said as well; the exit code stays the error's
        streams.output_failed(sys.stdout)
    raise typer.Exit(err.exit_code)


def _click_error(exc: Any, json_out: bool) -> int:
    """A bad option or argument, reported like every other gradcli error (kind ``input``)."""
    if type(exc).__name__ == "NoArgsIsHelpError":
        exc.show()  # `gradcli eval` alone: the help text
        return int(exc.exit_code)
    from .errors import InputError
    from .i18n import msg

    # click's own words stay English (docs/i18n.md); what gradcli adds is translated
    ctx = getattr(exc, "ctx", None)
    message = (
        msg("{message} (see '{command} --help')", message=exc.format_message(),
            command=ctx.command_path)
        if ctx is not None
        else msg("{message}", message=exc.format_message())
    )  # fmt: skip
    try:
        _fail(InputError(message), json_out, None, debug=False)
    except typer.Exit as done:
        return int(done.exit_code)
