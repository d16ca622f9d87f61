"""Optimisation (``gradcli optimize``): the tutorial's training loop over a program.

Each step ``zero_grad()``, ``backward()``, optional clipping, ``step()`` with SGD, momentum or
Adam (:mod:`gradcli.optim`), the repeated evaluations replayed from plans; the loss history is
kept in bounded memory (:class:`LossHistory`). See docs/api.md, "gradcli.analysis", and the
``optimize`` command in docs/commands.md and docs/cli.md (its JSON in docs/json.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import autograd as E
from ..api import Setup, check_norm_type, prepare
from ..compiled import Plans
from ..errors import InputError
from ..i18n import msg
from ..io import json_array
from ..language import DEFAULT_MAX_PROGRAM_CHARS
from .derivatives import _scalar_output

#: Most losses ``optimize`` keeps for its plot and JSON (``--max-history``): the whole history
#: of up to 100,000 steps (a JSON line of a few MB), evenly thinned beyond (:class:`LossHistory`).
DEFAULT_MAX_HISTORY = 100_000


@dataclass
class Optimization:
    expr: str
    optimizer: str
    lr: float
    steps: int
    #: the loss before steps 0, loss_every, 2·loss_every, ..., then the final loss
    losses: list[float]
    final: dict[str, tuple[np.ndarray, np.ndarray | None]]
    #: floating-point warnings counted while computing (the CLI prints them on stderr)
    warnings: list[str] = field(default_factory=list)
    #: 1: the whole history (steps_run + 1 losses); more when it was thinned (LossHistory)
    loss_every: int = 1
    #: the steps taken: ``steps``, or fewer when ``tol`` or an interruption stopped the run
    steps_run: int | None = None
    #: stop once the loss changes by less than this from one step to the next (``--tol``)
    tol: float | None = None
    #: the last step changed the loss by less than ``tol`` (the run stopped there)
    converged: bool = False
    #: the run was stopped from outside (Ctrl-C): the result so far
    interrupted: bool = False
    #: what the table's caption says beyond the numbers: a thinned loss history (the CLI
    #: prints them on stderr when there is no table)
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.steps_run is None:
            self.steps_run = self.steps

    def to_json(self) -> dict[str, Any]:
        return {
            "expr": self.expr,
            "optimizer": self.optimizer,
            "lr": self.lr,
            "steps": self.steps,
            "steps_run": self.steps_run,
            "tol": self.tol,
            "converged": self.converged,
            "interrupted": self.interrupted,
            "losses": json_array(np.asarray(self.losses, dtype=np.float64)),
            "loss_every": self.loss_every,
            "final": {
                name: {"value": json_array(v), "grad": json_array(g)}
                for name, (v, g) in self.final.items()
            },
        }


OPTIMIZERS = ("sgd", "momentum", "adam")


class LossHistory:
    """The losses of a run of any length in bounded memory, evenly spaced.

    Every loss is kept until there are more than ``limit``; then every other kept loss is
    dropped and from then on only every ``every``-th step's loss is kept (``every``
    doubles each time this happens). So ``kept[i]`` is always the loss before step
    ``i * every``, at most ``limit`` of them, and at least half as many when thinned.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.every = 1
        self.kept: list[float] = []
        self.seen = 0

    def add(self, loss: float) -> None:
        if self.seen % self.every == 0:
            self.kept.append(loss)
            if len(self.kept) > self.limit:
                del self.kept[1::2]
                self.every *= 2
        self.seen += 1


