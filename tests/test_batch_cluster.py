"""``batch --scheduler ADDRESS FILE...`` (docs/commands.md, "batch"): the files cut into
partitions that a Dask cluster's workers read and answer themselves, and the output is one
process's on the files read one after another, byte for byte — the responses, the error
responses with their line numbers in the whole input, the exit code, the ``--accumulate``
summary to the last bit. And several files without ``--scheduler``: one stream.

The clusters are real: ``distributed`` LocalClusters of worker processes on loopback. One
is shared by the module (its address given as ADDRESS); one test starts its own, through
``--scheduler local:2``. The in-process tests cut partitions of a few dozen bytes, so that
short files span many partitions and lines cross their boundaries.
"""

from __future__ import annotations

import io
import json
import os
import random
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import harness
import numpy as np
import pytest
from harness import REPO

from gradcli import cluster
from gradcli.batch import open_files, read_lines, run_batch
from gradcli.errors import GradcliError, InputError

distributed = pytest.importorskip("distributed")

TUTORIAL = '{{"id": {i}, "expr": "sum(a*b+b)", "inputs": {{"a": [{a}, 4], "b": [5, {b}]}}}}'


def _local_cluster(workers: int) -> Any:
    """A cluster of ``workers`` worker processes, one thread each, on loopback."""
    with warnings.catch_warnings():  # its web server's port taken: it takes another
        warnings.filterwarnings("ignore", "Port .* is already in use")
        return distributed.LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
        )


@pytest.fixture(scope="module")
def address() -> Iterator[str]:
    """The address of a cluster of two worker processes."""
    with _local_cluster(2) as local:
        yield local.scheduler_address


def _requests(n: int, seed: int) -> list[bytes]:
    """``n`` request lines of every kind: programs repeated (the lane answers them) and
    once, options, bindings, shapes that differ, failures of every sort (bad JSON, a bad
    request, an evaluation error), blank lines, CRLF, lines over 300 bytes, a line that is
    not UTF-8."""
    kinds = [
        TUTORIAL,
        '{{"id": "w{i}", "expr": "sum(tanh(W @ x))", '
        '"inputs": {{"W": [[{a}, -2], [0.5, {b}]], "x": [0.25, -1]}}}}',
        '{{"id": {i}, "expr": "a*b + b", "inputs": {{"a": [{a}, 4, 1], "b": [5, 6, {b}]}}}}',
        '{{"id": {i}, "expr": "h = a*2; sum(h*a)", "inputs": {{"a": [{a}, {b}]}}}}',
        '{{"id": {i}, "expr": "sum(a*b)", "inputs": {{"a": [{a}, 1], "b": [2, 3]}}, '
        '"wrt": ["a"], "clip_norm": 1}}',
        '{{"id": {i}, "expr": "sum(a @ b)", "inputs": {{"a": [1, 2], "b": [1, 2, 3]}}}}',
        '{{"id": {i}, "expr": "sum(inv(M))", "inputs": {{"M": [[1, 2], [2, 4]]}}}}',
        '{{"id": {i}, "expr": "sum(a)", "inputs": {{"a": [1]}}, "typo": 1}}',
        '{{"id": {i}, "expr": "sum(", "inputs": {{}}}}',
        '{{"id": {i}, "expr": ',
        "",
        "   \t",
        '{{"id": {i}, "expr": "sum(a*a)", "inputs": {{"a": [' + "1, " * 150 + "1]}}}}",
        '{{"id": {i}, "expr": "x ** 2", "inputs": {{"x": {a}}}}}\r',
    ]
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        text = rng.choice(kinds).format(i=i, a=rng.randint(-3, 3), b=0.5 * rng.randint(0, 4))
        lines.append(text.encode() + b"\n")
    lines[n // 2] = b'{"id": "\xff\xfe"}\n'
    return lines


def _write_files(tmp_path: Path) -> tuple[list[str], bytes]:
    """Request files, and what one stream of them is: the first begins with a byte-order
    mark and has no newline at its end (its last line still ends there), the second is
    empty, the third holds a line of 2,000 bytes (many partitions long), the fourth only
    blank lines."""
    first = "\ufeff".encode() + b"".join(_requests(40, seed=1)).rstrip(b"\n")
    third = b"".join(_requests(50, seed=2))
    long_line = b'{"id": "long", "expr": "sum(a)", "inputs": {"a": [' + b"1," * 1000 + b"1]}}\n"
    at = third.index(b"\n", 1000) + 1
    third = third[:at] + long_line + third[at:]
    contents = [first, b"", third, b"\n\n"]
    paths = []
    for k, data in enumerate(contents):
        path = tmp_path / f"requests{k}.ndjson"
        path.write_bytes(data)
        paths.append(str(path))
    return paths, first + b"\n" + third + b"\n\n"


def _one_process(data: bytes, **kw: Any) -> tuple[str, int]:
    out: list[str] = []
    failed = run_batch(io.BytesIO(data), out.append, **kw)
    return "\n".join(out), failed


def _on_cluster(address: str, paths: list[str], **kw: Any) -> tuple[str, int]:
    out: list[str] = []
    failed = cluster.run_on_cluster(address, paths, out.append, **kw)
    return "\n".join(out), failed


# --------------------------------------------------------------------------------------
# Partitions
# --------------------------------------------------------------------------------------


def test_partitions_count_the_lines_that_start_in_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cluster, "PIECE_BYTES", 3)  # counting reads several pieces
    rng = random.Random(7)
    for case in range(150):
        contents = [
            bytes(rng.choice(b"ab\n\r\xff") for _ in range(rng.choice([0, 1, 5, 40, 200])))
            for _ in range(rng.randint(1, 3))
        ]
        files = []
        for k, data in enumerate(contents):
            path = tmp_path / f"{case}-{k}"
            path.write_bytes(data)
            files.append((str(path), len(data)))
        size, longest = rng.randint(1, 50), rng.choice([3, 10**6])
        by_partitions: list[bytes | None] = []
        for part in cluster.partitions(files, size):
            data = Path(part.path).read_bytes()
            # a line starts at 0 and after each newline but one at the very end
            starts = [0] + [i + 1 for i, b in enumerate(data[:-1]) if b == ord("\n")]
            inside = [s for s in starts if part.start <= s < part.end]
            count, first = cluster.count_lines(part.path, part.start, part.end)
            assert (count, first) == (len(inside), inside[0] if inside else part.end)
            with open(part.path, "rb") as f:  # as a worker reads them
                f.seek(first)
                lines = islice(read_lines(f, longest), count)
                by_partitions += [raw for _, raw, _ in lines]
        # the lines of the partitions, in order, are those of one stream of the files
        stream, _ = open_files([path for path, _ in files])
        whole = [raw for _, raw, _ in read_lines(stream, longest)]
        assert [_without_newline(raw) for raw in by_partitions] == [
            _without_newline(raw) for raw in whole
        ]


