"""The command line's conventions (issue 13, items 1, 2, 9, 12 and 13; docs/cli.md), each
through a real ``python -m gradcli`` process.

- ``batch`` with stderr a terminal still writes every response to stdout (a redirected
  file), never to the terminal: a pseudo-terminal plays the terminal.
- Option typos get click's "No such option" with the nearest options, exit 2; an
  expression that begins with ``-`` and negative values still work.
- ``--help``: whole-sentence summaries, EXPR as the text says it, metavars instead of
  ``<int range>``, the ``--max-*`` options under "Limits"; ``functions NAME…``.
- Shell completion: ``--show-completion`` and function names for ``functions NAME``.
- ``optimize``: the loss plot as wide as the console, ``--tol``, Ctrl-C prints the result
  so far and exits 130, and the progress bar shows elapsed time and time remaining.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import harness
import pytest
from harness import REPO, run, strict_loads
from rich.cells import cell_len

pty = pytest.importorskip("pty")  # POSIX only
fcntl = pytest.importorskip("fcntl")
termios = pytest.importorskip("termios")

OPTIMIZE = ("optimize", "sum((x - 3)**2)", "x=[0, 0]", "--lr", "0.1")
# each sgd step multiplies x - 3 by 0.8: the loss after k steps is 18 * 0.64**k
LOSS = [18 * 0.64**k for k in range(200)]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]")


# --------------------------------------------------------------------------------------
# A process whose stderr is a terminal and whose stdout is a file
# --------------------------------------------------------------------------------------


def on_terminal(
    args: tuple[str, ...],
    stdout: Path,
    *,
    interrupt_when: Callable[[str], bool] | None = None,
    columns: int = 120,
    env: dict[str, str] | None = None,
) -> tuple[int, str]:
    """``python -m gradcli ARGS`` with stderr on a pseudo-terminal ``columns`` wide and
    stdout redirected into the file ``stdout``, as ``gradcli ARGS > FILE`` typed at a
    terminal. ``interrupt_when(terminal text so far)`` returning True sends one SIGINT (as
    Ctrl-C does). ``env``: the process's environment (default: gradcli's). Returns the exit
    status and the terminal's text, escapes removed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = dict(harness.gradcli_env() if env is None else env)
    env["TERM"] = "xterm"  # a terminal rich draws live displays on
    with stdout.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gradcli", *args],
            stdin=subprocess.DEVNULL, stdout=out, stderr=slave, cwd=REPO, env=env,
        )  # fmt: skip
    os.close(slave)
    seen = b""
    sent = interrupt_when is None
    deadline = time.monotonic() + 120  # a guard against a hang, not a timing assertion
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the process closed the terminal (it ended)
                    chunk = b""
                if not chunk:
                    break
                seen += chunk
                if not sent and interrupt_when(_screen(seen)):  # type: ignore[misc]
                    proc.send_signal(signal.SIGINT)
                    sent = True
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return code, _screen(seen)


def _screen(raw: bytes) -> str:
    return ANSI.sub("", raw.decode("utf-8", "replace"))


# --------------------------------------------------------------------------------------
# 1. batch: responses go to stdout, whatever stderr is
# --------------------------------------------------------------------------------------


def test_batch_with_stderr_a_terminal_writes_every_response_to_the_redirected_file(
    tmp_path: Path,
) -> None:
    n = 300
    requests = tmp_path / "requests.ndjson"
    requests.write_text(
        "".join(
            json.dumps({"id": k, "expr": "sum(a*b)", "inputs": {"a": [1, k], "b": [3, 4]}}) + "\n"
            for k in range(n)
        )
    )
    out = tmp_path / "responses.ndjson"
    code, terminal = on_terminal(("batch", str(requests)), out)
    assert code == 0, terminal
    lines = out.read_text().splitlines()
    assert len(lines) == n, f"{len(lines)} responses in the file; the terminal got:\n{terminal}"
    responses = [strict_loads(line) for line in lines]
    assert [r["id"] for r in responses] == list(range(n))
    assert [r["output"]["value"] for r in responses] == [3.0 + 4 * k for k in range(n)]
    assert responses[7]["inputs"]["a"]["grad"] == [3.0, 4.0]
    assert '"expr"' not in terminal, "a response reached the terminal"
    assert "Traceback" not in terminal


