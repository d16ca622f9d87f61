"""The suite's command line and the order of the run (``python -m benchmarks --help``).

Nothing here imports NumPy at module level: :func:`main` first settles OpenBLAS's
environment (see :mod:`benchmarks.envinfo`), then loads the rest.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .envinfo import THP_VAR, adjust_openblas_env, wait_idle
from .targets import ALL_IDS, IN_PROCESS_IDS, MEM_BASE, MEM_NET, MEM_RAW, MEMORY_IDS, TARGETS, TIME
from .timing import TimerConfig, format_value, measure_interleaved

PROCESS_DESCRIPTIONS = {
    "W5": 'whole process: gradcli eval "a*b+b" a=[3,4] b=[5,6]',
    "W5b": "whole process: gradcli --help",
    "W6": "batch: sum(a*b+b) on 3-element inputs, per request: (T(2N) - T(N)) / N, N = {n}",
    "W10": "sum(tanh(a)*exp(-b**2)), a and b of {w10_n:.0e} float64 from .npy files, "
    "gradients to grads.zarr: the whole eval --backend dask command; NumPy and torch on the "
    "arrays in memory",
    "W10z": "the same, a and b from Zarr stores (compressed, Zarr's default codec)",
    "W11": "batch --jobs 2 against one process: the tutorial's sum(a*b+b), a and b of 2 "
    "elements varying, {jobs_n} requests, the whole run (start-up included)",
}


@dataclass(frozen=True)
class Plan:
    timer: TimerConfig
    quick: bool
    launches: int  # W5, W5b: timed launches of each command
    launch_warmup: int
    batch_n: int  # W6: N requests (and 2N)
    batch_rounds: int
    memory_repeats: int  # fresh children per library for peak memory
    jobs_n: int = 100_000  # W11: requests in the stream
    jobs_rounds: int = 7  # W11: whole runs of each command (interleaved)
    w10_n: int = 10**8  # W10: elements of a and b (0.8 GB each, on disk)


FULL_PLAN = Plan(TimerConfig(), False, 15, 2, 5000, 5, 3)
QUICK_PLAN = Plan(
    TimerConfig(warmup=0.01, round_time=0.01, rounds=3, budget=1.0, min_rounds=2),
    True,
    2,
    0,
    200,
    2,
    1,
    jobs_n=2000,
    jobs_rounds=2,
    w10_n=10**6,
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="gradcli side by side with NumPy by hand, PyTorch and HIPS autograd "
        "(issue 6's workloads W1-W7 and issue 14's W3c, W8, W9, and their targets), "
        "batch --jobs 2 against one process (W11), and a tall Jacobian in forward and "
        "reverse mode (W12, issue 17).",
    )
    p.add_argument("--quick", action="store_true", help="tiny sizes, few repetitions (smoke)")
    p.add_argument(
        "--only", metavar="IDS", help=f"comma-separated workloads, from {','.join(ALL_IDS)}"
    )
    p.add_argument("--json", metavar="FILE", help="also write every number to FILE as JSON")
    p.add_argument(
        "--torch-python",
        metavar="PATH",
        help="interpreter with torch for the whole-process and memory torch rows "
        "(default: this interpreter, when it has torch)",
    )
    p.add_argument(
        "--gradcli-launch",
        choices=("auto", "script", "module"),
        default="auto",
        help="how W5/W6/W11 start gradcli: the console script on PATH (auto: when it runs this "
        "gradcli) or python -m gradcli",
    )
    p.add_argument("--rounds", type=int, help="in-process rounds (median over them)")
    p.add_argument("--launches", type=int, help="W5/W5b: launches of each command")
    p.add_argument("--batch-requests", type=int, metavar="N", help="W6: N (and 2N) requests")
    p.add_argument("--batch-rounds", type=int, help="W6: rounds of N and 2N")
    p.add_argument(
        "--jobs-requests", type=int, metavar="N", help="W11: requests in the stream (100,000)"
    )
    p.add_argument("--jobs-rounds", type=int, help="W11: runs of each command (7)")
    p.add_argument("--memory-repeats", type=int, help="W3 memory: fresh processes per library")
    p.add_argument(
        "--keep-openblas-env",
        action="store_true",
        help="do not unset OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE for the run",
    )
    p.add_argument(
        "--torch-thp",
        action="store_true",
        help="set THP_MEM_ALLOC_ENABLE=1, so torch backs large tensors with transparent huge "
        "pages as NumPy does (default: torch as installed)",
    )
    p.add_argument(
        "--wait-idle",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="first wait up to SECONDS for the 1-minute load average to drop below --idle-load",
    )
    p.add_argument("--idle-load", type=float, default=0.5, help="see --wait-idle (default 0.5)")
    p.add_argument(
        "--no-pyc-cache",
        action="store_true",
        help="child processes use the environment's bytecode settings as they are (default: "
        "a bytecode cache in a temporary PYTHONPYCACHEPREFIX, as an installed package has)",
    )
    p.add_argument("--list", action="store_true", help="list the workloads and targets, and exit")
    return p.parse_args(argv)


def _selected(only: str | None) -> list[str]:
    if not only:
        return list(ALL_IDS)
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    lower = {w.lower(): w for w in ALL_IDS}
    unknown = [w for w in wanted if w.lower() not in lower]
    if unknown:
        raise SystemExit(f"--only: unknown workload {', '.join(unknown)} (known: {ALL_IDS})")
    chosen = {lower[w.lower()] for w in wanted}
    return [w for w in ALL_IDS if w in chosen]


def _plan(args: argparse.Namespace) -> Plan:
    plan = QUICK_PLAN if args.quick else FULL_PLAN
    if args.rounds:
        plan = replace(plan, timer=replace(plan.timer, rounds=args.rounds))
    for opt, name in (
        ("launches", "launches"),
        ("batch_requests", "batch_n"),
        ("batch_rounds", "batch_rounds"),
        ("jobs_requests", "jobs_n"),
        ("jobs_rounds", "jobs_rounds"),
        ("memory_repeats", "memory_repeats"),
    ):
        if getattr(args, opt):
            plan = replace(plan, **{name: getattr(args, opt)})
    return plan


def _progress(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    openblas_note = adjust_openblas_env(args.keep_openblas_env)
    if args.torch_thp:
        os.environ[THP_VAR] = "1"  # before torch is imported, here or in a child
    if args.list:
        for wid in ALL_IDS:
            goals = [f"≤ {t.limit:g}× {t.ref} ({t.metric})" for t in TARGETS if t.wid == wid]
            print(f"{wid:4} {'; '.join(goals) or 'report only'}")
        return 0
    return _run(args, openblas_note)


def _run(args: argparse.Namespace, openblas_note: str) -> int:
    ids = _selected(args.only)
    pyc_prefix = None if args.no_pyc_cache else tempfile.mkdtemp(prefix="gradcli-bench-pyc-")
    try:
        return _run_in(args, openblas_note, ids, pyc_prefix)
    finally:
        if pyc_prefix is not None:
            shutil.rmtree(pyc_prefix, ignore_errors=True)


def _run_in(
    args: argparse.Namespace, openblas_note: str, ids: list[str], pyc_prefix: str | None
) -> int:
    from rich.console import Console

    from . import envinfo, procs, workloads
    from .libs import DISPLAY, IN_PROCESS_LIBS, IN_PROCESS_ROWS, TORCH, missing
    from .report import Results, Row, print_header, print_summary, print_table

    plan = _plan(args)
    sizes = workloads.QUICK if plan.quick else workloads.FULL
    env = procs.child_env(pyc_prefix)
    idle_note = wait_idle(args.wait_idle, args.idle_load, _progress)
    started = time.perf_counter()

    # The interpreter for whole-process and memory torch rows.
    torch_python: str | None = None
    torch_note = ""
    if args.torch_python:
        if procs.python_has(args.torch_python, "torch", env):
            torch_python = args.torch_python
        else:
            torch_note = f"--torch-python {args.torch_python} cannot import torch"
    elif missing(TORCH) is None:
        torch_python = sys.executable
    else:
        torch_note = "torch not importable here and no --torch-python given"

    launcher = None
    launch_note = "not used in this run"
    if any(w in ids for w in ("W5", "W5b", "W6", "W10", "W10z", "W11")):
        launcher = procs.find_gradcli(args.gradcli_launch, env)
        launch_note = launcher.how
        if not launch_note.startswith("console"):
            launch_note = f"{launcher.python} -m gradcli — {launch_note}"

    mode = "quick" if plan.quick else "full"
    info = envinfo.collect(openblas_note, torch_python, launch_note, mode, idle_note)
    info["bytecode"] = (
        f"child processes cache bytecode in {pyc_prefix} (PYTHONPYCACHEPREFIX), as an "
        "installed package has it"
        if pyc_prefix
        else "child processes use the environment's bytecode settings (--no-pyc-cache); "
        f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}"
    )
    info["plan"] = {
        "timer": plan.timer.__dict__,
        "launches": plan.launches,
        "batch_requests": plan.batch_n,
        "batch_rounds": plan.batch_rounds,
        "jobs_requests": plan.jobs_n,
        "jobs_rounds": plan.jobs_rounds,
        "memory_repeats": plan.memory_repeats,
    }
    console = Console()
    if not console.is_terminal:
        console = Console(width=190)
    print_header(console, info)

    descriptions = {
        w: PROCESS_DESCRIPTIONS[w].format(
            n=plan.batch_n, jobs_n=f"{plan.jobs_n:,}", w10_n=plan.w10_n
        )
        if w in PROCESS_DESCRIPTIONS
        else workloads.describe(w, sizes)
        for w in ids
    }
    results = Results(info, descriptions)
    wrong = 0

    # In-process workloads: every library's answer is checked against NumPy by hand
    # first; then the libraries' rounds alternate (see measure_interleaved).
    for wid in (w for w in IN_PROCESS_IDS if w in ids):
        reference = workloads.build("numpy", wid, sizes)()
        fns = {}
        libs = [lib for lib in IN_PROCESS_ROWS if workloads.has(lib, wid)]
        labels = {lib: workloads.label(lib, wid, DISPLAY[lib]) for lib in libs}
        shorts = {lib: workloads.short(lib, wid) for lib in libs}
        for lib in libs:
            why = missing(lib)
            if why is not None:
                results.rows.append(Row(wid, TIME, lib, labels[lib], None, why, shorts[lib]))
                continue
            fn = workloads.build(lib, wid, sizes)
            bad = workloads.check(fn, reference)
            if bad is not None:
                wrong += 1
                note = f"{wid} {lib}: WRONG answer ({bad}), not timed"
                results.rows.append(Row(wid, TIME, lib, labels[lib], None, note, shorts[lib]))
                _progress(note)
                continue
            fns[lib] = fn
        timed = measure_interleaved(fns, plan.timer, workloads.per_call_divisor(wid, sizes))
        for lib, stats in timed.items():
            results.rows.append(Row(wid, TIME, lib, labels[lib], stats, short=shorts[lib]))
            _progress(f"{wid:4} {lib:9} {format_value(stats.median, 's')}")
        del fns, timed
        gc.collect()

    # Peak memory (W3a, W3b): fresh processes, one library at a time.
    for wid in (w for w in MEMORY_IDS if w in ids):
        for lib in IN_PROCESS_LIBS:
            python = sys.executable
            why = missing(lib) if lib != TORCH else None
            if lib == TORCH:
                python = torch_python or ""
                why = None if torch_python else torch_note
            if why is not None:
                for metric in (MEM_NET, MEM_RAW):
                    results.rows.append(Row(wid, metric, lib, DISPLAY[lib], None, why))
                continue
            raw, base, net = procs.peak_memory(
                lib, wid, sizes.w3_n, python, env, plan.memory_repeats
            )
            results.rows.append(Row(wid, MEM_NET, lib, DISPLAY[lib], net))
            results.rows.append(Row(wid, MEM_RAW, lib, DISPLAY[lib], raw))
            results.rows.append(Row(wid, MEM_BASE, lib, DISPLAY[lib], base))
            _progress(f"{wid:4} {lib:9} peak RSS net {net.median:.1f} MiB, raw {raw.median:.1f}")

    if launcher is not None:
        _whole_process(results, ids, plan, launcher, env, torch_python, torch_note)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    results.notes.append(
        f"suite ran for {time.perf_counter() - started:.0f} s; load average at the end {load:.2f}"
    )
    if wrong:
        results.notes.append(f"{wrong} library answer(s) were WRONG and not timed")
    print_table(console, results)
    print_summary(console, results)
    if args.json:
        results.write_json(args.json)
        console.print(f"raw numbers written to {args.json}", highlight=False)
    return 1 if wrong else 0


def _whole_process(
    results: Any,
    ids: list[str],
    plan: Plan,
    launcher: Any,
    env: dict[str, str],
    torch_python: str | None,
    torch_note: str,
) -> None:
    from . import procs
    from .report import Row

    gradcli_argv = list(launcher.argv)
    py = launcher.python
    shown = "gradcli" if len(gradcli_argv) == 1 else "python -m gradcli"

    short = {
        "imports": "import typer, rich, lark, numpy",
        "tables": "those and rich's console and table",
        "typer": "import typer",
    }

    def add(wid: str, stats: dict[str, Any], labels: dict[str, str], want: list[str]) -> None:
        short["torch"] = "the torch one-liner" if wid == "W5" else "the torch loop"
        short["numpy"] = "the NumPy loop"
        for key in want:
            if key in stats:
                row = Row(wid, TIME, key, labels[key], stats[key], short=short.get(key, ""))
                results.rows.append(row)
                _progress(f"{wid:4} {key:9} {format_value(stats[key].median, 's')}")
            else:
                row = Row(wid, TIME, key, labels[key], None, torch_note, short.get(key, ""))
                results.rows.append(row)

    if "W5" in ids:
        labels = {
            "gradcli": f'{shown} eval "a*b+b" a=[3,4] b=[5,6]',
            "imports": 'python -c "import typer, rich, lark, numpy"',
            "tables": f'python -c "{procs.TABLE_ONE_LINER}" (no target: the floor of a '
            "command that draws a rich table)",
            "torch": "torch one-liner: import torch; a*b+b; backward; print grads",
        }
        cmds = {
            "gradcli": [*gradcli_argv, "eval", "a*b+b", "a=[3,4]", "b=[5,6]"],
            "imports": [py, "-c", procs.IMPORTS_ONE_LINER],
            "tables": [py, "-c", procs.TABLE_ONE_LINER],
        }
        if torch_python:
            cmds["torch"] = [torch_python, "-c", procs.TORCH_ONE_LINER]
        stats = procs.time_launches(cmds, env, plan.launches, plan.launch_warmup)
        add("W5", stats, labels, ["gradcli", "imports", "tables", "torch"])
    if "W5b" in ids:
        labels = {"gradcli": f"{shown} --help", "typer": 'python -c "import typer"'}
        cmds = {"gradcli": [*gradcli_argv, "--help"], "typer": [py, "-c", procs.TYPER_ONE_LINER]}
        stats = procs.time_launches(cmds, env, plan.launches, plan.launch_warmup)
        add("W5b", stats, labels, ["gradcli", "typer"])
    if "W6" in ids:
        labels = {
            "gradcli": f"{shown} batch (NDJSON in, JSON out)",
            "numpy": "Python loop: json → NumPy by hand → json",
            "torch": "Python loop: json → torch backward → json",
        }
        cmds = {
            "gradcli": [*gradcli_argv, "batch"],
            "numpy": [sys.executable, "-c", procs.NUMPY_LOOP],
        }
        if torch_python:
            cmds["torch"] = [torch_python, "-c", procs.TORCH_LOOP]
        stats = procs.batch_marginal(cmds, env, plan.batch_n, plan.batch_rounds)
        add("W6", stats, labels, ["gradcli", "numpy", "torch"])
    if "W10" in ids or "W10z" in ids:
        _out_of_core(results, ids, plan, torch_python, torch_note)
    if "W11" in ids:
        labels = {
            "gradcli": f"{shown} batch --jobs 2 (two worker processes)",
            "jobs1": f"{shown} batch --jobs 1 (one process)",
            "halves": "two --jobs 1 processes at once, half of the stream each (no target: "
            "what the machine gives two processes)",
        }
        short["jobs1"] = "one process"
        one = [*gradcli_argv, "batch", "--jobs", "1"]
        cmds = {"gradcli": ([*gradcli_argv, "batch", "--jobs", "2"], 1), "jobs1": (one, 1)}
        cmds["halves"] = (one, 2)
        stats = procs.batch_whole_runs(cmds, env, plan.jobs_n, plan.jobs_rounds)
        add("W11", stats, labels, ["gradcli", "jobs1", "halves"])


def _out_of_core(
    results: Any, ids: list[str], plan: Plan, torch_python: str | None, torch_note: str
) -> None:
    """W10 and W10z: each row a fresh process (benchmarks/outofcore.py), one measurement
    each (gradcli's the faster of two runs, its peak the larger), and a row holding issue
    15's memory bound."""
    from . import outofcore
    from .report import Row
    from .timing import Stats

    folder = Path(tempfile.gettempdir()) / "gradcli-bench"
    _progress(f"W10  making or reusing the data in {folder} ({plan.w10_n:.0e} elements)")
    rows = outofcore.measure(plan.w10_n, folder, rounds=3, torch_python=torch_python)
    for wid, kind in (("W10", "npy"), ("W10z", "zarr")):
        if wid not in ids:
            continue
        labels = {
            "gradcli": f"gradcli eval --backend dask, a and b from .{kind}, --save grads.zarr",
            "numpy": "NumPy by hand, arrays in memory",
            "torch": "torch autograd, arrays in memory (one round)",
            "floor": "import dask.array and zarr, write the gradients' bytes as chunk files"
            + (" or, if longer, read and decompress a and b" if kind == "zarr" else "")
            + " (no target: the floor of any command doing this)",
        }
        measured = {"gradcli": rows[f"gradcli {kind}"], "numpy": rows["numpy"],
                    "floor": rows[f"floor {kind}"], "torch": rows.get("torch")}  # fmt: skip
        for lib, row in measured.items():
            if row is None:
                for metric in (TIME, MEM_RAW):
                    results.rows.append(Row(wid, metric, lib, labels[lib], None, torch_note))
                continue
            results.rows.append(Row(wid, TIME, lib, labels[lib], Stats((row["seconds"],), "s")))
            peak = Stats((row["peak_kib"] / 1024,), "MiB")
            results.rows.append(Row(wid, MEM_RAW, lib, labels[lib], peak))
            _progress(f"{wid:4} {lib:9} {row['seconds']:.2f} s, peak {peak.median:.0f} MiB")
        bound = Stats((outofcore.PEAK_LIMIT_GB * 1024,), "MiB")
        results.rows.append(Row(wid, MEM_RAW, "bound", "issue 15's bound: 1 GB", bound))
