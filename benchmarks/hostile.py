#!/usr/bin/env python3
"""How long do issue 7's heaviest hostile inputs take, whole process included? Measure it.

Issue 7 asks that every hostile input be answered within 2 s, with a one-line cause and the
right exit code. ``tests/test_hostile.py`` checks the answers (and the bound, only with
``GRADCLI_TIMED=1``); this script measures the inputs that do real work, several launches
each, and prints the median and the slowest launch beside the bound. The rest of the list
(a syntax error, a bad file ...) costs a process start, which W5 of the suite measures.

Issue 12's work limits are here too: ``check``, ``jacobian`` and ``hessian`` whose number of
passes of the program grows with the square of the sizes must be refused before any of it
is done (``--max-passes``, ``tests/test_work_limits.py``), and ``optimize`` keeps a bounded,
thinned loss history however many steps it makes (``--max-history``).

Run from the repository root:

    python benchmarks/hostile.py              # 5 launches of each
    python benchmarks/hostile.py --launches 15
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BOUND = 2.0  # seconds, from issue 7


def cases(d: Path) -> list[tuple[str, list[str], bytes | None, int]]:
    """(what, gradcli arguments, stdin, expected exit code)."""
    (d / "sum.gc").write_text("+".join(["x"] * 100_000), "utf-8")
    (d / "deep.json").write_text("[" * 100_000 + "1" + "]" * 100_000, "utf-8")
    batch = b"[" + b"1," * 50_000_000 + b"1]\n" + b'{"expr": "x*2", "inputs": {"x": 3}}\n'
    (d / "zero.csv").symlink_to("/dev/zero")
    return [
        ("9**9**9", ["eval", "9**9**9"], None, 0),
        ("(((9**64)**64)**64)**64", ["eval", "(((9**64)**64)**64)**64"], None, 0),
        ("10,000 nested parentheses", ["eval", "(" * 10_000 + "x" + ")" * 10_000, "x=2"], None, 0),
        ("100,000 nested unary minus", ["eval", "-" * 100_000 + "x", "x=2"], None, 0),
        ("sum of 100,000 terms", ["eval", "-f", str(d / "sum.gc"), "x=2"], None, 0),
        ("10,000-digit literal", ["eval", "x * 0." + "3" * 10_000, "x=3"], None, 0),
        ("zeros(10**12)", ["eval", "sum(zeros(10**12))"], None, 1),
        ("(10**5,1) + (1,10**5)", ["eval", "sum(zeros(10**5, 1) + zeros(1, 10**5))"], None, 1),
        ("JSON nested 100,000 deep", ["eval", "x", f"x=@{d / 'deep.json'}"], None, 2),
        ("100 MB batch line, then one more", ["batch"], batch, 1),
        ("100 MB on stdin of eval -", ["eval", "-"], b" " * 100_000_000, 1),
        # issue 12: quadratic work, refused before it starts (--max-passes)
        ("check of 10**5 elements (2n runs)", ["check", "sum(x**2)", "x=ones(10**5)"], None, 1),
        ("check --order 2 of 10**4 elements",
         ["check", "sum(x**3)", "x=ones(10**4)", "--order", "2"], None, 1),
        ("jacobian of a 10**5-element output", ["jacobian", "x*ones(10**5)", "x=1"], None, 1),
        ("hessian past --max-passes",
         ["hessian", "sum(x**3)", "x=ones(2000)", "--max-passes", "1000"], None, 1),
        # issue 12: files of values are bounded (32 bytes a number of --max-elements)
        ("x=@file linked to /dev/zero", ["eval", "x", f"x=@{d / 'zero.csv'}"], None, 1),
        ("--inputs /dev/zero", ["eval", "x", "--inputs", "/dev/zero"], None, 1),
        # issue 12: a long run keeps a bounded, thinned loss history (--max-history)
        ("optimize 10,000 steps, 100 losses kept",
         ["optimize", "x**2", "x=1", "--steps", "10000", "--max-history", "100"], None, 0),
    ]  # fmt: skip


def launch(args: list[str], stdin: bytes | None) -> tuple[float, int, str]:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "gradcli", *args, *(["--json"] if args[0] != "batch" else [])],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    seconds = time.perf_counter() - start
    first = next((ln for ln in proc.stderr.decode(errors="replace").splitlines() if ln), "")
    return seconds, proc.returncode, first


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=5, help="launches of each input")
    opts = parser.parse_args()
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"hostile inputs, whole process, {opts.launches} launches each")
    for column in ("input", "exit", "median", "slowest", f"≤ {BOUND:g} s", "stderr, first line"):
        table.add_column(column, justify="right" if column in ("median", "slowest") else "left")
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for what, args, stdin, code in cases(Path(tmp)):
            runs = [launch(args, stdin) for _ in range(opts.launches)]
            times = [t for t, _, _ in runs]
            codes = {c for _, c, _ in runs}
            ok = codes == {code} and max(times) < BOUND
            failures += not ok
            table.add_row(
                what,
                ",".join(map(str, sorted(codes))) + ("" if codes == {code} else f" (want {code})"),
                f"{statistics.median(times):.2f} s",
                f"{max(times):.2f} s",
                "PASS" if ok else "MISS",
                runs[0][2][:70],
            )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    Console(width=150).print(table)
    print(f"load average {load:.2f}, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
