"""User text reaching a terminal is shown with control characters escaped, and no number
is dropped on a narrow terminal (issue 12, items 8 and 11).

Every test runs the real command line (``python -m gradcli ...``) in a subprocess and looks
at the bytes it writes: no raw ESC, BEL, C1 control, DEL or bidirectional override may
reach stdout or stderr in table, tree or message output, and the escaped form (``\\x1b``,
as Python writes it) must be shown instead. JSON output is data and stays as it was.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import harness
import pytest

REPO = Path(__file__).resolve().parent.parent

#: a comment that sets the window title (OSC 0 ... BEL), then clears the screen (CSI 2 J)
TITLE_AND_CLEAR = "\x1b]0;pwned\x07\x1b[2J"
TITLE_AND_CLEAR_SHOWN = "\\x1b]0;pwned\\x07\\x1b[2J"
#: bytes that must never be written raw: ESC, BEL, CR, DEL, C1 CSI (UTF-8), RLO (UTF-8)
RAW = (b"\x1b", b"\x07", b"\r", b"\x7f", "\x9b".encode(), "\u202e".encode())


@dataclass(frozen=True)
class Run:
    code: int
    stdout: bytes
    stderr: bytes

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8")

    def assert_no_raw_controls(self) -> None:
        for name, data in (("stdout", self.stdout), ("stderr", self.stderr)):
            for raw in RAW:
                assert raw not in data, f"raw {raw!r} on {name}: {data[:600]!r}"


def gradcli(*args: str, stdin: str | None = None, columns: int = 100) -> Run:
    env = dict(os.environ)
    for var in ("LINES", "FORCE_COLOR", "CLICOLOR_FORCE", "TTY_COMPATIBLE"):
        env.pop(var, None)
    env.update(COLUMNS=str(columns), NO_COLOR="1", PYTHONIOENCODING="utf-8")
    proc = harness.process(
        args,
        stdin=subprocess.DEVNULL if stdin is None else stdin.encode("utf-8"),
        cwd=REPO,
        env=env,
        timeout=120,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def words(text: str) -> str:
    return " ".join(text.split())


def unwrapped(text: str) -> str:
    """``text`` without any whitespace (a title may be folded to the width of its table)."""
    return "".join(text.split())


# --- the helper ----------------------------------------------------------------------------


def test_escape_controls_escapes_controls_and_bidi_and_keeps_printable_unicode() -> None:
    from gradcli.errors import escape_controls

    assert escape_controls(TITLE_AND_CLEAR) == TITLE_AND_CLEAR_SHOWN
    assert escape_controls("a\x00b\rc\x7fd\x85e\x9bf") == "a\\x00b\\rc\\x7fd\\x85e\\x9bf"
    bidi = "".join(map(chr, (*range(0x202A, 0x202F), *range(0x2066, 0x206A))))
    assert escape_controls(bidi) == "".join(f"\\u{ord(c):04x}" for c in bidi)
    assert escape_controls("x\u2028y\u2029") == "x\\u2028y\\u2029"
    # layout characters, printable Unicode (Bengali with its joiners, CJK) and backslashes
    kept = "h = ক্ষ * 中文\t# a\\x1b literal\n\u200d\u200c é"
    assert escape_controls(kept) == kept


# --- titles: the table, the tree, a JSON request -------------------------------------------


def test_eval_table_title_shows_a_comment_escaped() -> None:
    run = gradcli("eval", f"x*2 # {TITLE_AND_CLEAR}", "x=[1,2]")
    assert run.code == 0, run.err
    run.assert_no_raw_controls()
    assert TITLE_AND_CLEAR_SHOWN in run.out
    assert "[2. 4.]" in run.out


def test_eval_table_title_from_a_program_file(tmp_path: Path) -> None:
    program = tmp_path / "program.txt"
    program.write_text(f"h = x * 2  # {TITLE_AND_CLEAR}\nsum(h)\n", encoding="utf-8")
    run = gradcli("eval", "-f", str(program), "x=[1,2]")
    assert run.code == 0, run.err
    run.assert_no_raw_controls()
    assert TITLE_AND_CLEAR_SHOWN in run.out


def test_graph_tree_title_shows_a_comment_escaped() -> None:
    run = gradcli("graph", f"x*2 # {TITLE_AND_CLEAR}", "x=[1,2]")
    assert run.code == 0, run.err
    run.assert_no_raw_controls()
    assert run.out.splitlines()[0] == f"x*2 # {TITLE_AND_CLEAR_SHOWN}"


@pytest.mark.parametrize(
    "command", [["jacobian"], ["hessian"], ["check"], ["optimize", "--steps", "2"]]
)
def test_other_command_titles_show_a_comment_escaped(command: list[str]) -> None:
    run = gradcli(command[0], f"sum(x*x) # {TITLE_AND_CLEAR}", "x=[1,2]", *command[1:])
    assert run.code == 0, run.err
    run.assert_no_raw_controls()
    assert TITLE_AND_CLEAR_SHOWN in unwrapped(run.out)


def test_eval_stdin_json_request_title_escaped_and_json_unchanged() -> None:
    request = json.dumps({"expr": f"x*2 # {TITLE_AND_CLEAR}", "inputs": {"x": [1, 2]}})
    run = gradcli("eval", "-", stdin=request)
    assert run.code == 0, run.err
    run.assert_no_raw_controls()
    assert TITLE_AND_CLEAR_SHOWN in run.out
    # JSON is data, not terminal text: the program comes back as it was sent
    run = gradcli("eval", "-", "--json", stdin=request)
    assert run.code == 0, run.err
    assert b"\x1b" not in run.stdout  # JSON writes it as \u001b
    assert json.loads(run.out)["expr"] == f"x*2 # {TITLE_AND_CLEAR}"


def test_printable_unicode_is_kept_and_c1_del_and_bidi_are_escaped() -> None:
    run = gradcli("eval", "ক * 2 # 中文 \u202eevil\u202c \x9b \x7f", "ক=[1,2]")
    assert run.code == 0, run.err
    run.assert_no_raw_controls()
    assert "ক * 2 # 中文 \\u202eevil\\u202c \\x9b \\x7f" in run.out
    assert re.search(r"│ ক\s+│ \(2,\)", run.out)


# --- messages on stderr ---------------------------------------------------------------------


@pytest.mark.parametrize("command", ["eval", "graph", "jacobian", "check"])
def test_unknown_wrt_name_is_echoed_escaped(command: str) -> None:
    run = gradcli(command, "x*2", "x=[1,2]", "--wrt", f"x,{TITLE_AND_CLEAR}")
    assert run.code == 2
    run.assert_no_raw_controls()
    assert run.out == ""
    assert run.err.splitlines()[0] == (
        f"error: --wrt names `{TITLE_AND_CLEAR_SHOWN}`, which is not an input"
    )


def test_unknown_wrt_name_in_json_mode_escaped_on_stderr_and_exact_in_json() -> None:
    run = gradcli("eval", "x*2", "x=[1,2]", "--wrt", TITLE_AND_CLEAR, "--json")
    assert run.code == 2
    run.assert_no_raw_controls()
    assert run.err.splitlines()[0] == (
        f"error (name): --wrt names `{TITLE_AND_CLEAR_SHOWN}`, which is not an input"
    )
    error = json.loads(run.out)["error"]
    assert error["kind"] == "name"
    assert error["message"] == f"--wrt names `{TITLE_AND_CLEAR}`, which is not an input"


def test_unknown_wrt_name_of_a_json_request_is_echoed_escaped() -> None:
    request = json.dumps({"expr": "x*2", "inputs": {"x": 1}, "wrt": [TITLE_AND_CLEAR]})
    run = gradcli("eval", "-", stdin=request)
    assert run.code == 2
    run.assert_no_raw_controls()
    assert TITLE_AND_CLEAR_SHOWN in run.err


@pytest.mark.parametrize(
    "args",
    [
        ["eval", "x*2", "x=1", "--inputs", TITLE_AND_CLEAR],  # a file that does not exist
        ["batch", TITLE_AND_CLEAR],
    ],
)
def test_file_errors_echo_user_text_escaped(args: list[str]) -> None:
    run = gradcli(*args)
    assert run.code == 2
    run.assert_no_raw_controls()
    assert "\\x1b" in run.err or "\\u001b" in run.err


# --- narrow terminals: every number shown ---------------------------------------------------

_NUMBER = re.compile(r"-?\d+\.\d*(?:e[+-]\d+)?")


def _values(response: dict[str, Any]) -> list[float]:
    """Every number of an ``eval --json`` response: output, inputs, intermediates, grads."""
    found: list[Any] = [response["output"]["value"]]
    for entry in (*response["inputs"].values(), *response["intermediates"].values()):
        found += [entry["value"], entry["grad"]]
    flat: list[float] = []
    while found:
        item = found.pop()
        if isinstance(item, list):
            found += item
        elif item is not None:
            flat.append(float(item))
    return flat


def _shown(text: str) -> set[float]:
    return {float(n) for n in _NUMBER.findall(text)}


EVAL_ARGS = ["eval", "h = x*y; sum(h*h)", "x=[1.5,-2.25]", "y=[0.5,4]"]


@pytest.mark.parametrize("columns", [12, 20, 40])
def test_every_number_of_the_result_is_shown_at_any_width(columns: int) -> None:
    expected = _values(json.loads(gradcli(*EVAL_ARGS, "--json").out))
    assert len(expected) == 13
    run = gradcli(*EVAL_ARGS, columns=columns)
    assert run.code == 0, run.err
    shown = _shown(run.out)
    missing = [v for v in expected if round(v, 4) not in shown]
    assert not missing, f"numbers missing at COLUMNS={columns}: {missing}\n{run.out}"
    assert "…" not in run.out
    assert all(len(line) <= columns for line in run.out.splitlines())
    for label in ("h = x*y;", "x", "y", "h", "output", "total gradient norm"):
        assert label in words(run.out)


@pytest.mark.parametrize("columns", [12, 20])
@pytest.mark.parametrize(
    ("args", "numbers"),
    [
        (["jacobian", "x*123.25", "x=[1,2]"], [123.25, 0.0]),
        (["hessian", "sum(x**3)", "x=[1.5,2]"], [9.0, 12.0, 0.0]),
        (["optimize", "sum(x**2)", "x=[1.5,2]", "--steps", "1", "--lr", "0.25"], [0.75, 1.0]),
    ],
)
def test_other_tables_show_every_number_when_narrow(
    columns: int, args: list[str], numbers: list[float]
) -> None:
    run = gradcli(*args, columns=columns)
    assert run.code == 0, run.err
    assert not re.search(r"\S…", run.out), run.out  # rich's mark of a cell cut short
    shown = _shown(run.out) | {float(n) for n in re.findall(r"(?<![\w.])-?\d+(?![\w.])", run.out)}
    assert set(numbers) <= shown, run.out
