"""Which libraries can be compared, and how to name them."""

from __future__ import annotations

import importlib
from functools import cache

GRADCLI = "gradcli"
NUMPY = "numpy"
TORCH = "torch"
AUTOGRAD = "autograd"

IN_PROCESS_LIBS = (GRADCLI, NUMPY, TORCH, AUTOGRAD)

DISPLAY = {
    GRADCLI: "gradcli",
    NUMPY: "NumPy by hand",
    TORCH: "PyTorch",
    AUTOGRAD: "HIPS autograd",
}

# What ``import LIB`` means for the memory baseline and for the availability check.
IMPORTS = {
    GRADCLI: ("numpy", "gradcli", "gradcli.autograd"),
    NUMPY: ("numpy",),
    TORCH: ("numpy", "torch"),
    AUTOGRAD: ("numpy", "autograd", "autograd.numpy"),
}


@cache
def missing(lib: str) -> str | None:
    """None when ``lib`` imports in this interpreter, else why not (for the skip note)."""
    try:
        for name in IMPORTS[lib]:
            importlib.import_module(name)
    except ImportError as exc:
        return f"{lib} not importable here ({exc.name or exc})"
    return None
