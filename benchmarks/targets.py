"""The workloads and the targets of issues 6, 14, 15 and 17, as data."""

from __future__ import annotations

from dataclasses import dataclass

# Every workload, in the order of the table. W7x (the Hessian with respect to x alone) is
# an extra report-only row beside W7 (with respect to W and x, what `gradcli hessian` does).
# W3c (the W3a program through gradcli.compile), W8 (optimize) and W9 (check) are issue 14's;
# W10 (a program over files larger than NumPy should hold, gradients to disk) and W11
# (`batch --jobs 2` against one process) are issue 15's; W12 (a tall Jacobian in forward
# and reverse mode, report only) is issue 17's.
ALL_IDS = (
    "W1", "W2", "W3a", "W3b", "W3c", "W4", "W5", "W5b", "W6", "W7", "W7x", "W8", "W9", "W10",
    "W10z", "W11", "W12",
)  # fmt: skip
IN_PROCESS_IDS = ("W1", "W2", "W3a", "W3b", "W3c", "W4", "W7", "W7x", "W8", "W9", "W12")
MEMORY_IDS = ("W3a", "W3b")

TIME = "time"
MEM_NET = "mem net"
MEM_RAW = "mem raw"
MEM_BASE = "mem base"


@dataclass(frozen=True)
class Target:
    """gradcli's median ÷ the reference's median must be at most ``limit``."""

    wid: str
    metric: str
    ref: str  # the library key of the reference row
    limit: float

    @property
    def key(self) -> str:
        return f"{self.wid} {self.metric} vs {self.ref}"


TARGETS = (
    Target("W1", TIME, "torch", 0.3),
    Target("W2", TIME, "torch", 0.4),
    Target("W2", TIME, "numpy", 2.0),
    Target("W3a", TIME, "numpy", 1.1),
    Target("W3a", TIME, "torch", 0.8),
    Target("W3a", MEM_NET, "torch", 1.0),
    Target("W3b", TIME, "torch", 0.7),
    Target("W3b", MEM_NET, "torch", 0.85),
    Target("W3c", TIME, "numpy", 0.6),
    Target("W4", TIME, "torch", 1.1),
    Target("W5", TIME, "imports", 1.1),
    Target("W5", TIME, "torch", 0.15),
    Target("W5b", TIME, "typer", 1.2),
    Target("W6", TIME, "torch", 0.4),
    Target("W8", TIME, "torch", 0.5),
    Target("W9", TIME, "torch", 0.5),
    # W10 (.npy inputs) and W10z (Zarr inputs): within 1.5x NumPy by hand in memory, and
    # peaking at 1 GB at most ("bound": a row holding the bound, 1024 MiB)
    Target("W10", TIME, "numpy", 1.5),
    Target("W10", MEM_RAW, "bound", 1.0),
    Target("W10z", TIME, "numpy", 1.5),
    Target("W10z", MEM_RAW, "bound", 1.0),
    # 1.7x the throughput of one process: the time of --jobs 2 at most 1/1.7 of --jobs 1's
    Target("W11", TIME, "jobs1", 1 / 1.7),
)


def targets_for(wid: str, metric: str, ref: str) -> list[Target]:
    return [t for t in TARGETS if (t.wid, t.metric, t.ref) == (wid, metric, ref)]
