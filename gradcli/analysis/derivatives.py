"""Jacobians and Hessians, and what the other analyses share with them.

Every function here starts from :func:`~gradcli.api.prepare` (parse once, check inputs) and
uses the engine's reverse mode: a Jacobian is one backward pass per output element, a Hessian
one backward pass *of the backward pass* (``create_graph=True``) per input element, the
first of these passes recorded and the others replayed with their seeds (:func:`_rows`) —
never finite differences, which only :func:`gradcli.analysis.check` uses, as the independent oracle
(docs/api.md, "gradcli.analysis"; the commands in docs/commands.md, their JSON in
docs/json.md, the pass limit in docs/cli.md, "Limits on work"). ``jacobian(mode="forward")``
makes one pass per *input* element instead, by the double-VJP of
:mod:`gradcli.autograd.functional` (docs/commands.md, "jacobian").

The pass limit (:data:`DEFAULT_MAX_PASSES`, ``--max-passes``), :func:`_jacobian_of`,
:func:`_hessian_of` and :func:`_scalar_output` are shared with :mod:`.gradcheck` and
:mod:`.optimization`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import autograd as E
from ..api import Setup, prepare
from ..autograd.functional import forward_columns
from ..autograd.replay import Rows
from ..errors import InputError, LimitError, ShapeError
from ..i18n import msg
from ..io import json_array
from ..language import DEFAULT_MAX_PROGRAM_CHARS

#: Most passes of the program (forward runs and backward passes) that ``jacobian``,
#: ``hessian`` and ``check`` may make (``--max-passes``). Their number grows with the sizes
#: of the inputs and the output (``check``: two forward runs per input element; a Jacobian:
#: one backward pass per output element) and so does the cost of each pass, so the work is
#: quadratic: 50,000 passes of the simplest program (``check "sum(x**2)"`` of 25,000
#: elements) take 5 to 10 seconds on a shared 2-CPU machine; ``check`` of 10**5 elements,
#: the default refuses, would take minutes.
DEFAULT_MAX_PASSES = 50_000
#: how ``jacobian`` may compute: one backward pass per output element (reverse), one pass per
#: input element (forward), or the fewer of the two (auto)
JACOBIAN_MODES = ("reverse", "forward", "auto")


def _check_passes(command: str, passes: int, max_passes: int) -> None:
    """Refuse, before the work starts, a command that needs more passes than the limit."""
    if passes > max_passes:
        raise LimitError(
            msg(
                "{command} would make {passes:,} forward and backward passes of the "
                "program, over the limit of {max_passes:,} (raise it with --max-passes)",
                command=command,
                passes=passes,
                max_passes=max_passes,
            )
        )


# --------------------------------------------------------------------------------------
# Jacobian
# --------------------------------------------------------------------------------------


@dataclass
class Jacobian:
    expr: str
    value: np.ndarray
    jacobian: dict[str, np.ndarray]  # name -> output.shape + input.shape
    #: floating-point warnings counted while computing (the CLI prints them on stderr)
    warnings: list[str] = field(default_factory=list)
    #: how it was computed: "reverse" or "forward" (what mode="auto" chose)
    mode: str = "reverse"

    def to_json(self) -> dict[str, Any]:
        return {
            "expr": self.expr,
            "output": {"shape": list(self.value.shape), "value": json_array(self.value)},
            "mode": self.mode,
            "jacobian": {
                name: {"shape": list(j.shape), "value": json_array(j)}
                for name, j in self.jacobian.items()
            },
        }


def _check_work(n: int, what: str) -> None:
    E.check_size((n,), what)


def _jacobian_of(
    setup: Setup,
    seed: int,
    max_passes: int,
    command: str = "jacobian",
    more: int = 0,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The forward run, then one backward pass per output element; ``more`` is the number
    of passes the caller makes besides (``check``'s finite differences)."""
    value, jac, _ = _jacobian_in(setup, seed, max_passes, "reverse", command, more)
    return value, jac


def _mode(mode: Any) -> str:
    if not isinstance(mode, str) or mode not in JACOBIAN_MODES:
        raise InputError(
            msg(
                "mode must be one of {join}, not {mode!r}",
                join=", ".join(JACOBIAN_MODES),
                mode=mode,
            )
        )
    return mode


