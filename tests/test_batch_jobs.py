"""``batch --jobs N`` (docs/commands.md, "batch"): N worker processes answer blocks of lines,
and the output is one process's, byte for byte — the responses, the error responses with
their line numbers in the whole stream, the exit code, the ``--accumulate`` summary to the
last bit. And the processes never outlive the command, whatever ends it.

The in-process tests cut blocks of a few lines (``parallel.BLOCK_LINES``), so that a short
stream spans many blocks and every worker answers several.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import harness
import numpy as np
import pytest
from harness import REPO
from test_cli_conventions import on_terminal

from gradcli import parallel
from gradcli.batch import run_batch

TUTORIAL = '{{"id": {i}, "expr": "sum(a*b+b)", "inputs": {{"a": [{a}, 4], "b": [5, {b}]}}}}'


def _mixed_lines(n: int) -> list[bytes]:
    """``n`` request lines of every kind: programs repeated (the lane answers them) and
    once, options, bindings, failures of every sort, blank lines, a line over 300 bytes, a
    line that is not UTF-8, CRLF; the first begins with a byte-order mark."""
    kinds = [
        TUTORIAL,
        '{{"id": "w{i}", "expr": "sum(tanh(W @ x))", '
        '"inputs": {{"W": [[{a}, -2], [0.5, {b}]], "x": [0.25, -1]}}}}',
        '{{"id": {i}, "expr": "a*b + b", "inputs": {{"a": [{a}, 4], "b": [5, 6]}}}}',
        '{{"id": {i}, "expr": "h = a*2; sum(h*a)", "inputs": {{"a": [{a}, {b}]}}}}',
        '{{"id": {i}, "expr": "sum(a*b)", "inputs": {{"a": [{a}, 1], "b": [2, 3]}}, '
        '"wrt": ["a"], "clip_norm": 1}}',
        '{{"id": {i}, "expr": "sum(a @ b)", "inputs": {{"a": [1, 2], "b": [1, 2, 3]}}}}',
        '{{"id": {i}, "expr": "sum(inv(M))", "inputs": {{"M": [[1, 2], [2, 4]]}}}}',
        '{{"id": {i}, "expr": "sum(a)", "inputs": {{"a": [1]}}, "typo": 1}}',
        '{{"id": {i}, "expr": ',
        "",
        "   \t",
        '{{"id": {i}, "expr": "sum(a*a)", "inputs": {{"a": [' + "1, " * 150 + "1]}}}}",
        '{{"id": {i}, "expr": "x ** 2", "inputs": {{"x": {a}}}}}\r',
    ]
    lines = []
    for i in range(n):
        text = kinds[i % len(kinds)].format(i=i, a=i % 7 - 3, b=0.5 * (i % 5))
        lines.append(text.encode() + b"\n")
    lines[0] = "\ufeff".encode() + lines[0]
    lines[n // 2] = b'{"id": "\xff\xfe"}\n'
    lines[-1] = lines[-1].rstrip(b"\n")  # the last line has no newline
    return lines


def _answer(data: bytes, jobs: int, **kw: Any) -> tuple[str, int]:
    """The output of ``run_batch`` on ``data`` with ``jobs`` processes, and its failures."""
    out: list[str] = []
    failed = run_batch(io.BytesIO(data), out.append, jobs=jobs, **kw)
    return "\n".join(out), failed


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "BLOCK_LINES", 4)


@pytest.mark.parametrize("jobs", [2, 3])
def test_the_output_is_one_processs_byte_for_byte(jobs: int, small_blocks: None) -> None:
    data = b"".join(_mixed_lines(90))
    one, failed_one = _answer(data, 1, max_line_bytes=300)
    many, failed_many = _answer(data, jobs, max_line_bytes=300)
    assert many == one
    assert failed_many == failed_one > 0
    responses = [json.loads(line) for line in one.splitlines()]
    numbers = {r["input_line"] for r in responses if "error" in r}
    assert {12, 46, 90} <= numbers  # lines over 300 bytes, a line not UTF-8
    assert sum("error" not in r for r in responses) > 40


def test_accumulate_sums_in_line_order_to_the_last_bit(small_blocks: None) -> None:
    # sums of these values depend on the order they are added in: the blocks' partial sums
    # added together would not give the sum one process makes
    rng = np.random.default_rng(5)
    values = rng.standard_normal((60, 2)) * 10.0 ** rng.integers(-3, 4, size=(60, 2))
    sequential = values[0].copy()
    for v in values[1:]:
        sequential = sequential + v
    by_blocks = sum(values[k : k + 4].sum(axis=0) for k in range(0, 60, 4))
    assert not np.array_equal(sequential, by_blocks)  # the test can tell the two apart
    lines = [
        json.dumps({"id": i, "expr": "sum(a*b)", "inputs": {"a": list(v), "b": [1.0, 1.0]}})
        for i, v in enumerate(values)
    ]
    data = ("\n".join(lines) + "\n").encode()
    one, _ = _answer(data, 1, accumulate=True)
    many, _ = _answer(data, 2, accumulate=True)
    assert many == one
    summary = json.loads(one.splitlines()[-1])
    assert summary["accumulated"]["b"] == sequential.tolist()


def test_a_gradient_shape_that_differs_from_an_earlier_blocks_fails_its_line(
    small_blocks: None,
) -> None:
    lines = [json.dumps({"id": i, "expr": "sum(a)", "inputs": {"a": [1.0, 2.0]}}) for i in range(9)]
    lines[6] = json.dumps({"id": "3 wide", "expr": "sum(a * 2)", "inputs": {"a": [1, 2, 3]}})
    data = ("\n".join(lines) + "\n").encode()
    one, failed_one = _answer(data, 1, accumulate=True)
    many, failed_many = _answer(data, 2, accumulate=True)
    assert many == one
    assert failed_many == failed_one == 1
    error = json.loads(one.splitlines()[6])
    assert (error["id"], error["error"]["kind"], error["input_line"]) == ("3 wide", "shape", 7)
    assert json.loads(one.splitlines()[-1])["requests"] == 8


def test_the_order_is_kept_when_later_blocks_are_answered_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(parallel, "BLOCK_LINES", 2)
    slow = "sum(tanh(outer(linspace(0, 1, 3000), linspace(0, 1, 3000))) * a)"
    lines = [json.dumps({"id": 0, "expr": slow, "inputs": {"a": [1.0]}})]
    lines += [TUTORIAL.format(i=i, a=i % 5, b=i % 3) for i in range(1, 40)]
    received: list[int] = []  # the first id of each block, in the order its answer came
    receive = parallel._Worker.receive

    def recorded(self: Any) -> Any:
        answer = receive(self)
        received.append(json.loads(answer[0].split("\n", 1)[0])["id"])
        return answer

    monkeypatch.setattr(parallel._Worker, "receive", recorded)
    data = ("\n".join(lines) + "\n").encode()
    many, _ = _answer(data, 2)
    assert received[0] != 0, "the slow first block was answered first: nothing was shown"
    monkeypatch.undo()
    assert many == _answer(data, 1)[0]


# --------------------------------------------------------------------------------------
# The command line: bytes, exit codes, and the processes when the command ends early
# --------------------------------------------------------------------------------------


def _env(marker: str | None = None) -> dict[str, str]:
    """gradcli's environment, with ``marker`` in it: every process the command starts
    inherits it, so that those still alive can be found (:func:`_alive`)."""
    env = harness.gradcli_env()
    if marker is not None:
        env["GRADCLI_TEST_MARKER"] = marker
    return env


def _alive(marker: str) -> list[int]:
    """The processes whose environment holds ``marker`` (Linux)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _none_left(marker: str, within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while _alive(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(marker), "processes of the command outlived it"


linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def test_the_command_gives_the_same_bytes_and_exit_code(tmp_path: Path) -> None:
    path = tmp_path / "requests.ndjson"
    path.write_bytes(b"".join(_mixed_lines(700)))  # three blocks of 256 lines
    for extra in ([], ["--accumulate"]):
        args = ["batch", str(path), "--max-line-bytes", "300", *extra]
        one = subprocess.run(
            [sys.executable, "-m", "gradcli", *args], capture_output=True, env=_env(), cwd=REPO
        )
        two = subprocess.run(
            [sys.executable, "-m", "gradcli", *args, "--jobs", "2"],
            capture_output=True,
            env=_env(),
            cwd=REPO,
        )
        assert (two.returncode, two.stdout, two.stderr) == (one.returncode, one.stdout, b"")
        assert one.returncode == 1
        assert len(one.stdout.splitlines()) > 500


@linux_only
@pytest.mark.parametrize("progress", [False, True], ids=["plain", "progress bar"])
def test_the_commands_workers_are_forked_once_numpy_is_loaded(
    tmp_path: Path, progress: bool
) -> None:
    """The command loads NumPy once and forks its workers from itself loaded: with
    Python's import-time report on, every process that loads NumPy says so on the stderr
    they share,
    and only the command does. Drawing a progress bar (a thread), the command forks them
    first, and each loads NumPy itself, as before (no fork from a process with threads)."""
    path = tmp_path / "requests.ndjson"
    path.write_text("\n".join(TUTORIAL.format(i=i, a=i, b=1) for i in range(2000)) + "\n")
    env = _env()
    env.pop("OPENBLAS_NUM_THREADS", None)  # a caller's setting is kept: more threads, no fork
    env["PYTHONPROFILEIMPORTTIME"] = "1"  # -X importtime, in every process
    if progress:  # a terminal's stderr, a file's stdout: the bar is drawn
        code, stderr = on_terminal(
            ("batch", "--jobs", "2", str(path)), tmp_path / "out.ndjson", env=env
        )
    else:
        done = subprocess.run(
            [sys.executable, "-m", "gradcli", "batch", "--jobs", "2", str(path)],
            capture_output=True, text=True, env=env, cwd=REPO, timeout=120,
        )  # fmt: skip
        code, stderr = done.returncode, done.stderr
    assert code == 0, stderr[-2000:]
    loads = [line for line in stderr.splitlines() if re.search(r"\|\s*numpy\s*$", line)]
    assert len(loads) == (3 if progress else 1), loads


@pytest.mark.parametrize("value", ["0", "-2"])
def test_jobs_below_one_is_a_usage_error(value: str) -> None:
    harness.run("batch", "--jobs", value, stdin="").assert_usage_error("--jobs")


@linux_only
@needs_bash
def test_a_reader_that_goes_away_ends_the_command_and_its_workers() -> None:
    marker = uuid.uuid4().hex
    request = TUTORIAL.format(i=1, a=3, b=6)
    # an endless stream: only the reader's going away can end the command
    done = subprocess.run(
        [
            "bash",
            "-c",
            f"yes '{request}' | {sys.executable} -m gradcli batch --jobs 2 | head -n 1; "
            'echo "status ${PIPESTATUS[1]}" >&2',
        ],
        capture_output=True,
        text=True,
        env=_env(marker),
        cwd=REPO,
        timeout=60,
    )
    assert json.loads(done.stdout)["id"] == 1
    assert done.stderr == "status 0\n"  # as `cat` does: quietly, and a success
    _none_left(marker)


@needs_bash
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_stdout_is_one_line_and_exit_1() -> None:
    data = "\n".join(TUTORIAL.format(i=i, a=i, b=1) for i in range(600)) + "\n"
    done = subprocess.run(
        ["bash", "-c", f"{sys.executable} -m gradcli batch --jobs 2 > /dev/full"],
        input=data,
        capture_output=True,
        text=True,
        env=_env(),
        cwd=REPO,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (
        1,
        "gradcli: cannot write the output: No space left on device\n",
    )


def _feed(proc: subprocess.Popen[bytes], line: bytes, stop: threading.Event) -> None:
    assert proc.stdin is not None
    try:
        while not stop.is_set():
            proc.stdin.write(line * 100)
    except (BrokenPipeError, ValueError, OSError):
        pass


def _endless(marker: str) -> tuple[subprocess.Popen[bytes], threading.Event]:
    """``batch --jobs 2`` on an endless stream, in a process group of its own."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gradcli", "batch", "--jobs", "2"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(marker),
        cwd=REPO,
        start_new_session=True,
    )
    stop = threading.Event()
    line = (TUTORIAL.format(i=7, a=1, b=2) + "\n").encode()
    threading.Thread(target=_feed, args=(proc, line, stop), daemon=True).start()
    assert proc.stdout is not None
    assert json.loads(proc.stdout.readline())["id"] == 7  # the workers are answering
    return proc, stop


def _finish(proc: subprocess.Popen[bytes], stop: threading.Event) -> tuple[int, str]:
    """Read what the command writes until it and every process it started are gone (a
    minute at most: then they are killed); its exit code and stderr."""
    assert proc.stdout is not None and proc.stderr is not None
    watchdog = threading.Timer(60, os.killpg, (proc.pid, signal.SIGKILL))
    watchdog.start()
    try:
        proc.stdout.read()  # not communicate(): the feeder may hold stdin, blocked
        err = proc.stderr.read()
        code = proc.wait()
    finally:
        watchdog.cancel()
        stop.set()
    return code, err.decode()


@linux_only
def test_ctrl_c_ends_the_command_and_its_workers() -> None:
    marker = uuid.uuid4().hex
    proc, stop = _endless(marker)
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal does: to every process of the group
    code, err = _finish(proc, stop)
    assert (code, err) == (130, "interrupted\n")
    _none_left(marker)


@linux_only
def test_ctrl_c_while_the_workers_start_ends_all_without_a_traceback(tmp_path: Path) -> None:
    # the command forks its workers as it hands out its first blocks, once it has loaded
    # gradcli: Ctrl-C comes as they start, before the first answer is written
    marker = uuid.uuid4().hex
    path = tmp_path / "requests.ndjson"
    path.write_text("\n".join(TUTORIAL.format(i=i, a=i, b=1) for i in range(5000)) + "\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gradcli", "batch", "--jobs", "2", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(marker),
        cwd=REPO,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while len(_workers(proc.pid, marker)) < 2:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.002)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert (proc.returncode, err.decode()) == (130, "interrupted\n")
    # the workers may have answered a block or two by then: whole lines, in order
    ids = [json.loads(line)["id"] for line in out.splitlines()]
    assert out.endswith(b"\n") or not out
    assert ids == list(range(len(ids)))
    _none_left(marker)


@linux_only
def test_ctrl_c_while_a_programs_fork_server_starts(tmp_path: Path) -> None:
    # a program that calls run_batch has threads of its own (NumPy's): the workers come from
    # a fork server, which must not be ended by Ctrl-C with a traceback while it loads
    marker = uuid.uuid4().hex
    path = tmp_path / "requests.ndjson"
    path.write_text("\n".join(TUTORIAL.format(i=i, a=i, b=1) for i in range(5000)) + "\n")
    program = (
        "import sys\n"
        "from gradcli.batch import run_batch\n"
        "try:\n"
        "    run_batch(open(sys.argv[1], 'rb'), lambda text: None, jobs=2)\n"
        "except KeyboardInterrupt:\n"
        "    sys.exit(130)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", program, str(path)],
        stderr=subprocess.PIPE,
        env=_env(marker),
        cwd=REPO,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while not any(_loading(p) for p in _alive(marker)):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.002)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert (proc.returncode, err.decode()) == (130, "")
    _none_left(marker)


def _loading(pid: int) -> bool:
    """Whether ``pid`` is the fork server loading gradcli: Python's Ctrl-C handler is in
    place (a Ctrl-C would raise KeyboardInterrupt), the server's own (ignore it) not yet."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    masks = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    return b"forkserver" in command and int(masks.get("SigCgt", "0"), 16) & 2 != 0


def _workers(command: int, marker: str) -> list[int]:
    """The worker processes of the command ``command`` (forked from it, so its children,
    with its command line)."""
    found = []
    for pid in _alive(marker):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            line = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if pid != command and parent == command and b"multiprocessing" not in line:
            found.append(pid)
    return found


@linux_only
def test_a_worker_that_dies_is_an_error_not_a_hang() -> None:
    marker = uuid.uuid4().hex
    proc, stop = _endless(marker)
    workers = _workers(proc.pid, marker)
    assert len(workers) == 2
    os.kill(workers[0], signal.SIGKILL)
    code, err = _finish(proc, stop)
    assert code == 1
    assert "a worker process ended unexpectedly (exit status -9)" in err
    assert "Traceback" not in err
    _none_left(marker)


def test_a_coprocess_gets_each_answer_before_it_sends_the_next() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gradcli", "batch", "--jobs", "2"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
        cwd=REPO,
    )
    assert proc.stdin is not None and proc.stdout is not None
    timer = threading.Timer(60, proc.kill)  # a hang fails the test instead of stopping it
    timer.start()
    try:
        for i in range(5):
            proc.stdin.write((TUTORIAL.format(i=i, a=i, b=1) + "\n").encode())
            proc.stdin.flush()
            assert json.loads(proc.stdout.readline())["id"] == i
        proc.stdin.close()
        assert proc.wait() == 0
    finally:
        timer.cancel()


def test_debug_answers_in_this_process_and_stops_at_the_first_failure() -> None:
    good = TUTORIAL.format(i=1, a=3, b=6)
    run = harness.run("batch", "--jobs", "2", "--debug", stdin=f"{good}\n{{bad\n{good}\n")
    assert run.code == 1
    assert len(run.stdout.splitlines()) == 1
    assert "Traceback" in run.stderr