# --------------------------------------------------------------------------------------
# 2. option typos are options; expressions may still begin with -
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "typo", "meant"),
    [
        (("eval", "x", "x=1", "--jsn"), "--jsn", "--json"),
        (("eval", "x", "x=1", "--precission", "3"), "--precission", "--precision"),
        (("eval", "--jsn", "x", "x=1"), "--jsn", "--json"),
        (("eval", "x", "--precission=3", "x=1"), "--precission", "--precision"),
        (("optimize", "x**2", "x=1", "--optimiser", "adam"), "--optimiser", "--optimizer"),
        (("batch", "--acumulate"), "--acumulate", "--accumulate"),
        (("functions", "--jsno"), "--jsno", "--json"),
    ],
)
def test_an_option_typo_is_no_such_option_with_the_nearest(
    args: tuple[str, ...], typo: str, meant: str
) -> None:
    r = run(*args)
    r.assert_usage_error(f"No such option: {typo} (Possible options: {meant})")
    assert "NAME=VALUE" not in r.stderr
    assert r.stdout == ""


def test_an_option_typo_in_json_mode_is_an_input_error_object() -> None:
    r = run("eval", "x", "x=1", "--jsn", "--json").expect(2)
    error = r.json["error"]
    assert error["kind"] == "input"
    assert error["message"].startswith("No such option: --jsn (Possible options: --json)")


def test_an_unknown_short_option_after_the_expression_is_an_option_error() -> None:
    run("eval", "x", "x=1", "-j").assert_usage_error("No such option: -j")


def test_expressions_that_begin_with_a_minus_and_negative_values_still_work() -> None:
    d = run("eval", "-x**2", "x=3", "--json").expect(0).json
    assert (d["output"]["value"], d["inputs"]["x"]["grad"]) == (-9.0, -6.0)
    d = run("eval", "--json", "-x*y", "x=-3", "y=[-1, 2]").expect(0).json
    assert d["output"]["value"] == [-3.0, 6.0]
    assert d["inputs"]["x"]["grad"] == -1.0  # d/dx sum(-x*y) = -sum(y)
    assert d["inputs"]["y"]["grad"] == [3.0, 3.0]
    # an option's own value may begin with - too
    d = run("eval", "x*2", "x=[1, -2]", "--clip-value", "1", "--json").expect(0).json
    assert d["inputs"]["x"]["grad"] == [1.0, 1.0]
    # after --, anything is an argument
    d = run("eval", "--json", "--", "-x", "x=-3").expect(0).json
    assert d["output"]["value"] == 3.0


# --------------------------------------------------------------------------------------
# 9. --help, and functions NAME...
# --------------------------------------------------------------------------------------

COMMANDS = [
    "eval",
    "batch",
    "check",
    "jacobian",
    "hessian",
    "jvp",
    "graph",
    "explain",
    "optimize",
    "functions",
    "repl",
]


def _sections(help_text: str) -> dict[str, str]:
    """The help's sections by heading ("Usage", "Options", "Limits", ...)."""
    out: dict[str, str] = {}
    heading = "Usage"
    for line in help_text.splitlines():
        if line.startswith("Usage:"):
            heading = "Usage"
        elif line and not line.startswith(" ") and line.endswith(":"):
            heading = line[:-1]
            continue
        out[heading] = out.get(heading, "") + line + "\n"
    return out


def _options(section: str) -> list[str]:
    """The options a section lists (first on their line)."""
    return re.findall(r"^  (?:-\w, )?(--[\w-]+)", section, re.MULTILINE)


def test_command_summaries_are_whole_sentences() -> None:
    commands = _sections(run("--help").expect(0).stdout)["Commands"]
    rows = dict(line.strip().split(None, 1) for line in commands.splitlines() if line.strip())
    assert list(rows) == COMMANDS
    for name, summary in rows.items():
        assert summary.endswith(".") and "..." not in summary, (name, summary)
    assert rows["eval"] == "Evaluate a program, backpropagate, print value and gradients."


@pytest.mark.parametrize("command", COMMANDS)
def test_help_placeholders_say_what_goes_there(command: str) -> None:
    text = run(command, "--help").expect(0).stdout
    assert "<int range>" not in text and "<float>" not in text and "<path>" not in text
    assert "[expr]" not in text


def test_usage_and_text_both_say_expr() -> None:
    text = run("eval", "--help").expect(0).stdout
    assert text.splitlines()[0] == "Usage: gradcli eval [OPTIONS] [EXPR] [NAME=VALUE]..."
    assert "Evaluate EXPR" in text
    arguments = _sections(text)["Arguments"]
    assert arguments.split()[0] == "EXPR"


SIZES = ["--max-elements", "--max-program-chars"]


