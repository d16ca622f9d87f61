"""The command line at a terminal: optimize's progress bar and its Ctrl-C, batch's choice of
a progress bar, and the exit of an interrupted command (docs/cli.md, "Streams", "optimize";
docs/json.md, "Exit codes and error kinds").

rich is imported only when a progress bar is drawn, so that ``gradcli --help`` starts fast.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from . import streams


def _batch_shows_progress() -> bool:
    """batch's progress bar: on a terminal's stderr, and not when stdout is a terminal too,
    where the responses themselves show the progress and a bar would be drawn among them
    (docs/cli.md, "Streams")."""
    return sys.stderr.isatty() and not sys.stdout.isatty()


class _StepProgress:
    """optimize's progress bar on stderr, on a terminal only: steps done, the loss, time
    elapsed and time remaining (not with ``--quiet``). Nothing is written to stdout while it
    runs."""

    def __init__(self, steps: int, *, shown: bool = True) -> None:
        self.steps = steps
        self.shown = shown
        self.display: Any = None

    def __enter__(self) -> Callable[[int, float], None] | None:
        if not self.shown or self.steps < 2 or not sys.stderr.isatty():
            return None
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        from .i18n import tr

        self.display = streams.progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn(tr("loss") + " {task.fields[loss]}"), TimeElapsedColumn(),
            TimeRemainingColumn(),
        )  # fmt: skip
        task = self.display.add_task(tr("optimizing"), total=self.steps, loss="")
        update = self.display.update

        def on_step(step: int, loss: float) -> None:
            update(task, completed=step, loss=f"{loss:.6g}")

        return on_step

    def __exit__(self, *exc: Any) -> None:
        if self.display is not None:
            self.display.stop()


class _StopOnCtrlC:
    """While optimize's steps run, a first Ctrl-C asks it to stop after the step under way,
    so that the result so far is printed (exit status 130); a second one, or one before the
    steps begin (reading the inputs), ends the command at once, as Ctrl-C does everywhere
    else (docs/cli.md, "optimize"). ``requested`` is what the steps ask before each one."""

    def __init__(self) -> None:
        self.asked = False
        self.stepping = False  # the steps have begun: they will see a request
        self.previous: Any = None

    def requested(self) -> bool:
        self.stepping = True
        return self.asked

    def _on_sigint(self, signum: int, frame: Any) -> None:
        if self.asked or not self.stepping:
            _interrupted(signum, frame)
        self.asked = True

    def __enter__(self) -> _StopOnCtrlC:
        try:
            self.previous = signal.signal(signal.SIGINT, self._on_sigint)
        except ValueError:  # not the main thread (gradcli called by a program): not ours
            self.previous = None
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


def _interrupted(signum: int, frame: Any) -> NoReturn:
    from .i18n import tr

    sys.stderr.write(tr("interrupted") + "\n")
    raise SystemExit(130)
