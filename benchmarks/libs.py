"""Which libraries can be compared, and how to name them."""

from __future__ import annotations

import importlib
from functools import cache

GRADCLI = "gradcli"
NUMPY = "numpy"
TORCH = "torch"
AUTOGRAD = "autograd"
# second rows of one library on one workload (W12: the Jacobian in reverse mode, beside
# forward mode in the library's own row)
GRADCLI_REV = "gradcli-reverse"
TORCH_REV = "torch-reverse"

IN_PROCESS_LIBS = (GRADCLI, NUMPY, TORCH, AUTOGRAD)
#: the in-process rows, the second rows included (the memory rows are IN_PROCESS_LIBS')
IN_PROCESS_ROWS = (GRADCLI, GRADCLI_REV, NUMPY, TORCH, TORCH_REV, AUTOGRAD)

DISPLAY = {
    GRADCLI: "gradcli",
    NUMPY: "NumPy by hand",
    TORCH: "PyTorch",
    AUTOGRAD: "HIPS autograd",
    GRADCLI_REV: "gradcli, reverse mode",
    TORCH_REV: "PyTorch, reverse mode",
}

# What ``import LIB`` means for the memory baseline and for the availability check.
IMPORTS = {
    GRADCLI: ("numpy", "gradcli", "gradcli.autograd"),
    NUMPY: ("numpy",),
    TORCH: ("numpy", "torch"),
    AUTOGRAD: ("numpy", "autograd", "autograd.numpy"),
    GRADCLI_REV: ("numpy", "gradcli", "gradcli.autograd"),
    TORCH_REV: ("numpy", "torch"),
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
