"""The gradient check (``gradcli check``), as ``torch.autograd.gradcheck`` does it.

The analytic Jacobian (order 1) or Hessian (order 2) of :mod:`.derivatives` is compared,
element by element, with central finite differences in float64: the independent oracle
(docs/api.md, "gradcli.analysis"; the ``check`` command in docs/commands.md, its JSON in
docs/json.md). The finite differences' repeated runs are replayed from plans
(:class:`~gradcli.compiled.Plans`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import autograd as E
from ..api import Setup, prepare
from ..compiled import Plans
from ..errors import InputError
from ..i18n import msg
from ..io import json_array
from ..language import DEFAULT_MAX_PROGRAM_CHARS
from .derivatives import (
    DEFAULT_MAX_PASSES,
    _check_passes,
    _hessian_of,
    _jacobian_of,
    _scalar_output,
)


@dataclass
class InputCheck:
    ok: bool
    max_abs_error: float
    max_rel_error: float
    worst_index: list[int]
    analytic: float = math.nan
    numeric: float = math.nan


@dataclass
class Check:
    expr: str
    ok: bool
    eps: float
    rtol: float
    atol: float
    order: int
    inputs: dict[str, InputCheck] = field(default_factory=dict)
    #: floating-point warnings counted while computing (the CLI prints them on stderr)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "expr": self.expr,
            "ok": self.ok,
            "eps": self.eps,
            "rtol": self.rtol,
            "atol": self.atol,
            "order": self.order,
            "inputs": {
                name: {
                    "ok": c.ok,
                    "max_abs_error": _finite_or_str(c.max_abs_error),
                    "max_rel_error": _finite_or_str(c.max_rel_error),
                    "worst_index": c.worst_index,
                    "analytic": _finite_or_str(c.analytic),
                    "numeric": _finite_or_str(c.numeric),
                }
                for name, c in self.inputs.items()
            },
        }


def _finite_or_str(x: float) -> Any:
    return json_array(np.asarray(x))


def _compare(
    analytic: np.ndarray, numeric: np.ndarray, in_shape: tuple[int, ...], rtol: float, atol: float
) -> InputCheck:
    """Worst disagreement of two (out_size, in_size) matrices, located in the input."""
    with np.errstate(all="ignore"):
        diff = np.abs(analytic - numeric)
        bad = ~(diff <= atol + rtol * np.abs(numeric))  # nan counts as bad
        rel = diff / np.maximum(np.abs(numeric), np.finfo(np.float64).tiny)
    if diff.size == 0:
        return InputCheck(True, 0.0, 0.0, [])
    score = np.where(np.isnan(diff), np.inf, diff)
    # the largest error among the failing elements (or overall, when none fails)
    flat = int(np.argmax(np.where(bad, score, -np.inf))) if bad.any() else int(np.argmax(score))
    _, col = np.unravel_index(flat, diff.shape)
    index = [int(i) for i in np.unravel_index(col, in_shape)] if in_shape else []
    return InputCheck(
        ok=not bool(bad.any()),
        max_abs_error=float(np.nanmax(np.where(np.isnan(diff), np.inf, diff))),
        max_rel_error=float(np.nanmax(np.where(np.isnan(rel), np.inf, rel))),
        worst_index=index,
        analytic=float(analytic.flat[flat]),
        numeric=float(numeric.flat[flat]),
    )


def _numeric_jacobian(
    setup: Setup, name: str, seed: int, eps: float, order: int, plans: Plans, fp: Any,
    max_elements: int,
) -> np.ndarray:  # fmt: skip
    """Central differences, in float64, of the output (order 1) or of the analytic gradient
    (order 2) with respect to each element of input ``name``: shape (out_size, in_size).
    Each is one program on values of the same shapes: replayed from ``plans``."""
    base = setup.values[name]
    columns = []
    replay = None  # order 1: the recorded plan, replayed directly once there is one
    for k in range(base.size):
        results = []
        for step in (eps, -eps):
            values = dict(setup.values)
            moved = base.astype(np.float64, copy=True)
            moved.flat[k] += step
            values[name] = moved
            if order == 1:  # no gradient: a plan of the forward pass alone
                if replay is not None:
                    value = replay(values)
                    if value is not None:
                        results.append(value)
                        continue
                shifted = Setup(setup.program, values, [], "float64")
                run = plans.run(shifted, None, seed, max_elements, fp)
                if run is not None:
                    results.append(run.value.astype(np.float64).ravel())
                    replay = plans.values_replay(shifted, seed, max_elements, fp)
                    continue
                leaves = shifted.leaves()
                out = shifted.program.run(leaves, dtype="float64", seed=seed, retain=False)
                results.append(out.output.data.astype(np.float64).ravel())
            else:
                shifted = Setup(setup.program, values, setup.wanted, "float64")
                results.append(_flat_gradient(shifted, seed, plans, fp, max_elements))
        columns.append((results[0] - results[1]) / (2 * eps))
    return _stacked(columns)


def _stacked(columns: list[np.ndarray]) -> np.ndarray:
    """The finite differences' columns as one (out_size, in_size) matrix."""
    size = columns[0].size if columns else 0
    return np.stack(columns, axis=1) if columns else np.zeros((size, 0))


