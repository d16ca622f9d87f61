"""The Bengali walkthrough, docs/bn/, shows what gradcli really prints (issue 16, item 2).

Its pages follow README.md's convention, and tests/harness.py reads and runs them as
tests/test_readme.py does the README: every ```` ```console ```` block is a terminal session
(``$ COMMAND`` and what it prints, stdout and stderr together), run by bash from a
temporary folder holding a copy of ``examples/``, ``COLUMNS=80``, no colour, and each
command's output must be the page's text exactly, after trailing white space is dropped.

The pages' Python scripts are files, ``examples/bn/*.py``: a ```` ```python ```` block is
the file named last in the text before it (```examples/bn/NAME.py```), verbatim, and the
page runs it in a console block (``$ python examples/bn/NAME.py``), so its output is checked
like a command's. A file there is PyTorch code after its one line ``import gradcli as
torch``. Files rather than ``python - <<'EOF'`` sessions: a reader can run them as they
are, the page shows the code with Python highlighting, and the session format stays one
line a command.
"""

from __future__ import annotations

import io
import re
import shutil
import tokenize
from pathlib import Path

import pytest
from harness import (
    REPO,
    Block,
    code_blocks,
    console_blocks,
    normalised,
    run_block,
    unchecked_gradcli_lines,
)

PAGES_DIR = REPO / "docs" / "bn"
SCRIPTS_DIR = REPO / "examples" / "bn"
COLUMNS = 80

PAGES = sorted(PAGES_DIR.glob("*.md"))
SCRIPTS = sorted(SCRIPTS_DIR.glob("*.py"))
_SCRIPT_NAME = re.compile(r"`(examples/bn/[\w.-]+\.py)`")


def _name(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


SESSIONS = [
    (page, block)
    for page in PAGES
    for block in console_blocks(page.read_text(encoding="utf-8"), _name(page))
]


def python_blocks(text: str, page: str) -> list[tuple[int, str, str]]:
    """``(line, script, body)`` of every ``python`` block: ``script`` the path named last
    in the text between the previous code block and this one."""
    found = []
    previous_end = 0
    lines = text.splitlines(keepends=True)
    for line, language, body in code_blocks(text):
        before = "".join(lines[previous_end : line - 1])
        previous_end = line + body.count("\n") + 1  # the block's last line, its closing fence
        if language != "python":
            continue
        names = _SCRIPT_NAME.findall(before)
        assert names, f"{page}:{line}: a python block that names no examples/bn/ file before it"
        found.append((line, names[-1], body))
    return found


def test_the_walkthrough_exists_and_is_linked() -> None:
    assert PAGES_DIR / "README.md" in PAGES
    docs_index = (REPO / "docs" / "README.md").read_text(encoding="utf-8")
    assert "(bn/README.md)" in docs_index
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "(docs/bn/README.md)" in readme


def test_the_walkthrough_covers_the_tutorial() -> None:
    commands = [step.command for _, block in SESSIONS for step in block.steps]
    for expected in (
        'eval "x + y"',  # requires_grad, and the gradient [1, 1]
        "--wrt",  # a tensor without requires_grad
        'eval "a*b + b"',  # the chain rule: [5, 6] and [4, 5]
        "--grad-output",  # why backward() needs a scalar
        "| gradcli repl",  # accumulation and zero_()
        "batch --accumulate",
        "--clip-norm",  # clip_grad_norm_
        'explain "a*b + b"',  # the chain rule step by step
        "python examples/tutorial.py",
    ):
        assert any(expected in c for c in commands), expected
    assert SCRIPTS, "no scripts in examples/bn/"
    for script in SCRIPTS:
        run = f"python {script.relative_to(REPO).as_posix()}"
        assert run in commands, f"no page runs `{run}`"


def test_every_gradcli_command_of_the_pages_is_checked() -> None:
    for page in PAGES:
        unchecked = unchecked_gradcli_lines(page.read_text(encoding="utf-8"))
        assert not unchecked, "\n".join(
            f"{_name(page)}:{line}: `{row}` is not in a ```console block, "
            "where its output would be checked"
            for line, row in unchecked
        )


def test_the_python_blocks_are_the_example_files() -> None:
    shown = []
    for page in PAGES:
        for line, script, body in python_blocks(page.read_text(encoding="utf-8"), _name(page)):
            path = REPO / script
            assert path.is_file(), f"{_name(page)}:{line}: no file {script}"
            assert body == path.read_text(encoding="utf-8"), (
                f"{_name(page)}:{line}: the block is not {script} as it is"
            )
            shown.append(path)
    assert sorted(shown) == SCRIPTS, "each script of examples/bn/ is shown once"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_the_scripts_are_pytorch_code_after_their_import(script: Path) -> None:
    source = script.read_text(encoding="utf-8")
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    lines = {t.start[0] for t in tokens if t.type == tokenize.NAME and t.string == "gradcli"}
    assert [source.splitlines()[n - 1] for n in sorted(lines)] == ["import gradcli as torch"]


@pytest.mark.parametrize(
    ("page", "block"), SESSIONS, ids=[f"{_name(p)}:{b.line}" for p, b in SESSIONS]
)
def test_a_session_prints_what_the_page_shows(page: Path, block: Block, tmp_path: Path) -> None:
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    outputs = run_block(block, tmp_path, COLUMNS)
    for step, (command, output) in zip(block.steps, outputs, strict=True):
        assert step.output.strip(), f"{_name(page)}:{block.line}: `{command}` shows no output"
        assert normalised(output) == normalised(step.output), (
            f"{_name(page)}:{block.line}: `{command}` printed\n{output}"
        )
