"""The edges of the process (issue 12, items 1, 2, 3 and 5), through the real command line.

- ``--save`` replaces its file atomically: a write that fails (``ulimit -f``) or a process
  killed with SIGKILL in the middle of a save leaves the old file as it was, loadable.
- stdout that cannot be written (``>/dev/full``) or is closed (``>&-``): every command says so
  in one line on stderr, exits 1 and shows no traceback.
- stderr that cannot be written (``2>/dev/full``, ``2>&-``) changes neither the result nor
  the exit code.

Each case is a ``python -m gradcli`` process started by ``bash -c`` so that the shell makes
the redirection, as a user's shell would.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import harness
import numpy as np
import pytest
from harness import REPO, strict_loads

from gradcli.io import ReplacedFile, save_npz

pytestmark = [
    pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash"),
    pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full"),
]

FULL = "gradcli: cannot write the output: No space left on device\n"
CLOSED = "gradcli: cannot write the output: standard output is closed\n"
NOISE = ("Traceback", "Exception ignored", "Errno", "internal error")
REQUEST = '{"expr": "sum(a*b)", "inputs": {"a": [1, 2], "b": [3, 4]}}\n'


def shell(
    args: list[str], redirect: str, *, stdin: str | None = None, cwd: Path = REPO, pre: str = ""
) -> subprocess.CompletedProcess[str]:
    """``gradcli ARGS REDIRECT`` run by bash (``pre`` runs first in the same shell)."""
    command = shlex.join([sys.executable, "-m", "gradcli", *args])
    return subprocess.run(
        ["bash", "-c", f"{pre}{command} {redirect}"],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=harness.gradcli_env(),
        timeout=60,
    )


# Every command, in table and --json mode; each output is a scalar or has no implicit sum,
# so that nothing but the failure is written on stderr.
COMMANDS: list[tuple[list[str], str | None]] = [
    (["eval", "sum(x*2)", "x=[1,2]"], None),
    (["eval", "sum(x*2)", "x=[1,2]", "--json"], None),
    (["eval", "-", "--json"], REQUEST),
    (["jacobian", "x*2", "x=[1,2]"], None),
    (["jacobian", "x*2", "x=[1,2]", "--json"], None),
    (["hessian", "sum(x**3)", "x=[1,2]"], None),
    (["hessian", "sum(x**3)", "x=[1,2]", "--json"], None),
    (["check", "sum(x**2)", "x=[1,2]"], None),
    (["check", "sum(x**2)", "x=[1,2]", "--json"], None),
    (["graph", "sum(x*2)", "x=[1,2]"], None),
    (["graph", "sum(x*2)", "x=[1,2]", "--json"], None),
    (["graph", "sum(x*2)", "x=[1,2]", "--dot"], None),
    (["optimize", "sum(x**2)", "x=[1,2]", "--steps", "3"], None),
    (["optimize", "sum(x**2)", "x=[1,2]", "--steps", "3", "--json"], None),
    (["functions"], None),
    (["functions", "--json"], None),
    (["batch"], REQUEST * 3),
    (["--version"], None),
]
IDS = [" ".join(a)[:40] for a, _ in COMMANDS]


# --------------------------------------------------------------------------------------
# 2, 3: stdout that cannot be written, or is closed
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "stdin"), COMMANDS, ids=IDS)
def test_stdout_full_is_one_line_and_exit_1(args: list[str], stdin: str | None) -> None:
    r = shell(args, ">/dev/full", stdin=stdin)
    assert (r.returncode, r.stderr) == (1, FULL), r.stderr


@pytest.mark.parametrize(("args", "stdin"), COMMANDS, ids=IDS)
def test_stdout_closed_is_one_line_and_exit_1(args: list[str], stdin: str | None) -> None:
    r = shell(args, ">&-", stdin=stdin)
    assert (r.returncode, r.stderr) == (1, CLOSED), r.stderr


def test_the_same_commands_succeed_with_a_stdout() -> None:
    """The cases above fail only because of their stdout."""
    r = shell(["eval", "sum(x*2)", "x=[1,2]", "--json"], "")
    assert (r.returncode, r.stderr) == (0, "")
    assert strict_loads(r.stdout)["inputs"]["x"]["grad"] == [2.0, 2.0]


@pytest.mark.parametrize("redirect", [">/dev/full", ">&-"])
def test_an_error_whose_json_cannot_be_written_keeps_its_exit_code(redirect: str) -> None:
    r = shell(["eval", "y", "x=1", "--json"], redirect)
    assert r.returncode == 2, r.stderr  # a name error, as with a stdout
    lines = r.stderr.splitlines()
    assert lines[0] == "error (name): unknown name `y`: give it a value as y=VALUE"
    assert lines[1:] == [(FULL if redirect == ">/dev/full" else CLOSED).rstrip("\n")]


@pytest.mark.parametrize("redirect", [">/dev/full", ">&-"])
def test_an_error_in_table_mode_writes_nothing_to_stdout(redirect: str) -> None:
    r = shell(["eval", "y", "x=1"], redirect)
    assert r.returncode == 2
    assert r.stderr == "error: unknown name `y`: give it a value as y=VALUE\n"


def test_stdout_and_stderr_both_full() -> None:
    r = shell(["eval", "1/x", "x=0", "--json"], ">/dev/full 2>/dev/full")
    assert (r.returncode, r.stdout, r.stderr) == (1, "", "")


def test_save_with_stdout_closed_still_saves(tmp_path: Path) -> None:
    out = tmp_path / "out.npz"
    r = shell(["eval", "sum(x**2)", "x=[1,2]", "--save", str(out)], ">&-")
    assert (r.returncode, r.stderr) == (1, CLOSED)
    with np.load(out) as saved:
        assert saved["output"] == 5.0
        assert saved["grad_x"].tolist() == [2.0, 4.0]


# --------------------------------------------------------------------------------------
# 5: stderr that cannot be written
# --------------------------------------------------------------------------------------

STDERR_BROKEN = ["2>/dev/full", "2>&-"]


@pytest.mark.parametrize("redirect", STDERR_BROKEN)
def test_a_warning_that_cannot_be_written_changes_nothing(redirect: str) -> None:
    r = shell(["eval", "1/x", "x=0", "--json"], redirect)
    assert r.returncode == 0
    doc = strict_loads(r.stdout)
    assert doc["output"]["value"] == "inf"
    assert doc["inputs"]["x"]["grad"] == "-inf"


@pytest.mark.parametrize("redirect", STDERR_BROKEN)
def test_a_warning_that_cannot_be_written_in_table_mode(redirect: str) -> None:
    r = shell(["eval", "x*2", "x=[1,2]"], redirect)
    assert r.returncode == 0
    assert "gradient" in r.stdout and "4" in r.stdout


@pytest.mark.parametrize("redirect", STDERR_BROKEN)
def test_an_error_message_that_cannot_be_written_keeps_the_exit_code(redirect: str) -> None:
    r = shell(["eval", "y", "x=1", "--json"], redirect)
    assert r.returncode == 2
    assert strict_loads(r.stdout)["error"]["kind"] == "name"
    r = shell(["eval", "y", "x=1"], redirect)
    assert (r.returncode, r.stdout) == (2, "")
    r = shell(["eval", "inv([[1, 2], [2, 4]])"], redirect)  # a domain error: exit 1
    assert (r.returncode, r.stdout) == (1, "")


@pytest.mark.parametrize("redirect", STDERR_BROKEN)
def test_batch_and_check_with_stderr_broken(redirect: str) -> None:
    bad = '{"expr": "y", "inputs": {"x": 1}}\n'
    r = shell(["batch"], redirect, stdin=REQUEST + bad + REQUEST)
    assert r.returncode == 1  # one line failed
    docs = [strict_loads(line) for line in r.stdout.splitlines()]
    assert [d.get("output", {}).get("value") for d in docs] == [11.0, None, 11.0]
    assert docs[1]["error"]["kind"] == "name"
    r = shell(["check", "relu(x)", "x=0"], redirect)  # a kink: the check fails
    assert r.returncode == 1 and "x" in r.stdout


# --------------------------------------------------------------------------------------
# 1: --save replaces its file atomically
# --------------------------------------------------------------------------------------


def _old_file(folder: Path) -> Path:
    good = folder / "good.npz"
    r = shell(["eval", "x*2", "x=[1,2]", "--save", str(good), "--json"], "", cwd=folder)
    assert r.returncode == 0, r.stderr
    return good


def _assert_old(good: Path) -> None:
    with np.load(good) as saved:
        assert saved["output"].tolist() == [2.0, 4.0]
        assert saved["grad_x"].tolist() == [2.0, 2.0]


def test_a_save_over_the_file_size_limit_leaves_the_old_file(tmp_path: Path) -> None:
    good = _old_file(tmp_path)
    args = ["eval", "x*2", "x=ones(100000)", "--save", str(good), "--json"]
    r = shell(args, "", cwd=tmp_path, pre="ulimit -f 200; ")  # 200 KiB; the archive is 1.6 MB
    assert r.returncode == 2, r.stderr
    assert "cannot write" in r.stderr and "File too large" in r.stderr
    assert not any(n in r.stderr for n in NOISE), r.stderr
    _assert_old(good)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.npz"]  # no temporary file left


def test_a_kill_during_a_save_leaves_the_old_file(tmp_path: Path) -> None:
    good = _old_file(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gradcli", "eval", "x*2", "x=ones(5*10**6)", "--save", str(good)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
        env=harness.gradcli_env(),
    )
    temp = None
    try:
        while temp is None and proc.poll() is None:
            temp = next((p for p in tmp_path.iterdir() if p.name.endswith(".tmp")), None)
        assert temp is not None, "the save finished before its temporary file was seen"
        assert temp.name.startswith(".good.npz.")  # beside the target, hidden
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    _assert_old(good)


def test_a_save_replaces_the_file_whole(tmp_path: Path) -> None:
    good = _old_file(tmp_path)
    good.chmod(0o640)
    link = tmp_path / "link.npz"
    link.symlink_to(good.name)
    r = shell(["eval", "x*3", "x=[1,2]", "--save", str(link), "--json"], "", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert link.is_symlink()  # the link is followed, not replaced
    with np.load(good) as saved:
        assert saved["output"].tolist() == [3.0, 6.0]
    assert stat.S_IMODE(good.stat().st_mode) == 0o640  # the old file's permissions
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.npz", "link.npz"]


def test_a_save_that_fails_halfway_in_process_leaves_the_old_file(tmp_path: Path) -> None:
    """The archive's second entry cannot be written (an object array, never pickled): the
    first one was already written, to the temporary file, not over the old one."""
    good = tmp_path / "good.npz"
    save_npz(str(good), {"output": np.array([2.0, 4.0]), "grad_x": np.array([2.0, 2.0])})
    bad = {"output": np.ones(10), "grad_y": np.array([object()], dtype=object)}
    with pytest.raises(ValueError, match="pickle"):
        save_npz(str(good), bad)
    _assert_old(good)
    assert [p.name for p in tmp_path.iterdir()] == ["good.npz"]


def test_replaced_file_writes_in_place_what_is_not_a_regular_file(tmp_path: Path) -> None:
    """A FIFO (as /dev/stdout in a pipe) is written, not replaced by a regular file."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    with ReplacedFile(str(fifo)) as f:
        f.write(b"hello")
    assert reader.communicate(timeout=10)[0] == b"hello"
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_replaced_file_error_in_the_block_removes_the_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "t.bin"
    target.write_bytes(b"old")
    with pytest.raises(KeyboardInterrupt), ReplacedFile(str(target)) as f:
        f.write(b"new, but not all of it")
        raise KeyboardInterrupt
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["t.bin"]
    with ReplacedFile(str(target)) as f:
        f.write(b"new")
    assert target.read_bytes() == b"new"
    assert [p.name for p in tmp_path.iterdir()] == ["t.bin"]