def _without_newline(raw: bytes | None) -> bytes | None:
    """A line as read, without its newline: one stream of files gives a newline to the
    last line of a file that has none."""
    return raw[:-1] if raw is not None and raw.endswith(b"\n") else raw


# --------------------------------------------------------------------------------------
# The output: one process's, byte for byte
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("partition_bytes", [64, 301])
def test_the_output_is_one_processs_byte_for_byte(
    address: str, tmp_path: Path, partition_bytes: int
) -> None:
    paths, stream = _write_files(tmp_path)
    one, failed_one = _one_process(stream, max_line_bytes=300)
    many, failed_many = _on_cluster(
        address, paths, max_line_bytes=300, partition_bytes=partition_bytes
    )
    assert many == one
    assert failed_many == failed_one > 0
    responses = [json.loads(line) for line in one.splitlines()]
    errors = {r["input_line"]: r["error"] for r in responses if "error" in r}
    assert errors[21] == {"kind": "input", "message": "line 21 is not UTF-8 text (byte 9)"}
    long_line = stream[: stream.index(b'"id": "long"')].count(b"\n") + 1
    assert errors[long_line]["message"] == (
        f"line {long_line} is longer than 300 bytes (raise it with --max-line-bytes)"
    )
    assert {"parse", "input", "shape", "domain", "limit"} <= {e["kind"] for e in errors.values()}
    assert sum("error" not in r for r in responses) > 20
    # and the files read as one stream without --scheduler give it too
    out: list[str] = []
    assert run_batch(open_files(paths)[0], out.append, max_line_bytes=300) == failed_one
    assert "\n".join(out) == one


