"""Running gradcli from the command-line tests: a real ``python -m gradcli`` process
(:func:`run`, :func:`process`; forked warm from a server that has imported gradcli, see
``warm.py``) or typer's CliRunner in-process (:func:`invoke`), both giving a :class:`Run`,
and :func:`strict_loads` for the JSON they print. A Markdown page's terminal sessions
(``console`` blocks: ``$ COMMAND`` and what it prints) are read by :func:`console_blocks`
and run by bash with :func:`run_block`, for the tests that hold a page to its outputs
(tests/test_readme.py, tests/test_bn_walkthrough.py).

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


#: the variables that choose the interface's language (docs/i18n.md)
LANGUAGE_VARS = ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")


def gradcli_env(
    columns: int | None = None, language: dict[str, str] | None = None
) -> dict[str, str]:
    """The environment of a gradcli process: no colour, UTF-8, the terminal's size unset (or
    ``columns`` wide), this checkout importable from any working directory, and English
    whatever the caller's locale, unless ``language`` sets the locale variables."""
    env = dict(os.environ)
    for var in ("COLUMNS", "LINES", "FORCE_COLOR", "CLICOLOR_FORCE", "TTY_COMPATIBLE"):
        env.pop(var, None)
    for var in LANGUAGE_VARS[:3]:
        env.pop(var, None)
    if env.get("LANG", "").lower().startswith("bn"):
        env["LANG"] = "C.UTF-8"
    env.update(language or {})
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
    language: dict[str, str] | None = None,
) -> Run:
    """``python -m gradcli ARGS`` in a real subprocess (at the repository root unless ``cwd``
    says otherwise); stdin as text or raw bytes (``None``: the caller's own stdin). The output
    must be UTF-8 (a byte that does not decode fails the test); it is read as it is, with no
    newline translation. ``language``: locale variables (``{"LANG": "bn_BD.UTF-8"}``).

    The process is a child of a warm server that has imported gradcli (``warm.py``), unless
    the command line needs a fresh interpreter (``warm.needs_a_cold_start``; everywhere with
    ``GRADCLI_COLD_START=1``)."""
    data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
    env = gradcli_env(columns, language)
    proc = process(args, stdin=data, env=env, cwd=cwd, timeout=120)
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


def invoke(
    *args: str,
    stdin: str | bytes | None = None,
    columns: int | None = None,
    language: dict[str, str] | None = None,
) -> Run:
    """The same through CliRunner, in-process, after the CLI's argv pre-processing: in
    English whatever the caller's locale, unless ``language`` sets the locale variables."""
    env: dict[str, str | None] = dict.fromkeys(LANGUAGE_VARS)
    env.update(language or {})
    if columns is not None:
        env["COLUMNS"] = str(columns)
    result = CliRunner().invoke(
        app, _expressions_as_arguments(list(args)), input=stdin, prog_name="gradcli", env=env
    )
    exc = result.exception
    assert exc is None or isinstance(exc, SystemExit), f"uncaught {exc!r}"
    return Run(result.exit_code, result.stdout, result.stderr, args)


# --------------------------------------------------------------------------------------
# A Markdown page's terminal sessions
# --------------------------------------------------------------------------------------

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Step:
    command: str
    output: str


@dataclass(frozen=True)
class Block:
    line: int  # where the block starts in its page (1-based)
    steps: tuple[Step, ...]


def code_blocks(text: str) -> list[tuple[int, str, str]]:
    """``(line, language, body)`` of every fenced code block."""
    return [
        (text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2)) for m in _FENCE.finditer(text)
    ]


def console_blocks(text: str, page: str = "README.md") -> list[Block]:
    """The ``console`` blocks of a page (named ``page`` in messages) as commands and their
    expected output: a line ``$ COMMAND`` is a command, the lines after it, up to the next
    ``$`` line or the end of the block, what it prints."""
    blocks = []
    for line, language, body in code_blocks(text):
        if language != "console":
            continue
        steps: list[tuple[str, list[str]]] = []
        for row in body.splitlines():
            if row.startswith("$ "):
                steps.append((row[2:], []))
            else:
                assert steps, f"{page}:{line}: output before the first `$ ` command"
                steps[-1][1].append(row)
        blocks.append(Block(line, tuple(Step(c, "\n".join(out)) for c, out in steps)))
    return blocks


def unchecked_gradcli_lines(text: str) -> list[tuple[int, str]]:
    """``(line, row)`` of every ``gradcli`` command line in a code block that is not a
    ``console`` block, where its output would not be checked."""
    found = []
    for line, language, body in code_blocks(text):
        if language == "console":
            continue
        for row in body.splitlines():
            code = row.split("#", 1)[0].strip()
            if re.match(r"(\S+=\S+ )*gradcli\b", code):
                found.append((line, row.strip()))
    return found


def normalised(text: str) -> str:
    """``text`` with trailing white space dropped from each line and trailing blank lines."""
    return "\n".join(line.rstrip() for line in text.splitlines()).rstrip("\n")


def shell_env(folder: Path, columns: int = 80) -> dict[str, str]:
    """The environment of a shell in which ``gradcli`` is this checkout's ``python -m
    gradcli`` and ``python`` the interpreter running the tests (wrapper scripts in
    ``folder/.bin``, first on the PATH), ``columns`` wide, without colour."""
    bin_dir = folder / ".bin"
    bin_dir.mkdir(exist_ok=True)
    for name, command in (("gradcli", f'"{sys.executable}" -m gradcli'),
                          ("python", f'"{sys.executable}"')):  # fmt: skip
        wrapper = bin_dir / name
        wrapper.write_text(f'#!/bin/sh\nexec {command} "$@"\n')
        wrapper.chmod(0o755)
    env = gradcli_env(columns)
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", "")])
    return env


def run_block(block: Block, folder: Path, columns: int = 80) -> list[tuple[str, str]]:
    """Run the block's commands by bash in ``folder``, stdout and stderr one pipe:
    ``(command, output)`` for each. ``$ cd DIR`` moves the block's later commands."""
    env = shell_env(folder, columns)
    cwd = folder
    results = []
    for step in block.steps:
        words = step.command.split()
        if len(words) == 2 and words[0] == "cd":
            cwd = cwd / words[1]
            results.append((step.command, ""))
            continue
        proc = subprocess.run(
            ["bash", "-c", step.command],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=120,
        )
        results.append((step.command, proc.stdout.decode("utf-8")))
    return results
