"""The standard streams while a command runs (docs/cli.md, "Streams").

A stdout that cannot be written (full, closed, its reader gone) raises :class:`OutputError`
at the first write that fails, whoever writes (print, rich, click); the command ends with
one line on stderr and exit status 1 (:func:`output_failed`), or quietly with 0 when the
reader went away (``| head``). A stderr that cannot be written is ignored: a diagnostic
never changes the result or the exit code.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO, cast


class OutputError(Exception):
    """stdout cannot be written (full, closed, its reader gone): the command ends here."""

    def __init__(self, cause: str, errno: int | None = None) -> None:
        super().__init__(cause)
        self.cause = cause
        self.errno = errno


class _Guarded:
    """A standard stream while a command runs. Everything but ``write`` and ``flush`` is the
    stream's own (``encoding``, ``fileno`` ... as rich and click read them); ``stream`` is
    None when the stream was closed before the process started."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)

    def isatty(self) -> bool:
        try:
            return bool(self.stream.isatty())
        except (AttributeError, OSError, ValueError):
            return False

    def discard(self) -> None:
        """Point the descriptor under the stream at /dev/null: what is still buffered (Python
        flushes it at exit) goes nowhere instead of failing once more."""
        try:
            fd = self.stream.fileno()
        except (AttributeError, OSError, ValueError):
            return  # closed, or no descriptor (a test's in-memory stream)
        _null_onto(fd)


class Stdout(_Guarded):
    """``sys.stdout``: the first write or flush that fails, whoever makes it (print, rich,
    click), raises :class:`OutputError`, kept in ``error`` until it is reported (even if
    whoever wrote swallowed it); what is written after it is dropped."""

    error: OutputError | None = None
    reported = False

    def write(self, text: str) -> int:
        if isinstance(text, str) and not text:
            return 0  # click probes a stream with "": writing nothing cannot fail
        self._call("write", text)
        return len(text)

    def flush(self) -> None:
        if self.stream is not None:  # closed: nothing was written, nothing to flush
            self._call("flush")

    def _call(self, method: str, *args: Any) -> None:
        if self.error is not None:
            return
        try:
            if self.stream is None:
                raise ValueError("closed")
            getattr(self.stream, method)(*args)
        except (OSError, ValueError) as e:
            self.error = _output_error(e)
            raise self.error from None


def _output_error(e: OSError | ValueError) -> OutputError:
    if isinstance(e, UnicodeEncodeError):
        return OutputError(f"{e.encoding} cannot encode {e.object[e.start : e.end]!r}")
    if isinstance(e, ValueError):  # None, or "I/O operation on closed file"
        return OutputError("standard output is closed")
    return OutputError(e.strerror or str(e), e.errno)


class _Stderr(_Guarded):
    """``sys.stderr``: a write that fails is dropped, and so is everything after it. A
    diagnostic that cannot be written never changes the result or the exit code."""

    def write(self, text: str) -> int:
        self._call("write", text)
        return len(text)

    def flush(self) -> None:
        self._call("flush")

    def _call(self, method: str, *args: Any) -> None:
        if self.stream is None:
            return
        try:
            getattr(self.stream, method)(*args)
        except (OSError, ValueError):
            self.discard()
            self.stream = None


class guarded:
    """``sys.stdout`` and ``sys.stderr`` guarded while a command runs, then given back.

    A stream closed before the process started (``>&-``, ``2>&-``) first gets /dev/null
    under its descriptor, so that no file gradcli opens (``--save``) takes descriptor 1 or 2
    and receives what was meant for the stream; ``sys.stdout`` still reports it closed."""

    def __enter__(self) -> Stdout:
        self.saved = sys.stdout, sys.stderr
        for fd, stream in ((1, sys.stdout), (2, sys.stderr)):
            if stream is None and _closed(fd):
                _null_onto(fd)
        stdout = Stdout(sys.stdout)
        sys.stdout, sys.stderr = cast(TextIO, stdout), cast(TextIO, _Stderr(sys.stderr))
        return stdout

    def __exit__(self, *exc: Any) -> None:
        sys.stdout, sys.stderr = self.saved


def _closed(fd: int) -> bool:
    import os

    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def _null_onto(fd: int) -> None:
    import os

    null = os.open(os.devnull, os.O_WRONLY)
    if null != fd:
        os.dup2(null, fd)
        os.close(null)


def progress(*columns: Any) -> Any:
    """A started rich progress display on stderr, removed when it stops (docs/cli.md,
    "Streams"). It never captures stdout: rich's ``Progress`` would by default, and the
    responses of ``batch … > file`` would go to the terminal instead of the file. What is
    written to stderr meanwhile (a warning) is printed above the bar."""
    from rich.console import Console
    from rich.progress import Progress

    display = Progress(
        *columns, console=Console(stderr=True), transient=True, redirect_stdout=False
    )
    display.start()
    return display


def output_failed(stdout: Any) -> int:
    """stdout failed: one line on stderr and exit status 1 (a failure, but not 2: the
    user's input was fine) — or, when its reader went away (``| head``), nothing and 0, as
    ``cat`` does. Either way what is still buffered for stdout is discarded."""
    import errno

    if not isinstance(stdout, Stdout) or stdout.error is None:
        return 0
    stdout.discard()
    stdout.reported = True
    if stdout.error.errno == errno.EPIPE:
        return 0
    from .i18n import tr

    said = tr("gradcli: cannot write the output: {cause}", cause=stdout.error.cause)
    sys.stderr.write(said + "\n")
    return 1