def test_accumulate_sums_in_line_order_to_the_last_bit(address: str, tmp_path: Path) -> None:
    # sums of these values depend on the order they are added in: partial sums per
    # partition, added together, would not give the sum one process makes
    rng = np.random.default_rng(5)
    values = rng.standard_normal((80, 2)) * 10.0 ** rng.integers(-3, 4, size=(80, 2))
    lines = [
        json.dumps({"id": i, "expr": "sum(a*b)", "inputs": {"a": list(v), "b": [1.0, 1.0]}})
        for i, v in enumerate(values)
    ]
    # a gradient whose shape differs from earlier partitions' fails its line, with its id
    lines[50] = json.dumps({"id": ["3 wide"], "expr": "sum(b * 2)", "inputs": {"b": [1, 2, 3]}})
    data = ("\n".join(lines) + "\n").encode()
    at = data.index(b"\n", 2000) + 1
    (tmp_path / "a.ndjson").write_bytes(data[:at])
    (tmp_path / "b.ndjson").write_bytes(data[at:])
    paths = [str(tmp_path / "a.ndjson"), str(tmp_path / "b.ndjson")]
    one, failed_one = _one_process(data, accumulate=True)
    many, failed_many = _on_cluster(address, paths, accumulate=True, partition_bytes=200)
    assert many == one
    assert failed_many == failed_one == 1
    error = json.loads(one.splitlines()[50])
    assert (error["id"], error["error"]["kind"], error["input_line"]) == (["3 wide"], "shape", 51)
    summary = json.loads(one.splitlines()[-1])
    assert (summary["requests"], summary["failed"]) == (79, 1)
    added = np.delete(values, 50, axis=0)
    sequential = added[0].copy()
    for v in added[1:]:
        sequential = sequential + v
    by_threes = sum(added[k : k + 3].sum(axis=0) for k in range(0, 79, 3))
    assert not np.array_equal(sequential, by_threes)  # the test can tell the two apart
    assert summary["accumulated"]["b"] == sequential.tolist()


def test_a_worker_that_cannot_read_its_file_is_one_line(address: str, tmp_path: Path) -> None:
    first, second = tmp_path / "first.ndjson", tmp_path / "second.ndjson"
    first.write_text("".join(TUTORIAL.format(i=i, a=i, b=1) + "\n" for i in range(40)))
    second.write_text(TUTORIAL.format(i=99, a=1, b=1) + "\n")
    written: list[str] = []

    def write(text: str) -> None:
        # the files were found and cut into partitions; the second is gone before any
        # worker reads it (a window of 8 partitions of the first's 40 is out)
        second.unlink(missing_ok=True)
        written.append(text)

    with pytest.raises(InputError) as caught:
        cluster.run_on_cluster(address, [str(first), str(second)], write, partition_bytes=80)
    message = caught.value.message
    assert message == (
        f'a worker cannot read "{second}": No such file or directory (with --scheduler the '
        "workers read the files themselves: they must be at the same path for them)"
    )
    # every line of the first file was answered and written, in partitions, before
    assert sum(text.count("\n") + 1 for text in written) == 40


def test_workers_without_gradcli_are_one_line_before_any_task(tmp_path: Path) -> None:
    path = tmp_path / "r.ndjson"
    path.write_text(TUTORIAL.format(i=1, a=1, b=1) + "\n")
    with _local_cluster(1) as local, distributed.Client(local) as client:
        # as if it were not installed there: a task of gradcli.cluster would break the
        # worker's connection, and distributed would wait for ever
        client.run(exec, "import sys; sys.modules['gradcli.cluster'] = None", {})
        with pytest.raises(GradcliError) as caught:
            cluster.run_on_cluster(local.scheduler_address, [str(path)], print)
        assert client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) == 0
    message = caught.value.message
    assert message.startswith("batch --scheduler: a worker cannot import gradcli.cluster (")
    assert message.endswith("and need gradcli, this version, installed")
    assert "\n" not in message


# --------------------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------------------


def _gradcli(*args: str, **kw: Any) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "gradcli", *args],
        capture_output=True,
        env=harness.gradcli_env(),
        cwd=REPO,
        timeout=120,
        **kw,
    )


def test_a_local_cluster_gives_the_same_bytes_and_exit_code(tmp_path: Path) -> None:
    paths, stream = _write_files(tmp_path)
    one = _gradcli("batch", "--max-line-bytes", "300", "--accumulate", input=stream)
    cluster_run = _gradcli(
        "batch", "--scheduler", "local:2", "--max-line-bytes", "300", "--accumulate", *paths
    )
    assert (cluster_run.returncode, cluster_run.stdout, cluster_run.stderr) == (
        1,
        one.stdout,
        b"",
    )
    assert one.returncode == 1 and len(one.stdout.splitlines()) > 60


