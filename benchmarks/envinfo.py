"""What the numbers were measured on: interpreter, CPU, threads, BLAS and library versions.

OpenBLAS: on some processors this workplace sets ``OPENBLAS_CORETYPE`` (and
``OPENBLAS_L2_SIZE``) because old OpenBLAS builds misbehave there; they slow a current NumPy.
The suite unsets both together for its own run (and so for the processes it starts) before
NumPy is loaded, unless ``--keep-openblas-env`` is given, and reports the kernel OpenBLAS
then picks (threadpoolctl, or OpenBLAS's own ``get_corename`` when threadpoolctl is absent).
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from typing import Any

OPENBLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
THP_VAR = "THP_MEM_ALLOC_ENABLE"  # torch: back large tensors with transparent huge pages


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return "unknown"


def wait_idle(max_seconds: float, threshold: float, report: Any) -> str:
    """Wait (at most ``max_seconds``) until the 1-minute load average is below
    ``threshold``; returns what happened, for the header."""
    import time

    if max_seconds <= 0 or not hasattr(os, "getloadavg"):
        return "not waited"
    start = time.monotonic()
    while True:
        load = os.getloadavg()[0]
        waited = time.monotonic() - start
        if load < threshold:
            return f"load {load:.2f} < {threshold:g} after {waited:.0f} s"
        if waited >= max_seconds:
            return f"gave up after {waited:.0f} s at load {load:.2f} (threshold {threshold:g})"
        report(f"waiting for an idle machine: load average {load:.2f} >= {threshold:g}")
        time.sleep(min(15.0, max(1.0, max_seconds - waited)))


def adjust_openblas_env(keep: bool) -> str:
    """Unset both OpenBLAS variables (before NumPy is loaded); returns what was done."""
    present = {k: os.environ[k] for k in OPENBLAS_VARS if k in os.environ}
    if not present:
        return "OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE not set"
    shown = ", ".join(f"{k}={v}" for k, v in present.items())
    if keep:
        return f"kept {shown} (--keep-openblas-env)"
    if "numpy" in sys.modules:
        return f"kept {shown}: NumPy was already loaded when the suite started"
    for k in OPENBLAS_VARS:
        os.environ.pop(k, None)
    return f"unset for this run and its child processes (were {shown})"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _blas_build() -> str:
    import numpy as np

    try:
        cfg: Any = np.show_config(mode="dicts")  # NumPy >= 1.25
        blas = cfg["Build Dependencies"]["blas"]
        return f"{blas.get('name')} {blas.get('version')}"
    except Exception:
        return "unknown"


def _threadpools() -> list[dict[str, Any]]:
    """Loaded thread pools (BLAS, OpenMP) with their thread counts and kernels."""
    try:
        import threadpoolctl
    except ImportError:
        return _openblas_by_ctypes()
    keys = ("user_api", "internal_api", "prefix", "version", "num_threads", "architecture")
    return [{k: info.get(k) for k in keys} for info in threadpoolctl.threadpool_info()]


def _openblas_by_ctypes() -> list[dict[str, Any]]:
    """Without threadpoolctl: ask the loaded OpenBLAS itself for its kernel and threads."""
    import ctypes

    try:
        with open("/proc/self/maps") as f:
            paths = sorted({ln.split()[-1] for ln in f if "openblas" in ln and "/" in ln})
    except OSError:
        return []
    pools = []
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        info: dict[str, Any] = {"user_api": "blas", "internal_api": "openblas", "path": path}
        for prefix in ("openblas_", "scipy_openblas_"):
            for suffix in ("", "64_"):
                core = getattr(lib, f"{prefix}get_corename{suffix}", None)
                nthreads = getattr(lib, f"{prefix}get_num_threads{suffix}", None)
                if core is not None and nthreads is not None:
                    core.restype = ctypes.c_char_p
                    info["architecture"] = core().decode()
                    info["num_threads"] = int(nthreads())
        info["source"] = "OpenBLAS get_corename (threadpoolctl not installed)"
        pools.append(info)
    return pools


def collect(
    openblas_note: str, torch_python: str | None, launcher_note: str, mode: str, idle_note: str
) -> dict[str, Any]:
    import numpy as np

    import gradcli

    info: dict[str, Any] = {
        "mode": mode,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "executable": sys.executable,
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "load_average": _loadavg(),
        "waited_for_idle": idle_note,
        "numpy": np.__version__,
        "blas_build": _blas_build(),
        "openblas_env": openblas_note,
        "gradcli": f"{gradcli.__version__} ({os.path.dirname(gradcli.__file__)})",
        "gradcli_launch": launcher_note,
    }
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_threads"] = (
            f"intra-op {torch.get_num_threads()}, inter-op {torch.get_num_interop_threads()}"
        )
    except ImportError:
        info["torch"] = "not importable in this interpreter"
    info["torch_python"] = torch_python or "none (whole-process torch rows skipped)"
    if torch_python and torch_python != sys.executable:
        info["torch_python_version"] = _query_torch_version(torch_python)
    try:
        from importlib.metadata import version

        import autograd  # noqa: F401

        info["autograd"] = version("autograd")
    except ImportError:
        info["autograd"] = "not importable in this interpreter"
    info["threadpools"] = _threadpools()
    info["env_threads"] = {
        k: os.environ[k]
        for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", THP_VAR)
        if k in os.environ
    }
    info["transparent_hugepages"] = _read("/sys/kernel/mm/transparent_hugepage/enabled")
    return info


def _loadavg() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "unknown"
    return f"{one:.2f} {five:.2f} {fifteen:.2f} (1, 5, 15 min; other work skews timings)"


def _query_torch_version(python: str) -> str:
    try:
        out = subprocess.run(
            [python, "-c", "import sys, torch; print(torch.__version__, sys.version.split()[0])"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        torch_v, py_v = out.stdout.split()
        return f"torch {torch_v} on Python {py_v}"
    except (OSError, subprocess.SubprocessError, ValueError):
        return "unknown"


def describe_pools(pools: list[dict[str, Any]]) -> str:
    parts = []
    for p in pools:
        what = p.get("internal_api") or p.get("user_api")
        text = f"{what} {p.get('version') or ''}".strip()
        if p.get("prefix") and p["prefix"] != what:
            text += f" [{p['prefix']}]"
        if p.get("architecture"):
            text += f" kernel {p['architecture']}"
        text += f", {p.get('num_threads')} threads"
        parts.append(text)
    return "; ".join(parts) or "no BLAS or OpenMP pool found"