def _jacobian_in(
    setup: Setup,
    seed: int,
    max_passes: int,
    mode: str,
    command: str = "jacobian",
    more: int = 0,
) -> tuple[np.ndarray, dict[str, np.ndarray], str]:
    """The Jacobian by ``mode`` and the mode used: the forward run, then one backward pass
    per output element (reverse), or one recorded backward pass and one pass of it per
    input element (forward: the double-VJP); auto takes forward when the ``wanted`` inputs
    have fewer elements in all than the output."""
    leaves = setup.leaves()
    out = setup.program.run(leaves, dtype=setup.dtype, seed=seed, retain=False).output
    wanted = [leaves[n] for n in setup.wanted]
    total_in = sum(t.numel() for t in wanted)
    _check_work(out.numel() * total_in, "jacobian")
    if mode == "auto":
        mode = "forward" if total_in < out.numel() else "reverse"
    if mode == "forward":
        passes = 1 + total_in if out.requires_grad else 0
    else:
        passes = out.numel() if out.requires_grad else 0
    _check_passes(command, 1 + passes + more, max_passes)
    rows: dict[str, np.ndarray] = {
        n: np.zeros((out.numel(), leaves[n].numel()), dtype=out.dtype) for n in setup.wanted
    }
    if out.requires_grad and mode == "forward":
        for i, c, (column,) in forward_columns([out], wanted):
            if column is not None:
                rows[setup.wanted[i]][:, c] = column.ravel()
    elif out.requires_grad:
        for i, grads in enumerate(_rows(out, wanted, out.numel())):
            for name, g in zip(setup.wanted, grads, strict=True):
                if g is not None:
                    rows[name][i] = g.ravel()
    jac = {n: rows[n].reshape(out.shape + leaves[n].shape) for n in setup.wanted}
    return out.data, jac, mode


def _rows(root: E.Tensor, leaves: list[E.Tensor], n: int) -> Iterator[list[Any]]:
    """The gradients of ``leaves`` (arrays, None where backward does not reach one) from
    one backward pass of ``root`` per seed e_0 … e_{n-1} (``root.numel() == n``): the first
    pass recorded, the others replayed (autograd.replay.Rows), each with the bits of
    ``autograd.grad(root, leaves, e_i, retain_graph=True)``."""

    def onehot(i: int) -> np.ndarray:  # one at a time: n rows of n would be n² numbers
        seed = np.zeros(n, dtype=root.dtype)
        seed[i] = 1.0
        return seed.reshape(root.shape)

    if n == 0:  # an output of no elements has no rows (and no first pass to record)
        return
    rows = Rows(root, leaves, onehot(0))
    yield rows.first
    for i in range(1, n):
        yield rows(onehot(i))


def jacobian(
    expr: str,
    inputs: Mapping[str, Any] | None = None,
    *,
    wrt: Iterable[str] | None = None,
    dtype: Any = "float64",
    seed: int = 0,
    max_elements: int = E.DEFAULT_MAX_ELEMENTS,
    max_program_chars: int = DEFAULT_MAX_PROGRAM_CHARS,
    max_passes: int = DEFAULT_MAX_PASSES,
    backend: str = "numpy",
    chunks: Any = None,
    scheduler: str | None = None,
    mode: str = "reverse",
) -> Jacobian:
    """d output / d input for each ``wrt`` input, shaped ``output.shape + input.shape``.
    ``mode``: ``"reverse"`` (one backward pass per output element), ``"forward"`` (one pass
    per input element) or ``"auto"`` (forward when the ``wrt`` inputs have fewer elements in
    all than the output). ``backend="dask"``: the passes on Dask arrays in chunks of
    ``chunks`` bytes, computed together on Dask's threads or the ``scheduler``
    (docs/dask.md), in reverse mode."""
    mode = _mode(mode)
    if backend != "numpy" or chunks is not None or scheduler is not None:
        from . import on_dask

        at = on_dask.where(backend, chunks, scheduler)
        if at is not None:
            if mode == "forward":
                raise InputError(
                    msg(
                        "jacobian --mode forward runs on the NumPy backend only (on Dask: --mode "
                        "reverse or auto, which is reverse there)"
                    )
                )
            return on_dask.jacobian(
                expr, inputs, at, wrt=wrt, dtype=dtype, seed=seed, max_elements=max_elements,
                max_program_chars=max_program_chars, max_passes=max_passes,
            )  # fmt: skip
    setup = prepare(
        expr,
        inputs,
        wrt=wrt,
        dtype=dtype,
        max_elements=max_elements,
        max_program_chars=max_program_chars,
    )
    with E.computation(max_elements) as fp:
        value, jac, used = _jacobian_in(setup, seed, max_passes, mode)
    return Jacobian(expr, value, jac, fp.messages(), used)