def optimize(
    expr: str,
    inputs: Mapping[str, Any] | None = None,
    *,
    wrt: Iterable[str] | None = None,
    optimizer: str = "sgd",
    steps: int = 100,
    lr: float = 0.01,
    momentum: float = 0.9,
    clip_norm: float | None = None,
    norm_type: Any = 2.0,
    clip_value: float | None = None,
    zero_grad: bool = True,
    dtype: Any = "float64",
    seed: int = 0,
    max_elements: int = E.DEFAULT_MAX_ELEMENTS,
    max_program_chars: int = DEFAULT_MAX_PROGRAM_CHARS,
    max_history: int = DEFAULT_MAX_HISTORY,
    on_step: Any = None,
    tol: float | None = None,
    stop: Callable[[], bool] | None = None,
    backend: str = "numpy",
    chunks: Any = None,
    scheduler: str | None = None,
) -> Optimization:
    """Minimise a scalar expression over the ``wrt`` inputs: each step ``zero_grad()``,
    ``backward()``, optional clipping, ``step()`` — the tutorial's training loop.

    The run ends after ``steps`` steps; before that when a step changes the loss by less
    than ``tol`` (``converged``), or when ``stop()``, asked before each step, says so
    (``interrupted``: the CLI's Ctrl-C, docs/cli.md "optimize"). Either way the result is
    that of the steps taken (``steps_run``): a step is never left half done.

    Memory does not grow with ``steps``: of more than ``max_history`` losses an evenly
    thinned history is kept (:class:`LossHistory`), and a warning says so.

    ``backend="dask"``: each step's evaluation on Dask arrays in chunks of ``chunks``
    bytes, on Dask's threads or the ``scheduler`` (docs/dask.md); the parameters and
    their updates stay in memory, as here (:class:`.on_dask.Steps`)."""

    if optimizer not in OPTIMIZERS:
        raise InputError(
            msg("unknown optimizer {optimizer!r}: use sgd, momentum or adam", optimizer=optimizer)
        )
    if not isinstance(steps, int) or steps < 0:
        raise InputError(msg("--steps must be a whole number >= 0, not {steps!r}", steps=steps))
    if not isinstance(max_history, int) or max_history < 1:
        raise InputError(
            msg(
                "--max-history must be a whole number >= 1, not {max_history!r}",
                max_history=max_history,
            )
        )
    if not (lr > 0 and math.isfinite(lr)):
        raise InputError(msg("--lr must be a positive number, not {lr!r}", lr=lr))
    if tol is not None and not (tol >= 0 and math.isfinite(tol)):
        raise InputError(msg("--tol must be a finite number >= 0, not {tol!r}", tol=tol))
    if clip_norm is not None and clip_value is not None:
        raise InputError(msg("--clip-norm and --clip-value cannot be used together: choose one"))
    for what, v in (("--clip-norm", clip_norm), ("--clip-value", clip_value)):
        if v is not None and not (v >= 0 and math.isfinite(v)):
            raise InputError(msg("{what} must be a finite number >= 0, not {v!r}", what=what, v=v))
    p = check_norm_type(norm_type)
    checked = dict(
        optimizer=optimizer, steps=steps, lr=lr, momentum=momentum, clip_norm=clip_norm, p=p,
        clip_value=clip_value, zero_grad=zero_grad, seed=seed, max_elements=max_elements,
        max_history=max_history, on_step=on_step, tol=tol, stop=stop,
    )  # fmt: skip
    if backend != "numpy" or chunks is not None or scheduler is not None:
        from .. import lazy
        from . import on_dask

        at = on_dask.where(backend, chunks, scheduler)
        if at is not None:
            with on_dask.session(at) as on:
                setup, _ = lazy.lazy_setup(
                    expr, inputs, wrt=wrt, dtype=dtype, max_elements=max_elements,
                    max_program_chars=max_program_chars, keep=lambda setup: setup.wanted,
                )  # fmt: skip
                return _descend(expr, setup, on, **checked)
    setup = prepare(
        expr,
        inputs,
        wrt=wrt,
        dtype=dtype,
        max_elements=max_elements,
        max_program_chars=max_program_chars,
    )
    return _descend(expr, setup, None, **checked)