def test_save_to_dev_null_and_to_a_fifo_writes_a_whole_archive(tmp_path: Path) -> None:
    """A device or FIFO is written in place as a stream: /dev/null reports position 0
    forever, which broke zipfile ("internal error: argument out of range")."""
    save_npz(os.devnull, {"a": np.arange(3.0)})
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    save_npz(str(fifo), {"a": np.arange(3.0), "b": np.ones((2, 2))})
    data, _ = reader.communicate(timeout=30)
    (tmp_path / "got.npz").write_bytes(data)
    with np.load(tmp_path / "got.npz") as got:
        assert got["a"].tolist() == [0.0, 1.0, 2.0]
        assert got["b"].tolist() == [[1.0, 1.0], [1.0, 1.0]]


@pytest.mark.parametrize("module", ["typer", "rich", "numpy"])
def test_ctrl_c_while_the_command_line_loads_is_an_interrupted_run(module: str) -> None:
    """A SIGINT that arrives while ``gradcli.cli``'s imports run (here: when ``module`` is
    first looked for) ends the run with exit 130 and ``interrupted``, never a traceback."""
    code = f"""
import importlib.abc, os, signal, sys
class Interrupt(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == {module!r}:
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, Interrupt())
sys.argv = ["gradcli", "eval", "x", "x=1"]
from gradcli.__main__ import main
main()
"""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert (r.returncode, r.stdout, r.stderr) == (130, "", "interrupted\n")
