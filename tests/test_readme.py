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
is skipped when it is not installed. Reading and running the sessions is tests/harness.py's
(:func:`console_blocks`, :func:`run_block`), shared with the pages of docs/bn/.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from harness import (
    REPO,
    Block,
    Step,
    console_blocks,
    normalised,
    run_block,
    shell_env,
    unchecked_gradcli_lines,
)

README = REPO / "README.md"
COLUMNS = 80


BLOCKS = console_blocks(README.read_text(encoding="utf-8"), "README.md")


def test_the_readme_has_sessions_to_check() -> None:
    assert len(BLOCKS) >= 5
    commands = [s.command for b in BLOCKS for s in b.steps]
    for command in ("eval", "--json", "-f model.txt", "check", "jacobian", "hessian",
                    "graph", "optimize", "batch", "functions"):  # fmt: skip
        assert any(command in c for c in commands), command


def test_every_gradcli_command_of_the_readme_is_checked() -> None:
    unchecked = unchecked_gradcli_lines(README.read_text(encoding="utf-8"))
    assert not unchecked, "\n".join(
        f"README.md:{line}: `{row}` is not in a ```console block, where its output would be checked"
        for line, row in unchecked
    )


@pytest.mark.parametrize("block", BLOCKS, ids=[f"README.md:{b.line}" for b in BLOCKS])
def test_a_readme_session_prints_what_the_readme_shows(block: Block, tmp_path: Path) -> None:
    needs = [p for p in ("dot",) if any(f"| {p} " in s.command for s in block.steps)]
    for program in needs:
        if shutil.which(program) is None:
            pytest.skip(f"needs Graphviz's `{program}` program, which is not installed")
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    outputs = run_block(block, tmp_path, COLUMNS)
    for step, (command, output) in zip(block.steps, outputs, strict=True):
        assert normalised(output) == normalised(step.output), (
            f"README.md:{block.line}: `{command}` printed\n{output}"
        )


def test_the_sessions_run_without_a_terminal_at_the_width_given(tmp_path: Path) -> None:
    # the condition the outputs above are recorded in: a caption wraps at COLUMNS, no wider
    block = Block(0, (Step('gradcli check "sum(x*x)" x=1', ""),))
    [(_, output)] = run_block(block, tmp_path, COLUMNS)
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
    env = shell_env(tmp_path, COLUMNS)
    for example in examples:
        if "| dot " in example and shutil.which("dot") is None:
            continue  # needs Graphviz, as the help says
        proc = subprocess.run(
            ["bash", "-c", example],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0, f"`{example}`: exit {proc.returncode}\n{proc.stderr}"
        assert "error" not in proc.stderr, f"`{example}`:\n{proc.stderr}"
