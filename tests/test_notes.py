"""Notes said once, ``-q/--quiet``, captions that do not wrap narrower than the terminal,
and output lines without trailing spaces (issue 13, items 6 and 14; docs/commands.md,
"Notes and warnings" and "Tables"), each through a real ``python -m gradcli`` process with
stdout a pipe, and a pseudo-terminal where the progress bars are concerned.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from harness import run
from test_cli_conventions import on_terminal

TUTORIAL = ("eval", "a*b+b", "a=[3,4]", "b=[5,6]")
SUM_NOTE = (
    "note: the output has shape (2,): gradients are those of sum(output), as "
    "z.sum().backward() (give grad_output for a vector-Jacobian product)\n"
)


# --------------------------------------------------------------------------------------
# A note is said once: in the caption under a table, or on stderr without one
# --------------------------------------------------------------------------------------


def test_with_a_table_the_caption_says_the_reduction_and_stderr_is_empty() -> None:
    r = run(*TUTORIAL).expect(0)
    assert r.stderr == ""
    assert r.caption() == (
        "output reduced with sum() before backward, as z.sum().backward() "
        "total gradient norm 10.0995"
    )


def test_without_a_table_the_reduction_is_one_note_on_stderr() -> None:
    r = run(*TUTORIAL, "--json").expect(0)
    assert r.stderr == SUM_NOTE
    assert r.json["reduction"] == "sum"
    assert r.stdout.count("\n") == 1  # one compact line of JSON
    assert r.stdout == json.dumps(r.json, separators=(",", ":")) + "\n"


def test_a_request_on_stdin_shown_as_a_table_has_no_note_on_stderr() -> None:
    request = {"expr": "a*b+b", "inputs": {"a": [3, 4], "b": [5, 6]}}
    r = run("eval", "-", stdin=json.dumps(request)).expect(0)
    assert r.stderr == ""
    assert "output reduced with sum()" in r.caption()


def test_clipping_is_in_the_caption_with_a_table_and_a_note_without() -> None:
    table = run(*TUTORIAL, "--clip-norm", "1").expect(0)
    assert table.stderr == ""
    assert "gradients clipped: total 2-norm 10.0995 > max_norm 1, scaled by 0.0990147" in (
        table.caption()
    )
    bare = run(*TUTORIAL, "--json", "--clip-value", "4.5").expect(0)
    assert bare.stderr == SUM_NOTE + "note: gradients clamped to [-4.5, 4.5]\n"
    assert bare.json["inputs"]["a"]["grad"] == [4.5, 4.5]


def test_a_warning_is_still_a_warning_on_stderr_beside_a_table() -> None:
    r = run("eval", "exp(x)", "x=[1, 1000]").expect(0)
    assert r.stderr.startswith("warning: overflow encountered in 1 operation\n"), r.stderr
    assert "note:" not in r.stderr  # the caption says the sum
    assert "output reduced with sum()" in r.caption()


def test_a_thinned_loss_history_is_in_optimizes_caption_or_a_note() -> None:
    args = ("optimize", "x**2", "x=1", "--steps", "1000", "--max-history", "50")
    thinned = (
        "the loss history of 1,000 steps is thinned to one loss every 32 steps (32 losses "
        "and the final one; raise --max-history, now 50, to keep more)"
    )
    table = run(*args, columns=200).expect(0)
    assert table.stderr == ""
    assert thinned in table.stdout.splitlines()  # one line: the terminal has room for it
    bare = run(*args, "--json").expect(0)
    assert bare.stderr == f"note: {thinned}\n"
    assert bare.json["loss_every"] == 32


# --------------------------------------------------------------------------------------
# -q / --quiet: no notes, warnings or progress bars; errors still
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["-q", "--quiet"])
def test_quiet_silences_the_note_and_leaves_stdout_as_it_is(flag: str) -> None:
    loud = run(*TUTORIAL, "--json").expect(0)
    quiet = run(*TUTORIAL, "--json", flag).expect(0)
    assert (quiet.stdout, quiet.stderr) == (loud.stdout, "")
    table = run(*TUTORIAL, flag).expect(0)
    assert table.stdout == run(*TUTORIAL).stdout  # the caption is part of the table


@pytest.mark.parametrize(
    "args",
    [
        ("eval", "sum(exp(x * 1000))", "x=[1, 2]", "--json"),
        ("eval", "exp(x * 1000)", "x=[1, 2]"),
        ("jacobian", "x * 1e308 * 10", "x=[1, 2]", "--json"),
        ("jacobian", "x * 1e308 * 10", "x=[1, 2]"),
        ("hessian", "sum(exp(x * 1000))", "x=[1, 2]", "--json"),
        ("graph", "sum(exp(x * 1000))", "x=[1, 2]", "--json"),
        ("graph", "sum(exp(x * 1000))", "x=[1, 2]", "--dot"),
        ("optimize", "sum(x * 1e308 * 10)", "x=[1, 2]", "--steps", "3", "--json"),
        ("optimize", "x**2", "x=1", "--steps", "100", "--max-history", "10", "--json"),
        ("check", "sum(log(x))", "x=[1e-7, 2]", "--eps", "1e-6", "--json"),
    ],
    ids=lambda a: " ".join(a[:2]) + (" --json" if "--json" in a else ""),
)
def test_quiet_silences_warnings_and_notes_of_every_command(args: tuple[str, ...]) -> None:
    loud = run(*args)
    assert loud.stderr.startswith(("warning: ", "note: ")), loud.stderr
    quiet = run(*args, "-q")
    assert (quiet.code, quiet.stdout, quiet.stderr) == (loud.code, loud.stdout, "")


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("eval", "x +* 1", "x=1"), 2, "error: unexpected"),
        (("eval", "a @ b", "a=[1,2]", "b=[1,2,3]", "--json"), 1, "error (shape): matmul"),
        (("jacobian", "y", "x=1"), 2, "error: unknown name `y`"),
        (("optimize", "x", "x=[1,2]"), 1, "error: "),
    ],
)
def test_quiet_never_silences_an_error(args: tuple[str, ...], code: int, message: str) -> None:
    r = run(*args, "--quiet")
    assert r.code == code and r.stderr.startswith(message), r.stderr


def test_quiet_is_refused_where_nothing_is_printed_on_stderr() -> None:
    run("functions", "tanh", "-q").assert_usage_error("No such option: -q")


def test_quiet_hides_optimizes_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    code, terminal = on_terminal(
        ("optimize", "x**2", "x=1", "--steps", "3000", "--json", "-q"), out
    )
    assert code == 0 and terminal.strip() == ""
    assert json.loads(out.read_text())["steps_run"] == 3000


def test_quiet_hides_batchs_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    requests = tmp_path / "requests.ndjson"
    line = json.dumps({"expr": "sum(a*b)", "inputs": {"a": [1, 2], "b": [3, 4]}})
    requests.write_text((line + "\n") * 2000)
    out = tmp_path / "responses.ndjson"
    code, terminal = on_terminal(("batch", str(requests), "--quiet"), out)
    assert code == 0 and terminal.strip() == ""
    assert len(out.read_text().splitlines()) == 2000


# --------------------------------------------------------------------------------------
# Captions wrap at the terminal's width, not the table's; no line ends in a space
# --------------------------------------------------------------------------------------


def test_a_caption_wider_than_its_table_is_not_wrapped_on_a_wide_terminal() -> None:
    r = run("eval", "x*3", "x=2", "--clip-norm", "1", columns=120).expect(0)
    lines = r.stdout.splitlines()
    table_width = max(len(line) for line in lines if line.startswith("┏"))
    caption = "gradients clipped: total 2-norm 3 > max_norm 1, scaled by 0.333333"
    assert len(caption) > table_width
    assert caption in lines


def test_a_caption_longer_than_the_terminal_wraps_at_the_terminals_width() -> None:
    r = run("check", "sum(x*x)", "x=1", columns=60).expect(0)
    assert r.stdout.splitlines()[-2:] == [
        "central differences in float64, eps 1e-06; pass when",
        "|analytic - numeric| <= 1e-08 + 1e-05 |numeric|",
    ]


@pytest.mark.parametrize(
    "args",
    [
        TUTORIAL,
        ("eval", "h = a*b; sum(h + b)", "a=[3,4]", "b=[5,6]", "--clip-value", "1"),
        ("eval", "x", "x=[[1.5, 2], [3, 4]]", "--wrt", "x"),
        ("jacobian", "a*b+b", "a=[3,4]", "b=[5,6]"),
        ("hessian", "sum(x**3)", "x=[1,2]"),
        ("hessian", "sum(x**3)", "x=linspace(0, 1, 41)"),
        ("check", "sum(x*x*y)", "x=[1,2]", "y=[3,4]"),
        ("graph", "h = a*b; sum(h + b)", "a=[1,2]", "b=[3,4]"),
        ("optimize", "sum((x - 3)**2)", "x=[0,0]", "--steps", "20"),
        ("functions",),
        ("functions", "tanh"),
    ],
    ids=lambda a: " ".join(a[:2]),
)
@pytest.mark.parametrize("columns", [40, 80, 200])
def test_no_output_line_ends_in_a_space_when_piped(args: tuple[str, ...], columns: int) -> None:
    r = run(*args, columns=columns).expect(0)
    ending = [line for line in r.stdout.splitlines() if line.endswith(" ")]
    assert not ending, f"lines ending in a space:\n{ending}\nin\n{r.stdout}"
    assert r.stdout.strip()


# --------------------------------------------------------------------------------------
# On a terminal: the table in colour at the terminal's width, the caption unwrapped
# --------------------------------------------------------------------------------------


def _table_on_terminal(args: tuple[str, ...], columns: int, **env: str) -> tuple[int, bytes]:
    """``python -m gradcli ARGS`` with stdout and stderr on one pseudo-terminal
    ``columns`` wide, as typed at a terminal; returns the status and the raw bytes."""
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import sys
    import termios

    import harness

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    full_env = {**harness.gradcli_env(), "TERM": "xterm", **env}
    full_env.pop("COLUMNS", None)  # the terminal's own width
    full_env.pop("NO_COLOR", None) if "NO_COLOR" not in env else None
    proc = subprocess.Popen(
        [sys.executable, "-m", "gradcli", *args],
        stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, cwd=harness.REPO, env=full_env,
    )  # fmt: skip
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the process closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    code = proc.wait(timeout=60)
    os.close(master)
    return code, seen


def test_on_a_terminal_the_table_is_in_colour_and_the_caption_is_not_wrapped() -> None:
    from test_cli_conventions import _screen

    args = ("eval", "x*3", "x=2", "--clip-norm", "1")
    code, raw = _table_on_terminal(args, 100)
    assert code == 0
    assert b"\x1b[1m" in raw  # the header and title in bold on a terminal
    lines = _screen(raw).replace("\r\n", "\n").splitlines()
    caption = "gradients clipped: total 2-norm 3 > max_norm 1, scaled by 0.333333"
    table_width = max(len(line) for line in lines if line.startswith("┏"))
    assert len(caption) > table_width and caption in lines
    assert not [line for line in lines if line.endswith(" ")]
    assert "note:" not in _screen(raw) and "warning:" not in _screen(raw)  # said once


def test_on_a_narrow_terminal_the_caption_wraps_at_its_width_and_no_colour_with_no_color() -> None:
    from test_cli_conventions import _screen

    args = ("eval", "x*3", "x=2", "--clip-norm", "1")
    code, raw = _table_on_terminal(args, 40, NO_COLOR="1")
    assert code == 0
    text = _screen(raw).replace("\r\n", "\n")
    assert not re.search(rb"\x1b\[[0-9;]*(3[0-9]|9[0-7])[;m]", raw)  # bold, but no colours
    lines = text.splitlines()
    assert all(len(line) <= 40 for line in lines), lines
    assert "gradients clipped: total 2-norm 3 >" in text.replace("\n", " ")


@pytest.mark.parametrize("no_color", [False, True])
def test_a_warning_on_a_terminal_is_coloured_unless_no_color(no_color: bool) -> None:
    env = {"NO_COLOR": "1"} if no_color else {}
    code, raw = _table_on_terminal(("eval", "log(x)", "x=0"), 100, **env)
    assert code == 0 and b"warning" in raw
    coloured = re.search(rb"\x1b\[[0-9;]*(3[0-9]|9[0-7])[;m]", raw)
    assert (coloured is None) == no_color
