"""gradcli's benchmark suite: ``python -m benchmarks`` (see ``benchmarks/README.md``).

Measures gradcli side by side with NumPy written by hand (always), PyTorch and HIPS autograd
(when importable), on the workloads W1-W7 of issue 6 and W3c, W8, W9 of issue 14, and prints
one table of medians, spreads, ratios and a PASS/MISS verdict per target.

Importing this package imports nothing but the standard library: the suite may first have
to adjust OpenBLAS's environment, which must happen before NumPy is loaded.
"""

from __future__ import annotations

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the suite as ``python -m benchmarks ARGS`` does; returns the exit code."""
    from .suite import main as _main

    return _main(argv)
