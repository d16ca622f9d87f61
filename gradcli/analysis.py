"""Beyond one gradient: Jacobians, Hessians, gradient checks, the graph, and optimisation.

Every function here starts from :func:`api.prepare` (parse once, check inputs) and uses the
engine's reverse mode: a Jacobian is one backward pass per output element, a Hessian one
backward pass *of the backward pass* (``create_graph=True``) per input element — never
finite differences, which only :func:`check` uses, as the independent oracle.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import autograd as E
from .api import Setup, check_norm_type, prepare
from .compiled import Plans
from .errors import InputError, LimitError, ShapeError
from .io import json_array
from .language import DEFAULT_MAX_PROGRAM_CHARS

#: Most passes of the program (forward runs and backward passes) that ``jacobian``,
#: ``hessian`` and ``check`` may make (``--max-passes``). Their number grows with the sizes
#: of the inputs and the output (``check``: two forward runs per input element; a Jacobian:
#: one backward pass per output element) and so does the cost of each pass, so the work is
#: quadratic: 50,000 passes of the simplest program (``check "sum(x**2)"`` of 25,000
#: elements) take 5 to 10 seconds on a shared 2-CPU machine; ``check`` of 10**5 elements,
#: the default refuses, would take minutes.
DEFAULT_MAX_PASSES = 50_000

#: Most losses ``optimize`` keeps for its plot and JSON (``--max-history``): the whole history
#: of up to 100,000 steps (a JSON line of a few MB), evenly thinned beyond (:class:`LossHistory`).
DEFAULT_MAX_HISTORY = 100_000


def _check_passes(command: str, passes: int, max_passes: int) -> None:
    """Refuse, before the work starts, a command that needs more passes than the limit."""
    if passes > max_passes:
        raise LimitError(
            f"{command} would make {passes:,} forward and backward passes of the program, "
            f"over the limit of {max_passes:,} (raise it with --max-passes)"
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

    def to_json(self) -> dict[str, Any]:
        return {
            "expr": self.expr,
            "output": {"shape": list(self.value.shape), "value": json_array(self.value)},
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
    leaves = setup.leaves()
    out = setup.program.run(leaves, dtype=setup.dtype, seed=seed, retain=False).output
    wanted = [leaves[n] for n in setup.wanted]
    total_in = sum(t.numel() for t in wanted)
    _check_work(out.numel() * total_in, "jacobian")
    backward = out.numel() if out.requires_grad else 0
    _check_passes(command, 1 + backward + more, max_passes)
    rows: dict[str, np.ndarray] = {
        n: np.zeros((out.numel(), leaves[n].numel()), dtype=out.dtype) for n in setup.wanted
    }
    if out.requires_grad:
        for i in range(out.numel()):
            onehot = np.zeros(out.numel(), dtype=out.dtype)
            onehot[i] = 1.0
            grads = E.grad(out, wanted, grad_outputs=onehot.reshape(out.shape), retain_graph=True)
            for name, g in zip(setup.wanted, grads, strict=True):
                if g is not None:
                    rows[name][i] = g.data.ravel()
    return out.data, {n: rows[n].reshape(out.shape + leaves[n].shape) for n in setup.wanted}


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
) -> Jacobian:
    """d output / d input for each ``wrt`` input, shaped ``output.shape + input.shape``."""
    setup = prepare(
        expr,
        inputs,
        wrt=wrt,
        dtype=dtype,
        max_elements=max_elements,
        max_program_chars=max_program_chars,
    )
    with E.computation(max_elements) as fp:
        value, jac = _jacobian_of(setup, seed, max_passes)
    return Jacobian(expr, value, jac, fp.messages())


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
            f"{command} needs a scalar output, but the output has shape {out.shape}: "
            f"reduce it, e.g. sum(...) or mean(...)"
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
    firsts = E.grad(out, wanted, create_graph=True)
    flat = [E.flatten(g) if g is not None else None for g in firsts]  # d out / d input, as a graph
    offsets = np.cumsum([0, *sizes])
    for j, g in enumerate(flat):
        if g is None or not g.requires_grad:
            continue  # a constant first derivative: its row of the Hessian is zero
        for k in range(sizes[j]):
            second = E.grad(g[k], wanted, retain_graph=True)
            row = offsets[j] + k
            for i, s in enumerate(second):
                if s is not None:
                    h[row, offsets[i] : offsets[i + 1]] = s.data.ravel()
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
) -> Hessian:
    """Second derivatives of a scalar output by differentiating the backward pass."""
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


# --------------------------------------------------------------------------------------
# Gradient check (like torch.autograd.gradcheck)
# --------------------------------------------------------------------------------------


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
    for k in range(base.size):
        results = []
        for step in (eps, -eps):
            values = dict(setup.values)
            moved = base.astype(np.float64, copy=True)
            moved.flat[k] += step
            values[name] = moved
            if order == 1:  # no gradient: a plan of the forward pass alone
                shifted = Setup(setup.program, values, [], "float64")
                run = plans.run(shifted, None, seed, max_elements, fp)
                if run is not None:
                    results.append(run.value.astype(np.float64).ravel())
                    continue
                leaves = shifted.leaves()
                out = shifted.program.run(leaves, dtype="float64", seed=seed, retain=False)
                results.append(out.output.data.astype(np.float64).ravel())
            else:
                shifted = Setup(setup.program, values, setup.wanted, "float64")
                results.append(_flat_gradient(shifted, seed, plans, fp, max_elements))
        columns.append((results[0] - results[1]) / (2 * eps))
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
    grads = E.grad(out, wanted) if out.requires_grad else [None] * len(wanted)
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
) -> Check:
    """Compare the analytic Jacobian (order 1) or Hessian (order 2) with central finite
    differences in float64, element by element, as ``torch.autograd.gradcheck`` does."""
    if not (eps > 0 and math.isfinite(eps)) or not rtol >= 0 or not atol >= 0:
        raise InputError("eps must be a positive number and rtol, atol numbers >= 0")
    if order not in (1, 2):
        raise InputError(f"--order must be 1 or 2, not {order}")
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
        plans = Plans(4)
        for name in setup.wanted:
            numeric = _numeric_jacobian(setup, name, seed, eps, order, plans, fp, max_elements)
            c = _compare(analytic[name], numeric, setup.values[name].shape, rtol, atol)
            result.inputs[name] = c
            result.ok = result.ok and c.ok
    result.warnings = fp.messages()
    return result


# --------------------------------------------------------------------------------------
# The computation graph
# --------------------------------------------------------------------------------------


@dataclass
class Node:
    id: int
    op: str
    label: str | None
    value: np.ndarray
    grad: np.ndarray | None
    inputs: list[int]


@dataclass
class Graph:
    expr: str
    output: int
    nodes: list[Node]
    #: floating-point warnings counted while computing (the CLI prints them on stderr)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "expr": self.expr,
            "output": self.output,
            "nodes": [
                {
                    "id": n.id,
                    "op": n.op,
                    "label": n.label,
                    "shape": list(n.value.shape),
                    "value": json_array(n.value),
                    "grad": json_array(n.grad),
                    "inputs": n.inputs,
                }
                for n in self.nodes
            ],
        }

    def to_dot(self) -> str:
        """Graphviz DOT text: one box per node, edges from inputs to the node they make."""
        lines = ["digraph gradcli {", "  rankdir=BT;", '  node [shape=box, fontname="monospace"];']
        for n in self.nodes:
            title = n.op if n.label is None else f"{n.label} = {n.op}" if n.inputs else n.label
            text = f"{title}\\nshape {tuple(n.value.shape)}"
            text += f"\\nvalue {_short(n.value)}"
            if n.grad is not None:
                text += f"\\ngrad {_short(n.grad)}"
            style = ', style="bold"' if n.id == self.output else ""
            lines.append(f'  n{n.id} [label="{_dot_escape(text)}"{style}];')
        for n in self.nodes:
            for i in n.inputs:
                lines.append(f"  n{i} -> n{n.id};")
        lines.append("}")
        return "\n".join(lines) + "\n"


def _graph_order(
    root: E.Tensor, made: dict[int, tuple[str, tuple[E.Tensor, ...]]]
) -> list[E.Tensor]:
    """Every tensor ``root`` was made from (constants too), inputs before their results:
    an iterative depth-first walk over the traced ops (a graph may be 100,000 deep)."""
    order: list[E.Tensor] = []
    visited: set[int] = set()
    stack: list[tuple[E.Tensor, bool]] = [(root, False)]
    while stack:
        t, done = stack.pop()
        if done:
            order.append(t)
        elif id(t) not in visited:
            visited.add(id(t))
            stack.append((t, True))
            inputs = made.get(id(t), (None, ()))[1]
            stack.extend((p, False) for p in reversed(inputs) if id(p) not in visited)
    return order


def _short(a: np.ndarray) -> str:
    """An array of the graph on one line; a 0-d value as ``eval`` writes it (``18.0``)."""
    arr = np.asarray(a)
    text = np.array2string(arr, precision=4, threshold=6, edgeitems=2).replace("\n", " ")
    if arr.ndim == 0 and arr.dtype.kind == "f":  # NumPy writes 18. and 1.e+20
        text = re.sub(r"(?<=\d)\.(?=$|e)", ".0", text)
    return text


def _dot_escape(text: str) -> str:
    # keep the \n line breaks DOT understands; escape quotes and stray backslashes
    return (
        text.replace("\\n", "\x00").replace("\\", "\\\\").replace('"', '\\"').replace("\x00", "\\n")
    )


def graph(
    expr: str,
    inputs: Mapping[str, Any] | None = None,
    *,
    wrt: Iterable[str] | None = None,
    dtype: Any = "float64",
    seed: int = 0,
    max_elements: int = E.DEFAULT_MAX_ELEMENTS,
    max_program_chars: int = DEFAULT_MAX_PROGRAM_CHARS,
) -> Graph:
    """The computation graph of ``expr``: every node with its operation, value and the
    gradient of the (summed) output with respect to it."""
    setup = prepare(
        expr,
        inputs,
        wrt=wrt,
        dtype=dtype,
        max_elements=max_elements,
        max_program_chars=max_program_chars,
    )
    with E.computation(max_elements) as fp, E.tracing() as traced:
        leaves = setup.leaves()
        ev = setup.program.run(leaves, dtype=setup.dtype, seed=seed)
        for name, t in ev.bindings.items():
            t.label = name
        out = ev.output
        made = {id(t): (op, inputs) for t, op, inputs in traced}
        order = _graph_order(out, made)
        for t in order:
            if t.requires_grad:
                t.retain_grad()
        root = E.sum(out) if out.ndim else out
        if root.requires_grad:
            root.backward()
    ids = {id(t): k for k, t in enumerate(order)}
    nodes = []
    for t in order:
        op, parents = made.get(id(t), (None, ()))
        nodes.append(
            Node(
                id=ids[id(t)],
                op=op or ("input" if t.label in setup.values else "constant"),
                label=t.label,
                value=t.data,
                grad=None if t.grad is None else t.grad.data,
                inputs=[ids[id(p)] for p in parents],
            )
        )
    return Graph(expr, ids[id(out)], nodes, fp.messages())


# --------------------------------------------------------------------------------------
# Optimisation
# --------------------------------------------------------------------------------------


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
) -> Optimization:
    """Minimise a scalar expression over the ``wrt`` inputs: each step ``zero_grad()``,
    ``backward()``, optional clipping, ``step()`` — the tutorial's training loop.

    The run ends after ``steps`` steps; before that when a step changes the loss by less
    than ``tol`` (``converged``), or when ``stop()``, asked before each step, says so
    (``interrupted``: the CLI's Ctrl-C, docs/cli.md "optimize"). Either way the result is
    that of the steps taken (``steps_run``): a step is never left half done.

    Memory does not grow with ``steps``: of more than ``max_history`` losses an evenly
    thinned history is kept (:class:`LossHistory`), and a warning says so."""
    from . import nn, optim

    if optimizer not in OPTIMIZERS:
        raise InputError(f"unknown optimizer {optimizer!r}: use sgd, momentum or adam")
    if not isinstance(steps, int) or steps < 0:
        raise InputError(f"--steps must be a whole number >= 0, not {steps!r}")
    if not isinstance(max_history, int) or max_history < 1:
        raise InputError(f"--max-history must be a whole number >= 1, not {max_history!r}")
    if not (lr > 0 and math.isfinite(lr)):
        raise InputError(f"--lr must be a positive number, not {lr!r}")
    if tol is not None and not (tol >= 0 and math.isfinite(tol)):
        raise InputError(f"--tol must be a finite number >= 0, not {tol!r}")
    if clip_norm is not None and clip_value is not None:
        raise InputError("--clip-norm and --clip-value cannot be used together: choose one")
    for what, v in (("--clip-norm", clip_norm), ("--clip-value", clip_value)):
        if v is not None and not (v >= 0 and math.isfinite(v)):
            raise InputError(f"{what} must be a finite number >= 0, not {v!r}")
    p = check_norm_type(norm_type)
    setup = prepare(
        expr,
        inputs,
        wrt=wrt,
        dtype=dtype,
        max_elements=max_elements,
        max_program_chars=max_program_chars,
    )
    if not setup.wanted:
        raise InputError("optimize needs at least one input to optimise (--wrt)")
    # the parameters are updated in place: work on copies of the given values
    setup.values = {k: v.copy() for k, v in setup.values.items()}
    leaves = setup.leaves()
    params = [leaves[n] for n in setup.wanted]
    opt: optim.Optimizer
    if optimizer == "adam":
        opt = optim.Adam(params, lr=lr)
    else:
        opt = optim.SGD(params, lr=lr, momentum=momentum if optimizer == "momentum" else 0.0)
    history = LossHistory(max_history)

    plans = Plans(2)

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
    notes = []
    if history.every > 1:
        notes.append(
            f"the loss history of {steps_run:,} steps is thinned to one loss every "
            f"{history.every:,} steps ({len(history.kept):,} losses and the final one; "
            f"raise --max-history, now {max_history:,}, to keep more)"
        )
    return Optimization(
        expr, optimizer, lr, steps, [*history.kept, last], final, fp.messages(), history.every,
        steps_run=steps_run, tol=tol, converged=converged, interrupted=interrupted, notes=notes,
    )  # fmt: skip