def _descend(
    expr: str,
    setup: Setup,
    on: Any,
    *,
    optimizer: str,
    steps: int,
    lr: float,
    momentum: float,
    clip_norm: float | None,
    p: float,
    clip_value: float | None,
    zero_grad: bool,
    seed: int,
    max_elements: int,
    max_history: int,
    on_step: Any,
    tol: float | None,
    stop: Callable[[], bool] | None,
) -> Optimization:
    """:func:`optimize`'s run from its checked arguments: on the NumPy backend (``on``
    None), or on Dask (``on``, an :class:`.on_dask.Session`)."""
    from .. import nn, optim

    if not setup.wanted:
        raise InputError(msg("optimize needs at least one input to optimise (--wrt)"))
    if on is None:
        # the parameters are updated in place: work on copies of the given values
        setup.values = {k: v.copy() for k, v in setup.values.items()}
    else:
        from .on_dask import hold

        hold(setup, on)  # the parameters in memory, copies; the other inputs lazy
    leaves = setup.leaves()
    params = [leaves[n] for n in setup.wanted]
    opt: optim.Optimizer
    if optimizer == "adam":
        opt = optim.Adam(params, lr=lr)
    else:
        opt = optim.SGD(params, lr=lr, momentum=momentum if optimizer == "momentum" else 0.0)
    history = LossHistory(max_history)

    plans = Plans(2, pool=True)  # large inputs: buffers reused step after step

    def loss_and_grad() -> float:
        # every step evaluates one program on new values of the same shapes: replayed from
        # its plan (gradcli.compiled), the numbers of a fresh evaluation
        run = plans.run(setup, None, seed, max_elements, fp, zeros=False)
        if run is not None and run.reduction is None:
            for n, leaf in zip(setup.wanted, params, strict=True):
                g = run.grads[n]
                if g is None:
                    continue
                if leaf.grad is None:
                    leaf.grad = E.from_numpy(g)
                else:
                    leaf.grad.data += g
            return float(run.value)
        out = setup.program.run(leaves, dtype=setup.dtype, seed=seed, retain=False).output
        _scalar_output(out, "optimize")
        if out.requires_grad:
            out.backward()
        return float(out.data)

    if on is not None:  # each step one evaluation on Dask (gradcli.analysis.on_dask)
        from .on_dask import Steps

        loss_and_grad = Steps(setup, params, seed, on)

    steps_run = 0
    converged = interrupted = False
    previous = math.nan
    with E.computation(max_elements) as fp:
        for step in range(steps):
            if stop is not None and stop():
                interrupted = True
                break
            if zero_grad:
                opt.zero_grad()
            loss = loss_and_grad()
            # the last step barely moved the loss: stop here (`converged`, below)
            if tol is not None and step > 0 and abs(loss - previous) < tol:
                break
            previous = loss
            history.add(loss)
            if clip_norm is not None:
                nn.clip_grad_norm_(params, clip_norm, p)
            elif clip_value is not None:
                nn.clip_grad_value_(params, clip_value)
            opt.step()
            steps_run = step + 1
            if on_step is not None:
                on_step(step + 1, loss)
        opt.zero_grad()
        last = loss_and_grad()
        if tol is not None and steps_run > 0 and not interrupted:
            # the last step met the tolerance: the run stopped for it, or its last step did
            converged = abs(last - previous) < tol
    final: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
    for n in setup.wanted:
        g = leaves[n].grad
        final[n] = (leaves[n].data, None if g is None else g.data)
    notes: list[str] = []
    if history.every > 1:
        notes.append(
            msg(
                "the loss history of {steps:,} steps is thinned to one loss every "
                "{every:,} steps ({kept:,} losses and the final one; "
                "raise --max-history, now {max_history:,}, to keep more)",
                steps=steps_run,
                every=history.every,
                kept=len(history.kept),
                max_history=max_history,
            )
        )
    return Optimization(
        expr, optimizer, lr, steps, [*history.kept, last], final, fp.messages(), history.every,
        steps_run=steps_run, tol=tol, converged=converged, interrupted=interrupted, notes=notes,
    )  # fmt: skip
