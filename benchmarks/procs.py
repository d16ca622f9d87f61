"""Whole-process measurements: launches (W5, W5b), batch streams (W6, W11), peak memory (W3)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .timing import Stats

BENCH_ROOT = Path(__file__).resolve().parent.parent

TORCH_ONE_LINER = (
    "import torch; a = torch.tensor([3., 4.], dtype=torch.float64, requires_grad=True); "
    "b = torch.tensor([5., 6.], dtype=torch.float64, requires_grad=True); "
    "(a * b + b).sum().backward(); print(a.grad, b.grad)"
)
IMPORTS_ONE_LINER = "import typer, rich, lark, numpy"
#: W5's floor (no target): what any command drawing a rich table imports besides those
TABLE_ONE_LINER = "import typer, rich, lark, numpy, rich.console, rich.table"
TYPER_ONE_LINER = "import typer"

# W6: the loops a user would write instead of `gradcli batch`: JSON in, grads, JSON out.
TORCH_LOOP = """\
import json, sys
import torch
f64 = torch.float64
for line in sys.stdin:
    req = json.loads(line)
    inputs = req["inputs"]
    a = torch.tensor(inputs["a"], dtype=f64, requires_grad=True)
    b = torch.tensor(inputs["b"], dtype=f64, requires_grad=True)
    value = torch.sum(a * b + b)
    value.backward()
    grads = {"a": a.grad.tolist(), "b": b.grad.tolist()}
    sys.stdout.write(json.dumps({"id": req.get("id"), "output": value.item(), "grads": grads}))
    sys.stdout.write("\\n")
    sys.stdout.flush()
"""

NUMPY_LOOP = """\
import json, sys
import numpy as np
for line in sys.stdin:
    req = json.loads(line)
    inputs = req["inputs"]
    a = np.array(inputs["a"], dtype=np.float64)
    b = np.array(inputs["b"], dtype=np.float64)
    value = float(np.sum(a * b + b))
    grads = {"a": b.tolist(), "b": (a + 1.0).tolist()}
    sys.stdout.write(json.dumps({"id": req.get("id"), "output": value, "grads": grads}))
    sys.stdout.write("\\n")
    sys.stdout.flush()
