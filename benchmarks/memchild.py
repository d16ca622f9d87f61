"""Peak memory of one workload in a fresh process: ``python -m benchmarks.memchild LIB WID N``.

Imports LIB (and NumPy), reads the process's peak resident set size (the baseline), makes
the inputs (N elements each), runs the workload once, reads the peak again, and prints
``{"baseline_kib": ..., "peak_kib": ...}`` as one JSON line.

The peak is ``VmHWM`` of ``/proc/self/status``: the high-water mark of this process's own
memory since its ``exec``. ``getrusage().ru_maxrss`` would be the same number for a process
started from a small parent, but Linux carries the parent's peak over ``fork`` + ``exec``
into the child's ``ru_maxrss`` — after the suite's in-process workloads (GBs) every child
would report the parent's peak. ``ru_maxrss`` is the fallback where ``/proc`` is missing.
"""

from __future__ import annotations

import importlib
import json
import resource
import sys


def peak_kib() -> int:
    """This process's peak resident set size in KiB."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def main(argv: list[str]) -> int:
    lib, wid, n = argv[0], argv[1], int(argv[2])
    from .libs import IMPORTS

    for name in IMPORTS[lib]:
        importlib.import_module(name)
    from . import workloads

    baseline = peak_kib()
    fn = workloads.build(lib, wid, workloads.Sizes(w3_n=n))
    result = fn()
    peak = peak_kib()
    del result
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"baseline_kib": baseline, "peak_kib": peak, "ru_maxrss_kib": maxrss}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
