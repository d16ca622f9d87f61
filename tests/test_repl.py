"""``gradcli repl`` (issue 16, item 4; docs/repl.md): inputs kept between lines, eval's
table for an expression, gradients accumulated into ``.grad`` across lines, the
``:commands``, completion, the history file, and the session on a pseudo-terminal (Ctrl-C
cancels a line, Ctrl-D leaves).

Most tests run a session in this process (:func:`gradcli.repl.run`); a few run
``python -m gradcli repl`` with lines on stdin, or on a pseudo-terminal.
"""

from __future__ import annotations

import io
import os
import re
import select
import struct
import subprocess
import sys
import time
from pathlib import Path

import harness
import numpy as np
import pytest
from harness import REPO

from gradcli import repl

TUTORIAL = ["a = [3, 4]", "b = [5, 6]", "a*b + b"]


def session(*lines: str, **settings: object) -> tuple[int, str, str]:
    """A session over ``lines`` in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = repl.run(lines, out, err, **settings)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def _width(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_COLOR", "1")


def row(stdout: str, name: str) -> list[str]:
    """The cells of the table row whose first cell is ``name``."""
    for line in stdout.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃]", line)]
        if len(cells) > 2 and cells[1] == name:
            return cells[1:-1]
    raise AssertionError(f"no row {name!r} in\n{stdout}")


# --------------------------------------------------------------------------------------
# Lines from a pipe: `python -m gradcli repl`
# --------------------------------------------------------------------------------------


def test_piped_lines_keep_bindings_and_print_evals_own_table() -> None:
    r = harness.run("repl", stdin="\n".join(TUTORIAL) + "\n").expect(0)
    evaluated = harness.run("eval", "a*b + b", "a=[3, 4]", "b=[5, 6]").expect(0)
    assert r.stdout == evaluated.stdout  # no prompt, no echo: the table alone
    assert r.stderr == ""
    assert row(r.stdout, "a")[3] == "[5. 6.]"
    assert row(r.stdout, "b")[3] == "[4. 5.]"


def test_a_failed_line_in_a_pipe_goes_on_and_the_status_is_1() -> None:
    long = "1 + " * 20 + "1"
    r = harness.run("repl", "--max-program-chars", "40", stdin=f"a = [3, 4]\nq*2\n{long}\nsum(a)\n")
    assert r.code == 1
    assert r.stderr.splitlines() == [
        "error: unknown name `q`: give it a value as q=VALUE",
        "error: the program is 81 characters long, over the limit of 40 (raise it with "
        "--max-program-chars)",
    ]
    assert row(r.stdout, "output")[2] == "7.0"  # the line after the errors ran


def test_gradcli_alone_without_a_terminal_still_prints_the_help() -> None:
    r = harness.run(stdin="a = 1\n")
    assert r.code == 2
    assert "Usage: gradcli" in r.stdout + r.stderr and "repl" in r.stdout + r.stderr


# --------------------------------------------------------------------------------------
# Bindings and accumulation
# --------------------------------------------------------------------------------------


def test_the_tutorial_gives_its_gradients_and_grad_shows_them() -> None:
    code, out, err = session(*TUTORIAL, ":grad a", ":grad b", ":grad")
    assert (code, err) == (0, "")
    assert row(out, "a") == ["a", "(2,)", "[3. 4.]", "[5. 6.]"]
    assert row(out, "b") == ["b", "(2,)", "[5. 6.]", "[4. 5.]"]
    assert out.splitlines()[-4:] == [
        "a.grad = [5. 6.]",
        "b.grad = [4. 5.]",
        "a.grad = [5. 6.]",
        "b.grad = [4. 5.]",
    ]


def test_grad_accumulates_across_lines_until_zero() -> None:
    code, out, err = session(
        "a = [3, 4]", ":grad a", "b = [5, 6]", "a*b + b", "a*b + b", ":grad", "sum(a)",
        ":grad a", ":zero", ":grad", "a*b + b", ":grad b",
    )  # fmt: skip
    assert (code, err) == (0, "")
    said = [line for line in out.splitlines() if ".grad" in line]
    assert said == [
        "a.grad = None (no backward() has reached a yet)",
        "a.grad = [10. 12.]",  # two backward passes of a*b + b: [5, 6] twice
        "b.grad = [ 8. 10.]",
        "a.grad = [11. 13.]",  # sum(a) adds ones to a only
        "zeroed a.grad, b.grad",
        "a.grad = [0. 0.]",
        "b.grad = [0. 0.]",
        "b.grad = [4. 5.]",
    ]


def test_a_binding_of_earlier_names_is_part_of_the_graph() -> None:
    # the tutorial's c = a*b + b; c.sum().backward(): the gradients reach a and b through c
    code, out, err = session("a = [3, 4]", "b = [5, 6]", "c = a*b + b", "sum(c)", ":grad", ":vars")
    assert (code, err) == (0, "")
    assert out.splitlines()[0].strip() == "c = a*b + b"  # the program, as eval's title
    assert row(out, "c") == ["c", "(2,)", "[20. 30.]", "[1. 1.]"]
    assert row(out, "output")[2] == "50.0"
    assert "a.grad = [5. 6.]" in out and "b.grad = [4. 5.]" in out
    assert out.splitlines()[-3:] == ["a  (2,)  [3. 4.]", "b  (2,)  [5. 6.]", "c = a*b + b"]


def test_a_binding_sees_the_inputs_current_values_and_a_rebinding_resets_grad() -> None:
    code, out, err = session(
        "x = 2", "y = x**2", "y", "x = 3", ":grad x", "y", "x = x - 1", "x", ":vars",
    )  # fmt: skip
    assert (code, err) == (0, "")
    outputs = [row(t, "output")[2] for t in out.split("┏")[1:]]
    assert outputs == ["4.0", "9.0", "2.0"]  # y with x = 2, then x = 3; x = x - 1 is 2
    assert "x.grad = None (no backward() has reached x yet)" in out  # a new tensor
    assert out.splitlines()[-2:] == ["x  ()  2.0", "y = x**2"]


def test_several_statements_on_a_line_and_comments() -> None:
    code, out, err = session("a = [3, 4]; b = [5, 6]  # the tutorial", "# a comment", "", "a*b + b")
    assert (code, err) == (0, "")
    assert row(out, "a")[3] == "[5. 6.]"


def test_inputs_from_json_constants_and_files(tmp_path: Path) -> None:
    np.save(tmp_path / "w.npy", np.array([1.0, 2.0]))
    code, out, err = session(
        f"w = @{tmp_path / 'w.npy'}", "n = NaN", "t = linspace(0, 1, 3)", "e = 2", "e*w", ":vars"
    )
    assert (code, err) == (0, "")
    assert row(out, "e") == ["e", "()", "2.0", "3.0"]  # an input named e hides the constant
    assert out.splitlines()[-4:] == [
        "w  (2,)  [1. 2.]",
        "n  ()  nan",
        "t  (3,)  [0.  0.5 1. ]",
        "e  ()  2.0",
    ]


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------


def test_an_error_line_then_a_working_line() -> None:
    code, out, err = session("a = [3, 4]", "a @ [[1, 2]]", "a +", "sum(a)")
    assert code == 1  # a line failed
    assert err.splitlines() == [
        "error: matmul: shapes (2,) and (1, 2) do not fit",
        "error: unexpected end of the program at line 1, column 4; expected an expression",
        "  a +",
        "     ^",
    ]
    assert "Traceback" not in out + err
    assert row(out, "output")[2] == "7.0"


def test_errors_say_what_eval_says() -> None:
    evaluated = harness.invoke("eval", "inv(m)", "m=[[1, 2], [2, 4]]")
    code, _, err = session("m = [[1, 2], [2, 4]]", "inv(m)", "sum = 3", "c = m @ q")
    assert code == 1
    assert err.splitlines() == [
        evaluated.stderr.strip(),
        "error: cannot bind `sum`: it is the name of a function",
        "error: unknown name `q`: give it a value as q=VALUE",
    ]


def test_an_unknown_command_suggests_the_nearest() -> None:
    code, out, err = session(":gradd a", ":xyzzy", ":vars x")
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        "error: unknown command `:gradd` (did you mean `:grad` or `:graph`?); :help lists them",
        "error: unknown command `:xyzzy`; :help lists them",
        "error: :vars takes no argument",
    ]


def test_quit_ends_the_lines_and_help_lists_the_commands() -> None:
    code, out, err = session(":help", ":quit", "q")  # q would fail
    assert (code, err) == (0, "")
    for command in repl.COMMANDS:
        assert command in out


# --------------------------------------------------------------------------------------
# :explain, :graph, :save, :clip
# --------------------------------------------------------------------------------------


def test_explain_prints_what_gradcli_explain_prints() -> None:
    explained = harness.invoke("explain", "a*b + b", "a=[3, 4]", "b=[5, 6]").expect(0)
    code, out, err = session("a = [3, 4]", "b = [5, 6]", ":explain a*b + b")
    assert (code, err) == (0, "")
    assert out == explained.stdout
    assert out.splitlines()[-1] == "gradients: a: [5. 6.]; b: [4. 5.]"
    # without an expression: the last line's program; it adds nothing to .grad
    code, again, _ = session(*TUTORIAL, ":explain", ":grad a")
    assert explained.stdout in again
    assert again.splitlines()[-1] == "a.grad = [5. 6.]"


def test_graph_prints_what_gradcli_graph_prints() -> None:
    drawn = harness.invoke("graph", "h = a*b; sum(h + b)", "a=[1, 2]", "b=[3, 4]").expect(0)
    code, out, err = session("a = [1, 2]", "b = [3, 4]", ":graph h = a*b; sum(h + b)")
    # `h = a*b; ...` after :graph is the command's argument, one program
    assert (code, err) == (0, "")
    assert out == drawn.stdout


def test_save_writes_the_last_result(tmp_path: Path) -> None:
    npz, js = tmp_path / "grads.npz", tmp_path / "r.json"
    code, out, err = session(*TUTORIAL, "c = a*b", "sum(c)", f":save {npz}", f":save {js}")
    assert (code, err) == (0, "")
    assert out.splitlines()[-2:] == [f"saved {npz}", f"saved {js}"]
    with np.load(npz) as saved:
        assert sorted(saved.files) == ["grad_a", "grad_b", "grad_c", "output"]
        assert saved["grad_a"].tolist() == [5.0, 6.0]
        assert saved["grad_b"].tolist() == [3.0, 4.0]
        assert float(saved["output"]) == 39.0
    doc = harness.strict_loads(js.read_text())
    assert doc["expr"] == "c = a*b\nsum(c)"
    assert doc["inputs"]["a"]["grad"] == [5.0, 6.0]
    assert not list(tmp_path.glob(".*"))  # no temporary file left behind


def test_save_refuses_before_a_result_and_a_bad_extension(tmp_path: Path) -> None:
    code, _, err = session(f":save {tmp_path / 'x.npz'}", "a = 1", f":save {tmp_path / 'x.txt'}")
    assert code == 1
    lines = err.splitlines()
    assert lines[0] == "error: :save: no result yet: evaluate an expression first"
    assert lines[1].startswith('error: --save "') and 'unknown file type ".txt"' in lines[1]
    assert list(tmp_path.iterdir()) == []


def test_clip_scales_the_accumulated_grads_as_clip_grad_norm() -> None:
    code, out, err = session(*TUTORIAL, ":clip 1", ":grad")
    assert (code, err) == (0, "")
    scale = 1 / (np.sqrt(5**2 + 6**2 + 4**2 + 5**2) + 1e-6)
    assert out.splitlines()[-3] == (
        "clip_grad_norm_ on a.grad, b.grad: gradients clipped: total 2-norm 10.0995 > "
        f"max_norm 1, scaled by {scale:.6g}"
    )
    assert out.splitlines()[-2:] == ["a.grad = [0.4951 0.5941]", "b.grad = [0.3961 0.4951]"]


# --------------------------------------------------------------------------------------
# Completion and the history file
# --------------------------------------------------------------------------------------


def test_completion_of_names_functions_and_commands(tmp_path: Path) -> None:
    s = repl.Session()
    for line in ("alpha = 1", "alpaca = alpha*2", "beta = 3"):
        assert s.handle(line)
    assert s.candidates("al", "al") == ["alpaca", "alpha"]
    assert s.candidates("sum(alpha) + ta", "ta") == ["tan", "tanh"]
    assert "sigmoid" in s.candidates("sig", "sig")
    assert s.candidates(":gr", ":gr") == [":grad", ":graph"]
    assert s.candidates(":", ":") == sorted(repl.COMMANDS)
    assert s.candidates(":grad al", "al") == ["alpha"]  # inputs only: alpaca is a binding
    assert s.candidates(":explain alp", "alp") == ["alpaca", "alpha"]
    (tmp_path / "grads.npz").touch()
    (tmp_path / "graphs").mkdir()
    assert s.candidates(f":save {tmp_path}/gr", "gr") == ["grads.npz", "graphs/"]
    assert s.candidates(":vars ", "") == []


def test_history_path_follows_xdg_state_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", "/somewhere/state")
    assert repl.history_path() == "/somewhere/state/gradcli/history"
    monkeypatch.setenv("XDG_STATE_HOME", "relative")  # ignored, as the XDG spec says
    monkeypatch.setenv("HOME", "/home/someone")
    assert repl.history_path() == "/home/someone/.local/state/gradcli/history"


def test_an_unwritable_history_or_no_readline_is_no_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    editing = repl.Editing(repl.Session(), str(blocker / "gradcli" / "history"))
    editing.start()
    problem = editing.stop()
    if editing.readline is not None:  # the history cannot be written under a file
        assert problem is not None and problem.startswith("the history was not saved to ")
    monkeypatch.setitem(sys.modules, "readline", None)  # `import readline` fails
    editing = repl.Editing(repl.Session(), str(tmp_path / "history"))
    editing.start()
    assert editing.readline is None
    assert editing.stop() is None


# --------------------------------------------------------------------------------------
# On a pseudo-terminal
# --------------------------------------------------------------------------------------

pty = pytest.importorskip("pty")  # POSIX only
fcntl = pytest.importorskip("fcntl")
termios = pytest.importorskip("termios")
ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]|\r")


class Terminal:
    """``python -m gradcli ARGS`` on a pseudo-terminal that is its controlling terminal,
    so that Ctrl-C typed there is a SIGINT, as at a real one."""

    def __init__(self, *args: str, state: Path) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
        env = harness.gradcli_env()
        env.update(TERM="xterm", XDG_STATE_HOME=str(state), INPUTRC="/dev/null")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gradcli", *args],
            stdin=slave, stdout=slave, stderr=slave, cwd=REPO, env=env,
            start_new_session=True,
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        )  # fmt: skip
        os.close(slave)
        self.raw = b""

    @property
    def screen(self) -> str:
        return ESCAPES.sub("", self.raw.decode("utf-8", "replace"))

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # EIO: the process closed the terminal
            chunk = b""
        self.raw += chunk
        return bool(chunk)

    def prompts(self) -> int:
        return self.screen.count(repl.PROMPT)

    def type(self, keys: str, *, wait: bool = True) -> None:
        """Type ``keys``; when they end a line (or cancel it), wait for the next prompt."""
        before = self.prompts()
        os.write(self.master, keys.encode())
        if wait and keys.endswith(("\r", "\x03")):
            self.wait_for(lambda: self.prompts() > before)

    def wait_for(self, done: object) -> None:
        deadline = time.monotonic() + 60  # a guard against a hang, not a timing assertion
        while not done() and time.monotonic() < deadline:  # type: ignore[operator]
            if not self._read(0.05) and self.proc.poll() is not None:
                break
        assert done(), self.screen  # type: ignore[operator]

    def end(self) -> int:
        self.wait_for(lambda: not self._read(0.05) and self.proc.poll() is not None)
        os.close(self.master)
        return self.proc.wait(timeout=60)


def test_on_a_terminal_ctrl_c_cancels_the_line_and_ctrl_d_leaves(tmp_path: Path) -> None:
    term = Terminal(state=tmp_path)  # `gradcli` alone on a terminal: a session
    term.wait_for(lambda: term.prompts() == 1)
    term.type("a = [3, 4]\r")
    term.type("b = [5, 6]\r")
    term.type("a = [9, 9]")  # typed, then cancelled
    # as a person types: Ctrl-C once readline has read the line (Ctrl-C while readline
    # is still reading keys waits for the next key: CPython's readline loop)
    term.wait_for(lambda: "gradcli> a = [9, 9]" in term.screen)
    time.sleep(0.2)
    term.type("\x03")
    term.type("a*b + b\r")
    term.type("a*b + b\r")
    term.type(":ze\t\r")  # completed to :zero
    term.type("sum(b)\r")
    term.type(":grad\r")
    term.type("\x04", wait=False)  # Ctrl-D at an empty line
    assert term.end() == 0
    screen = term.screen
    assert "Traceback" not in screen and "error" not in screen
    tables = screen.split("┏")
    assert len(tables) == 4
    assert "│ a      │ (2,)  │ [3. 4.]   │ [5. 6.]  │" in tables[1]  # not [9. 9.]
    assert "zeroed a.grad, b.grad" in screen
    assert screen.rstrip().endswith("a.grad = [0. 0.]\nb.grad = [1. 1.]\ngradcli>")
    history = (tmp_path / "gradcli" / "history").read_text().splitlines()
    assert history[:3] == ["a = [3, 4]", "b = [5, 6]", "a*b + b"]
    assert "a = [9, 9]" not in history


def test_on_a_terminal_the_tutorial_defines_evaluates_accumulates_zeroes_and_clips(
    tmp_path: Path,
) -> None:
    # the tutorial's c = a*b + b: gradients [5, 6] and [4, 5]; a second backward adds
    # them again (accumulation), zero_() clears, clip_grad_norm_ scales the accumulated
    # .grad by max_norm / (total norm + 1e-6)
    term = Terminal("repl", state=tmp_path)
    term.wait_for(lambda: term.prompts() == 1)
    for line in ("a = [3, 4]", "b = [5, 6]", "c = a*b + b", "sum(c)", ":grad"):
        term.type(line + "\r")
    first = term.screen
    term.type("sum(c)\r")
    term.type(":grad\r")
    accumulated = term.screen[len(first) :]
    term.type(":zero\r")
    term.type(":grad\r")
    zeroed = term.screen
    term.type("sum(c)\r")
    term.type(":clip 1\r")
    term.type(":grad\r")
    clipped = term.screen[len(zeroed) :]
    term.type("\x04", wait=False)
    assert term.end() == 0
    screen = term.screen
    assert "Traceback" not in screen and "error" not in screen
    assert "│ a      │ (2,)  │ [3. 4.]   │ [5. 6.]  │" in first
    assert "│ b      │ (2,)  │ [5. 6.]   │ [4. 5.]  │" in first
    assert "a.grad = [5. 6.]\nb.grad = [4. 5.]" in first
    assert "a.grad = [10. 12.]\nb.grad = [ 8. 10.]" in accumulated
    assert "zeroed a.grad, b.grad" in zeroed
    assert "a.grad = [0. 0.]\nb.grad = [0. 0.]" in zeroed
    assert "gradients clipped: total 2-norm 10.0995 > max_norm 1" in clipped
    assert "a.grad = [0.4951 0.5941]\nb.grad = [0.3961 0.4951]" in clipped


def test_history_is_kept_between_sessions_and_an_unwritable_one_is_said(tmp_path: Path) -> None:
    (tmp_path / "gradcli").mkdir()
    (tmp_path / "gradcli" / "history").write_text("x = [1, 2]\nsum(x*x)\n")
    term = Terminal("repl", state=tmp_path)
    term.wait_for(lambda: term.prompts() == 1)
    term.type("\x1b[A\x1b[A\r")  # up twice: x = [1, 2]
    term.type("\x1b[A\x1b[A\r")  # up twice: sum(x*x)
    term.type(":quit\r", wait=False)
    assert term.end() == 0
    assert "│ x      │ (2,)  │ [1. 2.] │ [2. 4.]  │" in term.screen
    blocked = tmp_path / "file"
    blocked.write_text("")
    term = Terminal("repl", state=blocked)  # $XDG_STATE_HOME is a file: nothing is saved
    term.wait_for(lambda: term.prompts() == 1)
    term.type("1 + 1\r")
    term.type("\x04", wait=False)
    assert term.end() == 0
    assert "warning: the history was not saved to " in term.screen
    assert "Traceback" not in term.screen