"""


def child_env(pyc_prefix: str | None) -> dict[str, str]:
    """This environment, with gradcli's and the suite's folders first on PYTHONPATH.

    With ``pyc_prefix``, child processes cache compiled bytecode there (and may write it,
    even where PYTHONDONTWRITEBYTECODE is set), so a gradcli run from a source checkout
    starts as an installed one does, whose bytecode was compiled at install time, instead
    of compiling every module on every launch. Nothing is written into the source tree.
    """
    import gradcli

    roots = [str(Path(gradcli.__file__).resolve().parent.parent), str(BENCH_ROOT)]
    old = os.environ.get("PYTHONPATH", "")
    parts = list(dict.fromkeys([*roots, *(p for p in old.split(os.pathsep) if p)]))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(parts)}
    if pyc_prefix is not None:
        env["PYTHONPYCACHEPREFIX"] = pyc_prefix
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


@dataclass(frozen=True)
class Launcher:
    """How the gradcli command is started: ``argv`` prefix, its interpreter, and a note."""

    argv: tuple[str, ...]
    python: str
    how: str


def find_gradcli(mode: str, env: dict[str, str]) -> Launcher:
    """The ``gradcli`` console script when it is on PATH and runs this gradcli, else
    ``python -m gradcli`` with this interpreter (``mode``: auto, script or module)."""
    module = Launcher((sys.executable, "-m", "gradcli"), sys.executable, "")
    if mode == "module":
        return Launcher(module.argv, module.python, "python -m gradcli (--gradcli-launch module)")
    script = shutil.which("gradcli", path=env.get("PATH"))
    why = "no gradcli console script on PATH"
    if script is not None:
        python = _shebang_python(script)
        if python is None:
            why = f"{script} is not a Python console script"
        elif not _same_gradcli(python, env):
            why = f"{script} runs another copy of gradcli than the one benchmarked"
        else:
            return Launcher((script,), python, f"console script {script}")
    if mode == "script":
        raise SystemExit(f"--gradcli-launch script: {why}")
    return Launcher(module.argv, module.python, f"python -m gradcli ({why})")


def _shebang_python(script: str) -> str | None:
    try:
        with open(script, "rb") as f:
            first = f.readline().decode("utf-8", "replace").strip()
    except OSError:
        return None
    if not first.startswith("#!") or "python" not in first:
        return None
    parts = first[2:].split()
    return parts[-1] if parts[0].endswith("/env") else parts[0]


def _same_gradcli(python: str, env: dict[str, str]) -> bool:
    import gradcli

    try:
        out = subprocess.run(
            [python, "-c", "import gradcli; print(gradcli.__file__)"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return False
    return Path(out).resolve() == Path(gradcli.__file__).resolve()


def _run_checked(argv: list[str], env: dict[str, str], stdin_path: str | None = None) -> str:
    stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL  # noqa: SIM115
    try:
        done = subprocess.run(argv, stdin=stdin, capture_output=True, env=env, timeout=600)
    finally:
        if stdin_path:
            stdin.close()  # type: ignore[union-attr]
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)[:200]} exited with {done.returncode}: "
            f"{done.stderr.decode(errors='replace')[-800:]}"
        )
    return done.stdout.decode("utf-8", "replace")


def _timed_run(argv: list[str], env: dict[str, str], stdin_path: str | None = None) -> float:
    stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL  # noqa: SIM115
    try:
        t0 = time.perf_counter()
        rc = subprocess.call(
            argv, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
        )
        elapsed = time.perf_counter() - t0
    finally:
        if stdin_path:
            stdin.close()  # type: ignore[union-attr]
    if rc != 0:
        raise RuntimeError(f"{' '.join(argv)[:200]} exited with {rc}")
    return elapsed


def time_launches(
    commands: dict[str, list[str]], env: dict[str, str], launches: int, warmup: int = 2
) -> dict[str, Stats]:
    """Wall time of whole processes, launched in turn (interleaved, so drift hits all)."""
    for argv in commands.values():
        _run_checked(argv, env)
    for _ in range(warmup):
        for argv in commands.values():
            _timed_run(argv, env)
    samples: dict[str, list[float]] = {k: [] for k in commands}
    for _ in range(launches):
        for key, argv in commands.items():
            samples[key].append(_timed_run(argv, env))
    return {k: Stats(tuple(v)) for k, v in samples.items()}


def batch_requests(n: int, offset: int = 0) -> str:
    lines = []
    for i in range(offset, offset + n):
        a = [round(0.5 + ((i * 7 + j) % 13) / 4, 3) for j in range(3)]
        b = [round(-1.0 + ((i * 5 + j) % 11) / 3, 3) for j in range(3)]
        lines.append(json.dumps({"id": i, "expr": "sum(a*b+b)", "inputs": {"a": a, "b": b}}))
    return "\n".join(lines) + "\n"


def batch_marginal(
    commands: dict[str, list[str]], env: dict[str, str], n: int, rounds: int
) -> dict[str, Stats]:
    """Per-request cost of each stream processor: (time of 2N requests - time of N) / N."""
    with tempfile.TemporaryDirectory(prefix="gradcli-bench-") as tmp:
        small, large = os.path.join(tmp, "n.ndjson"), os.path.join(tmp, "2n.ndjson")
        Path(small).write_text(batch_requests(n))
        Path(large).write_text(batch_requests(2 * n))
        for key, argv in commands.items():
            out = _run_checked(argv, env, small).splitlines()
            if len(out) != n or "error" in json.loads(out[0]):
                raise RuntimeError(f"W6 {key}: expected {n} answers, got {out[:1]}")
        for argv in commands.values():
            _timed_run(argv, env, small)  # warm the file cache
        samples: dict[str, list[float]] = {k: [] for k in commands}
        for _ in range(rounds):
            for key, argv in commands.items():
                t_small = _timed_run(argv, env, small)
                t_large = _timed_run(argv, env, large)
                samples[key].append((t_large - t_small) / n)
    return {k: Stats(tuple(v)) for k, v in samples.items()}


def tutorial_requests(n: int) -> str:
    """W11: the tutorial's request, ``sum(a*b+b)`` on a = [3,4], b = [5,6], with values that
    vary from line to line (and an id per line)."""
    lines = []
    for i in range(n):
        a = [3 + i % 7, 4 + (i * 3) % 5]
        b = [5 + (i % 11) / 2, 6 - i % 13]
        lines.append(json.dumps({"id": i, "expr": "sum(a*b+b)", "inputs": {"a": a, "b": b}}))
    return "\n".join(lines) + "\n"


def batch_whole_runs(
    commands: dict[str, tuple[list[str], int]], env: dict[str, str], n: int, rounds: int
) -> dict[str, Stats]:
    """Wall time of whole runs over the same ``n`` requests, start-up included, the commands
    in turn (interleaved). A command given ``k`` > 1 is ``k`` processes at once, each on its
    ``1/k`` of the stream: what the machine gives that many processes that share nothing.
    The output of every command (the ``k`` outputs one after the other) must be the first
    one's, byte for byte, with ``n`` answers and no error."""
    with tempfile.TemporaryDirectory(prefix="gradcli-bench-") as tmp:
        lines = tutorial_requests(n).splitlines(keepends=True)
        files: dict[int, list[str]] = {}
        for _, parts in commands.values():
            size = -(-n // parts)
            files[parts] = []
            for k in range(parts):
                path = os.path.join(tmp, f"requests-{parts}-{k}.ndjson")
                Path(path).write_text("".join(lines[k * size : (k + 1) * size]))
                files[parts].append(path)
        outputs = {
            key: "".join(_run_checked(argv, env, path) for path in files[parts])
            for key, (argv, parts) in commands.items()
        }
        first = next(iter(outputs.values()))
        answers = first.splitlines()
        if len(answers) != n or any('"error"' in line for line in answers):
            raise RuntimeError(f"W11: expected {n} answers without errors, got {answers[:1]}")
        for key, out in outputs.items():
            if out != first:
                raise RuntimeError(f"W11 {key}: its output differs from {next(iter(outputs))}")
        samples: dict[str, list[float]] = {k: [] for k in commands}
        for _ in range(rounds):
            for key, (argv, parts) in commands.items():
                samples[key].append(_timed_together(argv, env, files[parts]))
    return {k: Stats(tuple(v)) for k, v in samples.items()}


def _timed_together(argv: list[str], env: dict[str, str], stdin_paths: list[str]) -> float:
    """Wall time of one process of ``argv`` per stdin file, all started at once."""
    inputs = [open(path, "rb") for path in stdin_paths]  # noqa: SIM115
    try:
        t0 = time.perf_counter()
        procs = [
            subprocess.Popen(
                argv, stdin=f, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
            )
            for f in inputs
        ]
        codes = [p.wait() for p in procs]
        elapsed = time.perf_counter() - t0
    finally:
        for f in inputs:
            f.close()
    if any(codes):
        raise RuntimeError(f"{' '.join(argv)[:200]} exited with {codes}")
    return elapsed


def peak_memory(
    lib: str, wid: str, n: int, python: str, env: dict[str, str], repeats: int
) -> tuple[Stats, Stats, Stats]:
    """(raw peak, baseline after import, net = raw - baseline) in MiB over fresh children."""
    raw, base, net = [], [], []
    for _ in range(repeats):
        out = _run_checked([python, "-m", "benchmarks.memchild", lib, wid, str(n)], env)
        d = json.loads(out.strip().splitlines()[-1])
        raw.append(d["peak_kib"] / 1024)
        base.append(d["baseline_kib"] / 1024)
        net.append((d["peak_kib"] - d["baseline_kib"]) / 1024)
    return Stats(tuple(raw), "MiB"), Stats(tuple(base), "MiB"), Stats(tuple(net), "MiB")


def python_has(python: str, module: str, env: dict[str, str]) -> bool:
    try:
        return (
            subprocess.run(
                [python, "-c", f"import {module}"], capture_output=True, env=env, timeout=120
            ).returncode
            == 0
        )
    except (OSError, subprocess.SubprocessError):
        return False