# --------------------------------------------------------------------------------------
# Hessian
# --------------------------------------------------------------------------------------


@dataclass
class Hessian:
    expr: str
    value: np.ndarray
    wrt: list[str]
    labels: list[str]
    hessian: np.ndarray
    #: floating-point warnings counted while computing (the CLI prints them on stderr)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "expr": self.expr,
            "output": {"shape": list(self.value.shape), "value": json_array(self.value)},
            "wrt": self.wrt,
            "labels": self.labels,
            "hessian": json_array(self.hessian),
        }


def element_labels(name: str, shape: tuple[int, ...]) -> list[str]:
    """``x`` for a scalar, ``x[0]``, ``x[1]`` for a vector, ``W[0,1]`` for a matrix."""
    if not shape:
        return [name]
    return [f"{name}[{','.join(map(str, idx))}]" for idx in np.ndindex(*shape)]


def _scalar_output(out: E.Tensor, command: str) -> None:
    if out.ndim != 0:
        raise ShapeError(
            msg(
                "{command} needs a scalar output, but the output has shape {shape}: "
                "reduce it, e.g. sum(...) or mean(...)",
                command=command,
                shape=out.shape,
            )
        )


def _hessian_of(
    setup: Setup,
    seed: int,
    max_passes: int,
    command: str = "hessian",
    more: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """The forward run, the backward pass (``create_graph``), then one backward pass of it
    per input element; ``more`` as for :func:`_jacobian_of`."""
    leaves = setup.leaves()
    wanted = [leaves[n] for n in setup.wanted]
    out = setup.program.run(leaves, dtype=setup.dtype, seed=seed, retain=False).output
    _scalar_output(out, "hessian")
    sizes = [t.numel() for t in wanted]
    n = sum(sizes)
    _check_work(n * n, "hessian")
    _check_passes(command, 2 + n + more, max_passes)
    h = np.zeros((n, n), dtype=out.dtype)
    if not out.requires_grad:
        return out.data, h
    firsts = E.grad(out, wanted, create_graph=True, allow_unused=True)
    flat = [E.flatten(g) if g is not None else None for g in firsts]  # d out / d input, as a graph
    offsets = np.cumsum([0, *sizes])
    for j, g in enumerate(flat):
        if g is None or not g.requires_grad:
            continue  # a constant first derivative: its row of the Hessian is zero
        for k, second in enumerate(_rows(g, wanted, sizes[j])):
            row = offsets[j] + k
            for i, s in enumerate(second):
                if s is not None:
                    h[row, offsets[i] : offsets[i + 1]] = s.ravel()
    return out.data, h


def hessian(
    expr: str,
    inputs: Mapping[str, Any] | None = None,
    *,
    wrt: Iterable[str] | None = None,
    dtype: Any = "float64",
    seed: int = 0,
    max_elements: int = E.DEFAULT_MAX_ELEMENTS,
    max_program_chars: int = DEFAULT_MAX_PROGRAM_CHARS,
    max_passes: int = DEFAULT_MAX_PASSES,
    backend: str = "numpy",
    chunks: Any = None,
    scheduler: str | None = None,
) -> Hessian:
    """Second derivatives of a scalar output by differentiating the backward pass.
    ``backend="dask"``: the passes on Dask arrays in chunks of ``chunks`` bytes, computed
    together on Dask's threads or the ``scheduler`` (docs/dask.md)."""
    if backend != "numpy" or chunks is not None or scheduler is not None:
        from . import on_dask

        at = on_dask.where(backend, chunks, scheduler)
        if at is not None:
            return on_dask.hessian(
                expr, inputs, at, wrt=wrt, dtype=dtype, seed=seed, max_elements=max_elements,
                max_program_chars=max_program_chars, max_passes=max_passes,
            )  # fmt: skip
    setup = prepare(
        expr,
        inputs,
        wrt=wrt,
        dtype=dtype,
        max_elements=max_elements,
        max_program_chars=max_program_chars,
    )
    with E.computation(max_elements) as fp:
        value, h = _hessian_of(setup, seed, max_passes)
    labels = [
        lab for name in setup.wanted for lab in element_labels(name, setup.values[name].shape)
    ]
    return Hessian(expr, value, list(setup.wanted), labels, h, fp.messages())
