"""The README's commands print what the README says they print (issue 13, "Done when").

Every ```` ```console ```` block of README.md is a terminal session: a line ``$ COMMAND`` is
a command, and the lines after it, up to the next ``$`` line or the end of the block, are
what it prints (stdout and stderr together, as a terminal shows them). Each command is run
for real by bash, with ``gradcli`` meaning ``python -m gradcli`` of this checkout, stdout
and stderr a pipe (not a terminal), ``COLUMNS=80`` and no colour, and its output must be
the README's text exactly, after trailing white space is dropped from every line.

The README's commands run from the repository root (``$ cd DIR`` moves a block's later
commands, as the README's reader would); they read only ``examples/``, so they run in a
temporary folder holding a copy of it, where what they write (``--save grads.npz``) is
thrown away. Every ``gradcli`` command of the README is in such a block: a ``gradcli``
command line in any other code block fails the test. A block that needs Graphviz's ``dot``
is skipped when it is not installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from harness import REPO, gradcli_env

README = REPO / "README.md"
COLUMNS = 80

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Step:
    command: str
    output: str


@dataclass(frozen=True)
class Block:
    line: int  # where the block starts in README.md (1-based)
    steps: tuple[Step, ...]


def code_blocks(text: str) -> list[tuple[int, str, str]]:
    """``(line, language, body)`` of every fenced code block."""
    return [
        (text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2)) for m in _FENCE.finditer(text)
    ]


def console_blocks(text: str) -> list[Block]:
    """The README's ``console`` blocks as commands and their expected output."""
    blocks = []
    for line, language, body in code_blocks(text):
        if language != "console":
            continue
        steps: list[tuple[str, list[str]]] = []
        for row in body.splitlines():
            if row.startswith("$ "):
                steps.append((row[2:], []))
            else:
                assert steps, f"README.md:{line}: output before the first `$ ` command"
                steps[-1][1].append(row)
        blocks.append(Block(line, tuple(Step(c, "\n".join(out)) for c, out in steps)))
    return blocks


def normalised(text: str) -> str:
    """``text`` with trailing white space dropped from each line and trailing blank lines."""
    return "\n".join(line.rstrip() for line in text.splitlines()).rstrip("\n")


def _shell_env(folder: Path) -> dict[str, str]:
    """The environment of a shell in which ``gradcli`` is this checkout's ``python -m
    gradcli`` (a wrapper script in ``folder/.bin``, first on the PATH)."""
    bin_dir = folder / ".bin"
    bin_dir.mkdir(exist_ok=True)
    wrapper = bin_dir / "gradcli"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m gradcli "$@"\n')
    wrapper.chmod(0o755)
    env = gradcli_env(COLUMNS)
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", "")])
    return env


def run_block(block: Block, folder: Path) -> list[tuple[str, str]]:
    """Run the block's commands in ``folder``: ``(command, output)`` for each."""
    env = _shell_env(folder)
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


BLOCKS = console_blocks(README.read_text(encoding="utf-8"))


def test_the_readme_has_sessions_to_check() -> None:
    assert len(BLOCKS) >= 5
    commands = [s.command for b in BLOCKS for s in b.steps]
    for command in ("eval", "--json", "-f model.txt", "check", "jacobian", "hessian",
                    "graph", "optimize", "batch", "functions"):  # fmt: skip
        assert any(command in c for c in commands), command


def test_every_gradcli_command_of_the_readme_is_checked() -> None:
    for line, language, body in code_blocks(README.read_text(encoding="utf-8")):
        if language == "console":
            continue
        for row in body.splitlines():
            code = row.split("#", 1)[0].strip()
            assert not re.match(r"(\S+=\S+ )*gradcli\b", code), (
                f"README.md:{line}: `{row.strip()}` is not in a ```console block, "
                "where its output would be checked"
            )


@pytest.mark.parametrize("block", BLOCKS, ids=[f"README.md:{b.line}" for b in BLOCKS])
def test_a_readme_session_prints_what_the_readme_shows(block: Block, tmp_path: Path) -> None:
    needs = [p for p in ("dot",) if any(f"| {p} " in s.command for s in block.steps)]
    for program in needs:
        if shutil.which(program) is None:
            pytest.skip(f"needs Graphviz's `{program}` program, which is not installed")
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    for step, (command, output) in zip(block.steps, run_block(block, tmp_path), strict=True):
        assert normalised(output) == normalised(step.output), (
            f"README.md:{block.line}: `{command}` printed\n{output}"
        )


def test_the_sessions_run_without_a_terminal_at_the_width_given(tmp_path: Path) -> None:
    # the condition the outputs above are recorded in: a caption wraps at COLUMNS, no wider
    block = Block(0, (Step('gradcli check "sum(x*x)" x=1', ""),))
    [(_, output)] = run_block(block, tmp_path)
    assert max(len(line) for line in output.splitlines()) <= COLUMNS


# --------------------------------------------------------------------------------------
# The examples of every command's --help run as shown, too
# --------------------------------------------------------------------------------------


def help_examples(command: str) -> list[str]:
    """The command lines under "Example(s):" in ``gradcli COMMAND --help`` (a line in
    parentheses is a remark about them)."""
    import typer

    from gradcli.cli import app

    text = typer.main.get_command(app).commands[command].help or ""  # type: ignore[attr-defined]
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() in ("Example:", "Examples:"))
    out = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        if not line.strip().startswith("("):
            out.append(line.strip())
    return out


HELP_COMMANDS = ["eval", "batch", "check", "jacobian", "hessian", "graph", "optimize", "functions"]


@pytest.mark.parametrize("command", HELP_COMMANDS)
def test_the_examples_of_help_run_as_shown(command: str, tmp_path: Path) -> None:
    examples = help_examples(command)
    assert any(e.startswith(f"gradcli {command}") for e in examples), examples
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    env = _shell_env(tmp_path)
    for example in examples:
        if "| dot " in example and shutil.which("dot") is None:
            continue  # needs Graphviz, as the help says
        proc = subprocess.run(
            ["bash", "-c", example],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0, f"`{example}`: exit {proc.returncode}\n{proc.stderr}"
        assert "error" not in proc.stderr, f"`{example}`:\n{proc.stderr}"