@pytest.mark.parametrize(
    ("command", "limits"),
    [
        ("eval", [*SIZES, "--max-stdin-bytes"]),
        ("check", [*SIZES, "--max-stdin-bytes", "--max-passes"]),
        ("optimize", ["--max-history", *SIZES, "--max-stdin-bytes"]),
        ("batch", ["--max-line-bytes", *SIZES]),
    ],
)  # fmt: skip
def test_the_limits_are_listed_under_their_own_heading(command: str, limits: list[str]) -> None:
    sections = _sections(run(command, "--help").expect(0).stdout)
    assert _options(sections["Limits"]) == limits
    assert not [o for o in _options(sections["Options"]) if o.startswith("--max-")]
    assert "--debug" in _options(sections["Options"])
    assert "--max-elements N " in sections["Limits"]


def test_functions_name_shows_just_those_functions() -> None:
    r = run("functions", "tanh").expect(0)
    assert "tanh(x)" in r.stdout and "sigmoid" not in r.stdout and "sqrt" not in r.stdout
    rows = run("functions", "sigmoid", "atan", "tanh", "arctan", "--json").expect(0).json
    assert [row["name"] for row in rows] == ["sigmoid", "arctan", "tanh"]  # an alias: once
    assert rows[1]["aliases"] == ["atan"]
    assert rows[0]["derivative"] == "g s (1 - s), s = sigmoid(x)"


def test_functions_with_an_unknown_name_is_an_input_error_with_a_suggestion() -> None:
    r = run("functions", "tanh", "tanhh")
    r.assert_usage_error("unknown function `tanhh` (did you mean `tanh`")
    assert r.stdout == ""
    d = run("functions", "sigmiod", "--json").expect(2).json
    assert d["error"]["kind"] == "input" and "`sigmoid`" in d["error"]["message"]


# --------------------------------------------------------------------------------------
# 12. shell completion
# --------------------------------------------------------------------------------------


