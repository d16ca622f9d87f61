#!/usr/bin/env python3
"""Does ``gradcli batch`` stream a million lines with flat memory? Measure it.

Streams N request lines (default 1,000,000) from a generator into ``python -m gradcli batch``
through a pipe, reads and counts the responses as they come, and samples the child's memory
from ``/proc/<pid>/status`` (``VmRSS``: resident now; ``VmHWM``: the peak so far) every
second and when 10%, 50% and 100% of the responses are in. Flat memory means the RSS at
10%, 50% and 100% are close; a per-line leak shows as growth between them.

``--jobs N`` runs ``batch --jobs N``; the memory is then that of the command and every
process under it (its workers; where they come from a fork server, that server and
multiprocessing's resource tracker too), added up: pages they share are counted once per
process, so the sum is more than the memory they take together. The peak is then the
largest sum sampled.

The requests look like ``{"expr": "sum(a*b+b)", "inputs": {"a": [1,2,3], "b": [4,5,6]}}``
with numbers that vary from line to line and a handful of distinct expression texts (the
parse cache serves those). ``--unique-exprs`` gives every line its own expression text
instead, to show that the parse cache is bounded.

Linux only (``/proc``). Run from the repository root:

    python benchmarks/batch_memory.py --lines 100000
    python benchmarks/batch_memory.py                  # 1,000,000 lines: a few minutes
    python benchmarks/batch_memory.py --jobs 2
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

EXPRESSIONS = [
    "sum(a*b+b)",
    "sum(a*b) + sum(b)",
    "h = a*b; sum(h + b)",
    "sum(tanh(a) * b)",
    "mean((a - b) ** 2)",
]
CHECKPOINTS = (0.10, 0.50, 1.00)


def requests(n: int, unique: bool) -> Iterator[bytes]:
    """``n`` request lines; the numbers vary, the expression texts repeat (unless unique)."""
    for i in range(n):
        a0, a1, a2 = i % 7 + 1, (i * 3) % 11 - 5, 3 + (i % 5) * 0.5
        b0, b1, b2 = 4 + i % 3, 5 - (i % 13) * 0.25, 6 + i % 2
        expr = EXPRESSIONS[i % len(EXPRESSIONS)]
        if unique:
            expr = f"{expr} + {i}"
        yield (
            f'{{"expr": "{expr}", "inputs": {{"a": [{a0},{a1},{a2}], '
            f'"b": [{b0},{b1},{b2}]}}, "id": {i}}}\n'
        ).encode()


def tree(root: int) -> list[int]:
    """``root`` and every process under it (Linux: from each process's parent in /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def tree_memory_kib(root: int) -> tuple[int, int, int] | None:
    """``(VmRSS, VmHWM, processes)`` of ``root`` and the processes under it, each added up;
    None once ``root`` is gone."""
    if memory_kib(root) is None:
        return None
    rss = hwm = n = 0
    for pid in tree(root):
        mem = memory_kib(pid)
        if mem is not None:
            rss, hwm, n = rss + mem[0], hwm + mem[1], n + 1
    return rss, hwm, n


def memory_kib(pid: int) -> tuple[int, int] | None:
    """``(VmRSS, VmHWM)`` of ``pid`` in KiB, or None once the process is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])
    except (OSError, KeyError, ValueError):
        return None


def mib(kib: int) -> str:
    return f"{kib / 1024:.1f} MiB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000, help="request lines to send")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    parser.add_argument(
        "--unique-exprs", action="store_true", help="every line its own expression text"
    )
    parser.add_argument("--python", default=sys.executable, help="interpreter for gradcli")
    parser.add_argument("--jobs", type=int, default=1, help="batch --jobs N (default 1)")
    args = parser.parse_args()
    n = args.lines
    if n < 1:
        parser.error("--lines must be at least 1")

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    child = subprocess.Popen(
        [args.python, "-m", "gradcli", "batch", "--jobs", str(args.jobs)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=REPO,
        env=env,
    )
    assert child.stdin is not None and child.stdout is not None
    pid = child.pid
    start = time.perf_counter()
    done = threading.Event()
    samples: list[tuple[float, int, int, int, int]] = []  # (s, responses, rss, hwm, processes)
    received = 0

    def feed() -> None:
        # stdin stays open until every response is in, so the 100% sample is taken while
        # the child is still alive (it exits at end of input).
        assert child.stdin is not None
        try:
            for line in requests(n, args.unique_exprs):
                child.stdin.write(line)
            child.stdin.flush()
        except BrokenPipeError:
            pass

    def sample() -> None:
        while not done.wait(args.interval):
            mem = tree_memory_kib(pid)
            if mem is not None:
                samples.append((time.perf_counter() - start, received, *mem))

    threading.Thread(target=feed, daemon=True).start()
    threading.Thread(target=sample, daemon=True).start()

    marks = {max(1, round(n * c)): c for c in CHECKPOINTS}
    at: dict[float, tuple[int, int, int]] = {}
    errors = 0
    for line in child.stdout:
        received += 1
        if b'"error"' in line[:40]:
            errors += 1
        if received in marks:
            mem = tree_memory_kib(pid)
            if mem is not None:
                at[marks[received]] = mem
            print(
                f"  {marks[received]:4.0%}: {received:>9,} responses, "
                f"RSS {mib(mem[0]) if mem else '?'}",
                file=sys.stderr,
                flush=True,
            )
        if received == n:
            break
    elapsed = time.perf_counter() - start
    final = tree_memory_kib(pid)
    done.set()
    child.stdin.close()
    rest = child.stdout.read()  # nothing more is expected
    code = child.wait()

    jobs = f" --jobs {args.jobs}" if args.jobs != 1 else ""
    unique = " (unique expression texts)" if args.unique_exprs else ""
    print(f"gradcli batch{jobs}, {n:,} lines{unique}")
    print(f"  responses read    {received:,} ({errors:,} errors), exit status {code}")
    print(f"  wall time         {elapsed:.1f} s")
    print(f"  throughput        {received / elapsed:,.0f} lines/s")
    if final is not None and final[2] == 1:
        print(f"  peak RSS (VmHWM)  {mib(final[1])}")
    elif final is not None:
        peak = max([s[2] for s in samples] + [m[0] for m in at.values()] + [final[0]])
        print(f"  processes         {final[2]} (the command and those under it)")
        print(f"  peak RSS, summed  {mib(peak)} (the largest sum sampled)")
    for c in CHECKPOINTS:
        if c in at:
            print(f"  RSS at {c:4.0%}       {mib(at[c][0])}")
    steady = [s for s in samples if s[1] >= n * CHECKPOINTS[0]]
    if steady:
        lo, hi = min(s[2] for s in steady), max(s[2] for s in steady)
        print(
            f"  RSS after 10%     min {mib(lo)}, max {mib(hi)} "
            f"over {len(steady)} samples (every {args.interval:g} s)"
        )
    if CHECKPOINTS[0] in at and 1.0 in at:
        growth = at[1.0][0] - at[CHECKPOINTS[0]][0]
        print(f"  growth 10%->100%  {growth / 1024:+.1f} MiB")
    if rest:
        print(f"  unexpected output after the last response: {rest[:80]!r}")
    ok = received == n and errors == 0 and code == 0 and not rest
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