def test_several_files_are_one_stream_with_and_without_jobs(tmp_path: Path) -> None:
    paths, _ = _write_files(tmp_path)
    given = b"\n" + TUTORIAL.format(i=-1, a=1, b=2).encode()  # stdin: with no newline at its end
    stream = Path(paths[0]).read_bytes() + b"\n" + given + b"\n"
    stream += b"".join(Path(p).read_bytes() for p in paths[1:])
    one, failed = _one_process(stream, max_line_bytes=300)
    assert failed > 0
    for extra in ([], ["--jobs", "2"]):
        # stdin may be one of the files
        args = [paths[0], "-", *paths[1:], "--max-line-bytes", "300", *extra]
        run = _gradcli("batch", *args, input=given)
        assert (run.returncode, run.stdout, run.stderr) == (1, one.encode() + b"\n", b"")
    harness.run("batch", "-", "-", stdin="").assert_usage_error("standard input is read once")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--scheduler", "local:2", "-"], ["cannot read stdin", "--jobs N"]),
        (["--scheduler", "local:2", "--jobs", "2", "x.ndjson"], ["--jobs and --scheduler"]),
        (["--scheduler", "threads", "examples/requests.ndjson"], ["tcp://host:8786"]),
    ],
)
def test_usage_errors(args: list[str], words: list[str]) -> None:
    run = harness.run("batch", *args, stdin="")
    run.assert_usage_error(*words)
    assert len(run.stderr.splitlines()) == 1


def test_debug_answers_in_this_process() -> None:
    # the scheduler is not asked (nothing listens at port 1): the lines are answered here,
    # the first failure stopping them with its traceback
    run = harness.run(
        "batch", "--scheduler", "tcp://127.0.0.1:1", "--debug", "examples/requests.ndjson"
    )
    assert run.code == 1 and "Traceback" in run.stderr
    assert json.loads(run.stdout.splitlines()[0])["id"] == "tutorial"


def test_without_distributed_the_message_names_the_extra(tmp_path: Path) -> None:
    path = tmp_path / "r.ndjson"
    path.write_text(TUTORIAL.format(i=1, a=1, b=1) + "\n")
    program = (
        "import sys\n"
        "sys.modules['distributed'] = None\n"  # an import of it fails, as when not installed
        "from gradcli.cli import main\n"
        "main(['batch', '--scheduler', 'local:2', sys.argv[1]])\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", program, str(path)],
        capture_output=True,
        text=True,
        env=harness.gradcli_env(),
        cwd=REPO,
        timeout=60,
    )
    assert run.returncode == 2
    assert run.stderr == (
        "error (input): --scheduler needs distributed, which is not installed: "
        "pip install 'gradcli[dask]'\n"
    )


def _tasks(address: str) -> int:
    """The tasks the scheduler at ``address`` holds."""
    with distributed.Client(address, timeout="10s") as client:
        return int(client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)))


def _big_file(tmp_path: Path) -> Path:
    path = tmp_path / "big.ndjson"
    path.write_text("".join(TUTORIAL.format(i=i, a=i % 7, b=1) + "\n" for i in range(40_000)))
    return path


def test_ctrl_c_cancels_the_tasks_without_a_traceback(address: str, tmp_path: Path) -> None:
    path = _big_file(tmp_path)  # 3 MiB: partitions are still out after the first
    proc = subprocess.Popen(
        [sys.executable, "-m", "gradcli", "batch", "--scheduler", address, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=harness.gradcli_env(),
        cwd=REPO,
        start_new_session=True,
    )
    assert proc.stdout is not None
    assert json.loads(proc.stdout.readline())["id"] == 0
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert (proc.returncode, err.decode()) == (130, "interrupted\n")
    deadline = time.monotonic() + 10
    while _tasks(address) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _tasks(address) == 0  # its tasks were cancelled, its client closed


def test_a_reader_that_goes_away_ends_the_command(address: str, tmp_path: Path) -> None:
    path = _big_file(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gradcli", "batch", "--scheduler", address, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=harness.gradcli_env(),
        cwd=REPO,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert json.loads(proc.stdout.readline())["id"] == 0
    proc.stdout.close()  # as `| head -n 1` does
    err = proc.stderr.read()
    assert (proc.wait(timeout=60), err) == (0, b"")  # as `cat` does: quietly, and a success