def _asked(g: np.ndarray | None) -> np.ndarray:
    assert g is not None  # asked for (wanted): zeros where backward reached nothing
    return g


def _flat_gradient(setup: Setup, seed: int, plans: Plans, fp: Any, max_elements: int) -> np.ndarray:
    run = plans.run(setup, None, seed, max_elements, fp)
    if run is not None and run.reduction is None:  # a scalar output (else: the error below)
        flat = [np.ravel(_asked(run.grads[n])).astype(np.float64) for n in setup.wanted]
        return np.concatenate(flat) if flat else np.zeros(0)
    leaves = setup.leaves()
    out = setup.program.run(leaves, dtype=setup.dtype, seed=seed, retain=False).output
    _scalar_output(out, "check --order 2")
    wanted = [leaves[n] for n in setup.wanted]
    grads = E.grad(out, wanted, allow_unused=True) if out.requires_grad else [None] * len(wanted)
    parts = [
        (g.data if g is not None else np.zeros_like(t.data)).astype(np.float64).ravel()
        for g, t in zip(grads, wanted, strict=True)
    ]
    return np.concatenate(parts) if parts else np.zeros(0)


def check(
    expr: str,
    inputs: Mapping[str, Any] | None = None,
    *,
    wrt: Iterable[str] | None = None,
    eps: float = 1e-6,
    rtol: float = 1e-5,
    atol: float = 1e-8,
    order: int = 1,
    dtype: Any = "float64",
    seed: int = 0,
    max_elements: int = E.DEFAULT_MAX_ELEMENTS,
    max_program_chars: int = DEFAULT_MAX_PROGRAM_CHARS,
    max_passes: int = DEFAULT_MAX_PASSES,
    backend: str = "numpy",
    chunks: Any = None,
    scheduler: str | None = None,
) -> Check:
    """Compare the analytic Jacobian (order 1) or Hessian (order 2) with central finite
    differences in float64, element by element, as ``torch.autograd.gradcheck`` does.
    ``backend="dask"``: every pass on Dask arrays in chunks of ``chunks`` bytes, computed
    together on Dask's threads or the ``scheduler`` (docs/dask.md)."""
    if not (eps > 0 and math.isfinite(eps)) or not rtol >= 0 or not atol >= 0:
        raise InputError(msg("eps must be a positive number and rtol, atol numbers >= 0"))
    if order not in (1, 2):
        raise InputError(msg("--order must be 1 or 2, not {order}", order=order))
    if backend != "numpy" or chunks is not None or scheduler is not None:
        from . import on_dask

        at = on_dask.where(backend, chunks, scheduler)
        if at is not None:
            return on_dask.check(
                expr, inputs, at, wrt=wrt, eps=eps, rtol=rtol, atol=atol, order=order,
                dtype=dtype, seed=seed, max_elements=max_elements,
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
    result = Check(expr, True, eps, rtol, atol, order)
    # the finite differences: two forward runs per input element (order 1), or two
    # gradients, a forward run and a backward pass each (order 2)
    finite = 2 * order * sum(setup.values[name].size for name in setup.wanted)
    with E.computation(max_elements) as fp:
        if order == 1:
            _check_passes("check", 1 + finite, max_passes)  # before the forward run
            value, jac = _jacobian_of(setup, seed, max_passes, "check", finite)
            analytic = {n: j.reshape(value.size, -1).astype(np.float64) for n, j in jac.items()}
        else:
            value, h = _hessian_of(setup, seed, max_passes, "check", finite)
            sizes = [setup.values[n].size for n in setup.wanted]
            offsets = np.cumsum([0, *sizes])
            analytic = {
                n: h[:, offsets[i] : offsets[i + 1]].astype(np.float64)
                for i, n in enumerate(setup.wanted)
            }
        plans = Plans(4, pool=True)  # large inputs: buffers reused pass after pass
        for name in setup.wanted:
            numeric = _numeric_jacobian(setup, name, seed, eps, order, plans, fp, max_elements)
            c = _compare(analytic[name], numeric, setup.values[name].shape, rtol, atol)
            result.inputs[name] = c
            result.ok = result.ok and c.ok
    result.warnings = fp.messages()
    return result
