"""Running gradcli from the command-line tests: a real ``python -m gradcli`` process
(:func:`run`, :func:`process`; forked warm from a server that has imported gradcli, see
``warm.py``) or typer's CliRunner in-process (:func:`invoke`), both giving a :class:`Run`,
and :func:`strict_loads` for the JSON they print.

Neither caches nor checks anything by itself: a test module that wants its runs cached
(``functools.cache``), wider, or free of tracebacks says so in its own thin wrapper.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import warm
from typer.testing import CliRunner

from gradcli.cli import _expressions_as_arguments, app

REPO = Path(__file__).resolve().parent.parent


def strict_loads(text: str | bytes) -> Any:
    """json.loads that refuses the NaN/Infinity tokens, as a strict JSON reader does."""

    def refuse(token: str) -> Any:
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


@dataclass(frozen=True)
class Run:
    """What one gradcli command line gave: exit code and the two streams as text."""

    code: int
    stdout: str
    stderr: str
    args: tuple[str, ...] = ()

    def _label(self) -> str:
        return f"gradcli {' '.join(self.args)}"

    @property
    def json(self) -> Any:
        """The one JSON document on stdout."""
        lines = self.stdout.splitlines()
        assert len(lines) == 1, (
            f"{self._label()}: expected one line of JSON on stdout, "
            f"got {self.stdout!r} / {self.stderr!r}"
        )
        return strict_loads(lines[0])

    @property
    def lines(self) -> list[Any]:
        """Every stdout line as JSON (NDJSON): each line is one strict JSON document."""
        assert self.stdout == "" or self.stdout.endswith("\n"), "the last line is cut short"
        return [strict_loads(line) for line in self.stdout.split("\n")[:-1]]

    @property
    def text(self) -> str:
        """stdout with every run of whitespace made one space (captions wrap)."""
        return " ".join(self.stdout.split())

    @property
    def first_error_line(self) -> str:
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        assert lines, "nothing on stderr"
        return lines[0]

    def caption(self) -> str:
        """The table's caption: what follows the table's bottom border."""
        lines = self.stdout.splitlines()
        bottom = max(i for i, line in enumerate(lines) if line.lstrip().startswith("└"))
        return " ".join(" ".join(lines[bottom + 1 :]).split())

    def row(self, name: str) -> str:
        """The table row whose first cell is ``name``."""
        for line in self.stdout.splitlines():
            cells = [c.strip() for c in re.split(r"[│┃]", line)]
            if len(cells) > 2 and cells[1] == name:
                return line
        raise AssertionError(f"no row {name!r} in\n{self.stdout}")

    def assert_clean(self) -> Run:
        """No Python traceback on either stream; returns the run itself."""
        for stream in (self.stdout, self.stderr):
            assert "Traceback" not in stream, stream
        return self

    def expect(self, code: int) -> Run:
        """Exit code ``code`` and no traceback; returns the run itself."""
        assert self.code == code, (
            f"{self._label()}: exit code {self.code}, expected {code}\n"
            f"stdout:\n{self.stdout}\nstderr:\n{self.stderr}"
        )
        assert "Traceback" not in self.stdout + self.stderr
        return self

    def assert_usage_error(self, *words: str) -> None:
        """Exit code 2, no traceback, and each of ``words`` on stderr."""
        assert self.code == 2, (self.code, self.stdout, self.stderr)
        assert "Traceback" not in self.stdout + self.stderr
        for word in words:
            assert word in self.stderr, (word, self.stderr)


def gradcli_env(columns: int | None = None) -> dict[str, str]:
    """The environment of a gradcli process: no colour, UTF-8, the terminal's size unset (or
    ``columns`` wide), and this checkout importable from any working directory."""
    env = dict(os.environ)
    for var in ("COLUMNS", "LINES", "FORCE_COLOR", "CLICOLOR_FORCE", "TTY_COMPATIBLE"):
        env.pop(var, None)
    env["NO_COLOR"] = "1"
    env["PYTHONIOENCODING"] = "utf-8"
    if columns is not None:
        env["COLUMNS"] = str(columns)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def run(
    *args: str,
    stdin: str | bytes | None = None,
    cwd: Path = REPO,
    columns: int | None = None,
) -> Run:
    """``python -m gradcli ARGS`` in a real subprocess (at the repository root unless ``cwd``
    says otherwise); stdin as text or raw bytes (``None``: the caller's own stdin). The output
    must be UTF-8 (a byte that does not decode fails the test); it is read as it is, with no
    newline translation.

    The process is a child of a warm server that has imported gradcli (``warm.py``), unless
    the command line needs a fresh interpreter (``warm.needs_a_cold_start``; everywhere with
    ``GRADCLI_COLD_START=1``)."""
    data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
    proc = process(args, stdin=data, env=gradcli_env(columns), cwd=cwd, timeout=120)
    return Run(proc.returncode, proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8"), args)


def process(
    args: tuple[str, ...],
    *,
    stdin: bytes | int | None,
    env: dict[str, str],
    cwd: Path,
    timeout: float,
) -> subprocess.CompletedProcess[bytes]:
    """``python -m gradcli ARGS`` with its output captured, as ``subprocess.run`` gives it:
    ``stdin`` bytes to write, ``subprocess.DEVNULL`` or ``None`` (the caller's own). The
    process is a warm child (``warm.py``) unless ``warm.needs_a_cold_start``."""
    if warm.needs_a_cold_start(args):
        given: dict[str, Any] = {"input": stdin} if isinstance(stdin, bytes) else {"stdin": stdin}
        return subprocess.run(
            [sys.executable, "-m", "gradcli", *args],
            capture_output=True,
            cwd=cwd,
            env=env,
            timeout=timeout,
            **given,
        )
    # the same process, forked from one that has imported gradcli
    return warm.run(args, stdin, env, cwd, timeout)


def invoke(*args: str, stdin: str | bytes | None = None, columns: int | None = None) -> Run:
    """The same through CliRunner, in-process, after the CLI's argv pre-processing."""
    result = CliRunner().invoke(
        app,
        _expressions_as_arguments(list(args)),
        input=stdin,
        prog_name="gradcli",
        env=None if columns is None else {"COLUMNS": str(columns)},
    )
    exc = result.exception
    assert exc is None or isinstance(exc, SystemExit), f"uncaught {exc!r}"
    return Run(result.exit_code, result.stdout, result.stderr, args)