def _complete(words: str) -> list[str]:
    """What bash completion offers for the last word of ``words``."""
    env = harness.gradcli_env()
    env.update(
        _GRADCLI_COMPLETE="complete_bash", COMP_WORDS=words, COMP_CWORD=str(len(words.split()) - 1)
    )
    proc = subprocess.run(
        [sys.executable, "-m", "gradcli"], capture_output=True, text=True, env=env, cwd=REPO,
        timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_completion_of_commands_options_and_function_names() -> None:
    assert _complete("gradcli op") == ["optimize"]
    assert _complete("gradcli functions ta") == ["tan", "tanh"]
    assert _complete("gradcli functions sig") == ["sigmoid", "sign"]
    assert _complete("gradcli eval x --js") == ["--json"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_show_completion_prints_the_script_for_the_shell() -> None:
    # run from bash, so that the shell is detected as a user's would be
    proc = subprocess.run(
        ["bash", "-c", f"{sys.executable} -m gradcli --show-completion"],
        capture_output=True, text=True, env=harness.gradcli_env(), cwd=REPO, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "_GRADCLI_COMPLETE=complete_bash" in proc.stdout
    assert "complete -o default -F _gradcli_completion gradcli" in proc.stdout
    text = run("--help").expect(0).stdout
    assert "--install-completion" in text and "--show-completion" in text


# --------------------------------------------------------------------------------------
# 13. optimize: the plot's width, --tol, Ctrl-C, the progress bar
# --------------------------------------------------------------------------------------


def _plot_columns(stdout: str) -> int:
    axis = next(line for line in stdout.splitlines() if "└" in line and "┴" not in line)
    return axis.count("─")


@pytest.mark.parametrize(("columns", "curve"), [(40, 40 - 9 - 2), (60, 60 - 9 - 2), (150, 101)])
def test_the_loss_plot_is_as_wide_as_the_terminal(columns: int, curve: int) -> None:
    # 101 losses; the widest tick label, "7.469e-19", takes 9 cells and " ┤" 2 more
    r = run(*OPTIMIZE, "--steps", "100", columns=columns).expect(0)
    assert max(cell_len(line) for line in r.stdout.splitlines()) <= columns, r.stdout
    assert _plot_columns(r.stdout) == curve
    assert "7.469e-19 ┤" in r.stdout and "step 0 … 100" in r.stdout


def test_tol_stops_when_a_step_changes_the_loss_by_less() -> None:
    d = run(*OPTIMIZE, "--steps", "1000", "--tol", "1e-6", "--json").expect(0).json
    # |18 (0.64**k - 0.64**(k-1))| = 6.48 * 0.64**(k-1) is first below 1e-6 at k = 37
    assert (d["steps"], d["steps_run"], d["tol"]) == (1000, 37, 1e-6)
    assert d["converged"] is True and d["interrupted"] is False
    assert d["losses"] == pytest.approx(LOSS[:38], rel=1e-9)
    assert d["final"]["x"]["value"] == pytest.approx([3 - 3 * 0.8**37] * 2, rel=1e-12)
    table = run(*OPTIMIZE, "--steps", "1000", "--tol", "1e-6", columns=100).expect(0)
    assert "37 of 1000 steps (loss change < tol 1e-06)" in table.text
    assert "step 0 … 37" in table.stdout


def test_tol_never_met_runs_every_step() -> None:
    d = run(*OPTIMIZE, "--steps", "20", "--tol", "1e-6", "--json").expect(0).json
    assert (d["steps_run"], d["converged"], len(d["losses"])) == (20, False, 21)
    d = run(*OPTIMIZE, "--steps", "20", "--json").expect(0).json
    assert (d["steps_run"], d["tol"], d["converged"], d["interrupted"]) == (20, None, False, False)


def test_a_bad_tol_is_an_input_error() -> None:
    run(*OPTIMIZE, "--tol", "-1").assert_usage_error("--tol must be a finite number >= 0")


def _steps_done(terminal: str) -> int:
    counts = re.findall(r"(\d+)/100000000", terminal)
    return int(counts[-1]) if counts else 0


@pytest.mark.parametrize("json_out", [True, False])
def test_ctrl_c_prints_the_result_so_far_and_exits_130(tmp_path: Path, json_out: bool) -> None:
    out = tmp_path / "out.txt"
    args = (*OPTIMIZE, "--steps", "100000000", "--max-history", "100000000")
    code, terminal = on_terminal(
        (*args, "--json") if json_out else args, out,
        interrupt_when=lambda seen: _steps_done(seen) > 0,
    )  # fmt: skip
    assert code == 130, terminal
    done = re.search(r"interrupted after (\d+) of 100000000 steps", terminal)
    assert done, terminal
    k = int(done.group(1))
    assert k >= _steps_done(terminal) > 0
    assert "Traceback" not in terminal
    # the same steps run to their end give the same numbers
    whole = run(*OPTIMIZE, "--steps", str(k), "--json").expect(0).json
    if json_out:
        d = strict_loads(out.read_text())
        assert (d["interrupted"], d["converged"], d["steps_run"], d["steps"]) == (
            True, False, k, 100_000_000,
        )  # fmt: skip
        assert d["losses"] == whole["losses"] and len(d["losses"]) == k + 1
        assert d["final"] == whole["final"]
    else:
        text = " ".join(out.read_text().split())
        assert f"interrupted after {k} of 100000000 steps, lr 0.1: loss 18 →" in text
        assert f"step 0 … {k}" in text
        assert "name" in text and "gradient" in text


def test_the_progress_bar_shows_elapsed_time_and_time_remaining(tmp_path: Path) -> None:
    def eta_shown(seen: str) -> bool:
        return _bar(seen) is not None

    out = tmp_path / "out.json"
    code, terminal = on_terminal(
        (*OPTIMIZE, "--steps", "100000000", "--json"), out, interrupt_when=eta_shown
    )
    assert code == 130
    bar = _bar(terminal)
    assert bar is not None, terminal
    steps, loss, elapsed, remaining = bar
    assert 0 < steps < 100_000_000 and 0 <= loss <= 18
    assert re.fullmatch(r"\d+:\d\d:\d\d", elapsed) and re.fullmatch(r"\d+:\d\d:\d\d", remaining)
    assert strict_loads(out.read_text())["interrupted"] is True  # stdout got only the result


def _bar(terminal: str) -> tuple[int, float, str, str] | None:
    """The last drawn state of optimize's bar: steps done, loss, elapsed, remaining."""
    states = re.findall(
        r"optimizing .*? (\d+)/100000000 loss (\S+) (\d+:\d\d:\d\d) (\d+:\d\d:\d\d)", terminal
    )
    if not states:
        return None
    steps, loss, elapsed, remaining = states[-1]
    return int(steps), float(loss), elapsed, remaining


def test_a_program_that_looks_like_an_option_over_a_given_name_is_the_program() -> None:
    """`--x` with x=2 given is minus minus x (the property tests generate such programs);
    `--jsn` names nothing given a value, so it stays an option typo."""
    run = subprocess.run(
        [sys.executable, "-m", "gradcli", "eval", "--x", "x=2", "--json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    assert got["output"]["value"] == 2.0 and got["inputs"]["x"]["grad"] == 1.0
    typo = subprocess.run(
        [sys.executable, "-m", "gradcli", "eval", "--jsn", "x=2"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert typo.returncode == 2 and "No such option: --jsn" in typo.stderr
