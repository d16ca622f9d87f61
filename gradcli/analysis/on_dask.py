"""The analyses on the Dask backend (docs/dask.md): ``check``, ``jacobian``, ``hessian``,
``graph`` and ``optimize`` with ``backend="dask"``.

Each pass is the engine's own rules on Dask arrays, as :func:`gradcli.lazy.build` runs an
evaluation: the program prepared, its inputs made lazy in chunks of ``chunks`` bytes, and
every forward and backward pass a lazy graph. A command of many passes (a Jacobian's rows,
a Hessian's, a check's finite differences) builds all of them and computes them together
(:meth:`Session.compute`): one call, in which each input chunk is read once for all the
passes, and nothing is computed while they are built. The NumPy path's compiled plans
(``Plans``, ``autograd.replay.Rows``) replay NumPy calls: they have no place here, so the
passes go the general way.

The engine's ``autograd.grad`` hands its gradients out as NumPy arrays when it makes no
graph (a copy, which would compute a lazy gradient then and there): a backward pass here
is ``Tensor.backward`` instead, whose ``.grad`` stays lazy (:func:`_gradients`).
Differentiating the backward pass (``create_graph=True``, a Hessian) works on Dask arrays
as on NumPy's.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import autograd as E
from .. import lazy
from ..api import Setup
from ..errors import InputError
from ..i18n import msg
from ..language import DEFAULT_MAX_PROGRAM_CHARS
from .compgraph import Graph, Node, _graph_order
from .derivatives import (
    Hessian,
    Jacobian,
    _check_passes,
    _check_work,
    _scalar_output,
    element_labels,
)
from .gradcheck import Check, _compare, _stacked


@dataclass(frozen=True)
class Where:
    """Where an analysis runs on Dask: bytes per chunk (None: the default, 32 MiB) and the
    scheduler (None: Dask's threads; ``local:N``; an address)."""

    chunks: int | None
    scheduler: str | None


def where(backend: Any, chunks: Any, scheduler: str | None) -> Where | None:
    """An analysis's ``backend``, ``chunks`` and ``scheduler``, checked as
    :func:`gradcli.evaluate` checks them: None for the NumPy backend (which takes neither
    ``chunks`` nor ``scheduler``), else where on Dask."""
    lazy.check_backend(backend)
    if backend == "numpy":
        if chunks is not None or scheduler is not None:
            raise InputError(msg("chunks and scheduler go with backend='dask'"))
        return None
    lazy.require_dask()
    return Where(lazy.parse_chunks(chunks), scheduler)


class Session:
    """The chunk size in force while the passes are built, and the scheduler that computes
    them, started at the first :meth:`compute` (a refused analysis starts no cluster) and
    stopped with the session."""

    def __init__(self, at: Where, stack: contextlib.ExitStack) -> None:
        self.backend = lazy.require_dask()
        self.at = at
        self._stack = stack
        self._client: Any = None
        self._started = False
        stack.enter_context(self.backend.chunk_size(at.chunks))

    def lazy(self, value: Any) -> Any:
        """A NumPy array (or a lazy one) as a Dask array in this session's chunks."""
        return self.backend.DASK.from_array(value)

    def compute(self, arrays: list[Any], fp: Any = None, forward: Iterable[Any] = ()) -> list[Any]:
        """``arrays`` (Dask arrays; anything else is passed through) computed together in
        one pass, floating-point errors counted into ``fp`` (None: not counted) as an
        evaluation counts them: those of the tasks that compute ``forward`` (the forward
        passes' values) only (gradcli.lazy)."""
        if not self._started:
            self._client = self._stack.enter_context(lazy.scheduler(self.at.scheduler))
            self._started = True
        ndarray = self.backend.DASK.ndarray
        at = [i for i, a in enumerate(arrays) if isinstance(a, ndarray)]
        done = list(arrays)
        if at:
            counted = (
                contextlib.nullcontext()
                if fp is None
                else lazy._counted(fp, lazy.forward_keys(*forward))
            )
            with counted:
                values = lazy.compute(*(arrays[i] for i in at), client=self._client)
            for i, v in zip(at, values, strict=True):
                done[i] = v
        return done


@contextlib.contextmanager
def session(at: Where) -> Iterator[Session]:
    with contextlib.ExitStack() as stack:
        yield Session(at, stack)


class Batch:
    """The arrays of many passes, computed together: :meth:`add` gives an array's slot,
    :meth:`compute` fills the slots (``batch[slot]``)."""

    def __init__(self) -> None:
        self.arrays: list[Any] = []
        #: the forward passes' values: their floating-point errors are counted
        self.forward: list[Any] = []
        self.values: list[Any] = []

    def add(self, a: Any, forward: bool = False) -> int:
        self.arrays.append(a)
        if forward:
            self.forward.append(a)
        return len(self.arrays) - 1

    def add_all(self, arrays: Iterable[Any]) -> list[int | None]:
        """Slots of ``arrays``; None for a None (a leaf backward did not reach)."""
        return [None if a is None else self.add(a) for a in arrays]

    def compute(self, on: Session, fp: Any) -> None:
        self.values = on.compute(self.arrays, fp, self.forward)
        self.arrays = []  # the graphs go once computed

    def __getitem__(self, slot: int) -> Any:
        return self.values[slot]


# --- backward passes that stay lazy ------------------------------------------------------


def _onehot(like: Any, k: int) -> Any:
    """A mask of ``like``'s shape, true at flat index ``k`` only: lazy, in ``like``'s
    chunks, made of one line per axis (nothing of the whole size is made in memory)."""
    import dask.array as da

    shape = like.shape
    if not shape:
        return da.ones((), dtype=bool, chunks=())
    at = np.unravel_index(k, shape)
    mask = None
    for axis, (n, chunks, i) in enumerate(zip(shape, like.chunks, at, strict=True)):
        line = (da.arange(n, chunks=chunks) == int(i)).reshape(
            (1,) * axis + (n,) + (1,) * (len(shape) - axis - 1)
        )
        mask = line if mask is None else mask & line
    return mask


def _seed(root: E.Tensor, k: int) -> E.Tensor:
    """The seed e_k of a backward pass of ``root``: one at flat index ``k``, else zero."""
    data = root.data
    if isinstance(data, np.ndarray):  # a value of constants only (no lazy input in it)
        seed = np.zeros(data.size, dtype=data.dtype)
        seed[k] = 1.0
        return E.const(seed.reshape(data.shape))
    return E.const(_onehot(data, k).astype(data.dtype))


def _gradients(root: E.Tensor, leaves: list[E.Tensor], seed: E.Tensor | None) -> list[Any]:
    """The gradients of ``leaves`` (lazy; None where backward does not reach one) from one
    backward pass of ``root`` with ``seed`` (None: a scalar's one), the graph retained for
    the next: what ``autograd.grad(root, leaves, seed, retain_graph=True)`` gives, left
    lazy."""
    for t in leaves:
        t.grad = None
    root.backward(seed, retain_graph=True)
    grads = [None if t.grad is None else t.grad.data for t in leaves]
    for t in leaves:
        t.grad = None
    return grads


def _rows(root: E.Tensor, leaves: list[E.Tensor], n: int) -> Iterator[list[Any]]:
    """As ``derivatives._rows``: the gradients of ``leaves`` from one backward pass of
    ``root`` per seed e_0 … e_{n-1}, each a lazy graph of its own."""
    for k in range(n):
        yield _gradients(root, leaves, _seed(root, k))


# --- jacobian and hessian --------------------------------------------------------------


@dataclass
class _Jacobian:
    """A Jacobian's passes, built: the output's slot and each row's gradients' slots."""

    out: E.Tensor
    sizes: dict[str, int]
    shapes: dict[str, tuple[int, ...]]
    value: int
    rows: list[list[int | None]]

    def assembled(self, batch: Batch) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """What ``derivatives._jacobian_of`` returns, from the computed batch."""
        out = self.out
        names = list(self.sizes)
        jac = {n: np.zeros((out.numel(), self.sizes[n]), dtype=out.dtype) for n in names}
        for i, slots in enumerate(self.rows):
            for name, slot in zip(names, slots, strict=True):
                if slot is not None:
                    jac[name][i] = batch[slot].ravel()
        value = np.asarray(batch[self.value])
        return value, {n: jac[n].reshape(out.shape + self.shapes[n]) for n in names}


def _jacobian_passes(
    setup: Setup, seed: int, max_passes: int, batch: Batch, command: str = "jacobian",
    more: int = 0,
) -> _Jacobian:  # fmt: skip
    """``derivatives._jacobian_of``'s passes, lazily, with its checks, into ``batch``."""
    leaves = setup.leaves()
    out = setup.program.run(leaves, dtype=setup.dtype, seed=seed, retain=False).output
    wanted = [leaves[n] for n in setup.wanted]
    total_in = sum(t.numel() for t in wanted)
    _check_work(out.numel() * total_in, "jacobian")
    backward = out.numel() if out.requires_grad else 0
    _check_passes(command, 1 + backward + more, max_passes)
    rows = []
    if out.requires_grad:
        rows = [batch.add_all(grads) for grads in _rows(out, wanted, out.numel())]
    return _Jacobian(
        out,
        {n: leaves[n].numel() for n in setup.wanted},
        {n: tuple(leaves[n].shape) for n in setup.wanted},
        batch.add(out.data, forward=True),
        rows,
    )


@dataclass
class _Hessian:
    """A Hessian's passes, built: the output's slot and, per row, its input's place and
    the slots of the second derivatives."""

    out: E.Tensor
    sizes: list[int]
    value: int
    rows: list[tuple[int, list[int | None]]]

    def assembled(self, batch: Batch) -> tuple[np.ndarray, np.ndarray]:
        """What ``derivatives._hessian_of`` returns, from the computed batch."""
        n = sum(self.sizes)
        h = np.zeros((n, n), dtype=self.out.dtype)
        offsets = np.cumsum([0, *self.sizes])
        for row, slots in self.rows:
            for i, slot in enumerate(slots):
                if slot is not None:
                    h[row, offsets[i] : offsets[i + 1]] = batch[slot].ravel()
        return np.asarray(batch[self.value]), h


def _hessian_passes(
    setup: Setup, seed: int, max_passes: int, batch: Batch, command: str = "hessian",
    more: int = 0,
) -> _Hessian:  # fmt: skip
    """``derivatives._hessian_of``'s passes, lazily, with its checks, into ``batch``: the
    backward pass made a graph (``create_graph``), then one backward pass of it per input
    element."""
    leaves = setup.leaves()
    wanted = [leaves[n] for n in setup.wanted]
    out = setup.program.run(leaves, dtype=setup.dtype, seed=seed, retain=False).output
    _scalar_output(out, "hessian")
    sizes = [t.numel() for t in wanted]
    n = sum(sizes)
    _check_work(n * n, "hessian")
    _check_passes(command, 2 + n + more, max_passes)
    rows: list[tuple[int, list[int | None]]] = []
    if out.requires_grad:
        firsts = E.grad(out, wanted, create_graph=True, allow_unused=True)
        flat = [E.flatten(g) if g is not None else None for g in firsts]
        offsets = np.cumsum([0, *sizes])
        for j, g in enumerate(flat):
            if g is None or not g.requires_grad:
                continue  # a constant first derivative: its row of the Hessian is zero
            for k, second in enumerate(_rows(g, wanted, sizes[j])):
                rows.append((int(offsets[j]) + k, batch.add_all(second)))
    return _Hessian(out, sizes, batch.add(out.data, forward=True), rows)


def jacobian(
    expr: str,
    inputs: Mapping[str, Any] | None,
    at: Where,
    *,
    wrt: Iterable[str] | None = None,
    dtype: Any = "float64",
    seed: int = 0,
    max_elements: int = E.DEFAULT_MAX_ELEMENTS,
    max_program_chars: int = DEFAULT_MAX_PROGRAM_CHARS,
    max_passes: int,
) -> Jacobian:
    """:func:`gradcli.analysis.jacobian` on Dask: the forward pass and one backward pass per
    output element, computed together."""
    with session(at) as on:
        setup, _ = lazy.lazy_setup(
            expr, inputs, wrt=wrt, dtype=dtype, max_elements=max_elements,
            max_program_chars=max_program_chars,
        )  # fmt: skip
        batch = Batch()
        with E.computation(max_elements) as fp:
            passes = _jacobian_passes(setup, seed, max_passes, batch)
            batch.compute(on, fp)
            value, jac = passes.assembled(batch)
    return Jacobian(expr, value, jac, fp.messages())


def hessian(
    expr: str,
    inputs: Mapping[str, Any] | None,
    at: Where,
    *,
    wrt: Iterable[str] | None = None,
    dtype: Any = "float64",
    seed: int = 0,
    max_elements: int = E.DEFAULT_MAX_ELEMENTS,
    max_program_chars: int = DEFAULT_MAX_PROGRAM_CHARS,
    max_passes: int,
) -> Hessian:
    """:func:`gradcli.analysis.hessian` on Dask: the forward pass, the backward pass as a
    graph, and one backward pass of it per input element, computed together."""
    with session(at) as on:
        setup, _ = lazy.lazy_setup(
            expr, inputs, wrt=wrt, dtype=dtype, max_elements=max_elements,
            max_program_chars=max_program_chars,
        )  # fmt: skip
        batch = Batch()
        with E.computation(max_elements) as fp:
            passes = _hessian_passes(setup, seed, max_passes, batch)
            batch.compute(on, fp)
            value, h = passes.assembled(batch)
    labels = [
        lab
        for name in setup.wanted
        for lab in element_labels(name, tuple(setup.values[name].shape))
    ]
    return Hessian(expr, value, list(setup.wanted), labels, h, fp.messages())


# --- check --------------------------------------------------------------------------------


def _moved(base: Any, k: int, step: float) -> Any:
    """``base`` in float64 with ``step`` added at flat index ``k``, lazily: the bits of
    ``gradcheck._numeric_jacobian``'s ``moved.flat[k] += step`` (every other element as
    it was, a -0.0 too)."""
    import dask.array as da

    base = base.astype(np.float64)
    return da.where(_onehot(base, k), base + step, base)


def _numeric_passes(
    setup: Setup, name: str, seed: int, eps: float, order: int, batch: Batch
) -> list[tuple[Any, Any]]:
    """``gradcheck._numeric_jacobian``'s passes, lazily, into ``batch``: per element of
    input ``name``, what :func:`_shifted` gives at +eps and at -eps."""
    base = setup.values[name]  # lazy (lazy_setup)
    passes = []
    for k in range(int(base.size)):
        pair = []
        for step in (eps, -eps):
            values = dict(setup.values)
            values[name] = _moved(base, k, step)
            pair.append(_shifted(setup, values, seed, order, batch))
        passes.append((pair[0], pair[1]))
    return passes


def _shifted(
    setup: Setup, values: dict[str, Any], seed: int, order: int, batch: Batch
) -> int | list[tuple[int | None, tuple[int, ...]]]:
    """One pass on shifted ``values``, in float64: the slot of the output (order 1), or per
    wanted input the slot of its gradient and its shape (order 2; no slot where backward
    does not reach it: zeros, as ``gradcheck._flat_gradient`` gives)."""
    if order == 1:
        shifted = Setup(setup.program, values, [], "float64")
        out = shifted.program.run(shifted.leaves(), dtype="float64", seed=seed, retain=False)
        return batch.add(out.output.data, forward=True)
    shifted = Setup(setup.program, values, setup.wanted, "float64")
    leaves = shifted.leaves()
    root = shifted.program.run(leaves, dtype=shifted.dtype, seed=seed, retain=False).output
    _scalar_output(root, "check --order 2")
    batch.forward.append(root.data)  # its errors are counted; its value is not needed
    wanted = [leaves[n] for n in setup.wanted]
    grads = _gradients(root, wanted, None) if root.requires_grad else [None] * len(wanted)
    return [
        (None if g is None else batch.add(g), tuple(t.shape))
        for g, t in zip(grads, wanted, strict=True)
    ]


def _numeric_assembled(passes: list[tuple[Any, Any]], eps: float, order: int, batch: Batch) -> Any:
    """The (out_size, in_size) matrix of central differences, from the computed batch, as
    ``gradcheck._numeric_jacobian`` makes it."""

    def result(pass_: Any) -> np.ndarray:
        if order == 1:
            return np.asarray(batch[pass_]).astype(np.float64).ravel()
        parts = [
            np.zeros(math.prod(shape), dtype=np.float64)
            if slot is None
            else np.asarray(batch[slot]).astype(np.float64).ravel()
            for slot, shape in pass_
        ]
        return np.concatenate(parts) if parts else np.zeros(0)

    columns = []
    for plus, minus in passes:
        columns.append((result(plus) - result(minus)) / (2 * eps))
    return _stacked(columns)


def check(
    expr: str,
    inputs: Mapping[str, Any] | None,
    at: Where,
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
    max_passes: int,
) -> Check:
    """:func:`gradcli.analysis.check` on Dask (its arguments checked already): the analytic
    derivatives' passes and the finite differences' forward passes (order 1) or gradients
    (order 2), computed together."""
    with session(at) as on:
        setup, _ = lazy.lazy_setup(
            expr, inputs, wrt=wrt, dtype=dtype, max_elements=max_elements,
            max_program_chars=max_program_chars,
        )  # fmt: skip
        result = Check(expr, True, eps, rtol, atol, order)
        finite = 2 * order * sum(int(setup.values[name].size) for name in setup.wanted)
        batch = Batch()
        with E.computation(max_elements) as fp:
            analytic_passes: _Jacobian | _Hessian
            if order == 1:
                _check_passes("check", 1 + finite, max_passes)
                analytic_passes = _jacobian_passes(setup, seed, max_passes, batch, "check", finite)
            else:
                analytic_passes = _hessian_passes(setup, seed, max_passes, batch, "check", finite)
            numeric_passes = {
                name: _numeric_passes(setup, name, seed, eps, order, batch) for name in setup.wanted
            }
            batch.compute(on, fp)
            if isinstance(analytic_passes, _Jacobian):
                value, jac = analytic_passes.assembled(batch)
                analytic = {n: j.reshape(value.size, -1).astype(np.float64) for n, j in jac.items()}
            else:
                _, h = analytic_passes.assembled(batch)
                sizes = [int(setup.values[n].size) for n in setup.wanted]
                offsets = np.cumsum([0, *sizes])
                analytic = {
                    n: h[:, offsets[i] : offsets[i + 1]].astype(np.float64)
                    for i, n in enumerate(setup.wanted)
                }
            for name in setup.wanted:
                numeric = _numeric_assembled(numeric_passes[name], eps, order, batch)
                shape = tuple(setup.values[name].shape)
                c = _compare(analytic[name], numeric, shape, rtol, atol)
                result.inputs[name] = c
                result.ok = result.ok and c.ok
    result.warnings = fp.messages()
    return result


# --- graph ----------------------------------------------------------------------------------


def graph(
    expr: str,
    inputs: Mapping[str, Any] | None,
    at: Where,
    *,
    wrt: Iterable[str] | None = None,
    dtype: Any = "float64",
    seed: int = 0,
    max_elements: int = E.DEFAULT_MAX_ELEMENTS,
    max_program_chars: int = DEFAULT_MAX_PROGRAM_CHARS,
) -> Graph:
    """:func:`gradcli.analysis.graph` on Dask: the traced forward pass and the backward
    pass of its (summed) output, every node's value and gradient computed together."""
    with session(at) as on:
        setup, _ = lazy.lazy_setup(
            expr, inputs, wrt=wrt, dtype=dtype, max_elements=max_elements,
            max_program_chars=max_program_chars,
        )  # fmt: skip
        batch = Batch()
        with E.computation(max_elements) as fp:
            with E.tracing() as traced:
                leaves = setup.leaves()
                ev = setup.program.run(leaves, dtype=setup.dtype, seed=seed)
                for name, t in ev.bindings.items():
                    t.label = name
                out = ev.output
                made = {id(t): (op, ins) for t, op, ins in traced}
                order = _graph_order(out, made)
                for t in order:
                    if t.requires_grad:
                        t.retain_grad()
                root = E.sum(out) if out.ndim else out
                if root.requires_grad:
                    root.backward()
            slots = [
                (
                    batch.add(t.data, forward=True),
                    None if t.grad is None else batch.add(t.grad.data),
                )
                for t in order
            ]
            batch.compute(on, fp)
    ids = {id(t): k for k, t in enumerate(order)}
    nodes = []
    for t, (value, grad) in zip(order, slots, strict=True):
        op, parents = made.get(id(t), (None, ()))
        nodes.append(
            Node(
                id=ids[id(t)],
                op=op or ("input" if t.label in setup.values else "constant"),
                label=t.label,
                value=np.asarray(batch[value]),
                grad=None if grad is None else np.asarray(batch[grad]),
                inputs=[ids[id(p)] for p in parents],
            )
        )
    return Graph(expr, ids[id(out)], nodes, fp.messages())


# --- optimize ---------------------------------------------------------------------------


def hold(setup: Setup, on: Session) -> None:
    """The parameters being optimised (``setup.wanted``, as given: ``lazy.lazy_setup``
    kept them) in memory, copies of their own, which the optimizer updates in place. One given
    lazily (a Zarr store, a large ``.npy`` file) is read into memory, all of them in one
    pass, unless it could not be held there: larger than a quarter of memory, the size
    from which an ``.npy`` input is read a chunk at a time (docs/dask.md, "Files")."""
    from ..inputs import big_file_bytes

    ndarray = on.backend.DASK.ndarray
    given = [n for n in setup.wanted if isinstance(setup.values[n], ndarray)]
    limit = big_file_bytes()
    for n in given:
        v = setup.values[n]
        if v.nbytes > limit:
            raise InputError(
                msg(
                    "optimize holds the inputs it optimises in memory, and `{n}` ({size:,} "
                    "elements, {nbytes:.3g} GiB) is larger than a quarter of this machine's "
                    "memory ({limit:.3g} GiB): optimise a smaller input (--wrt), or keep "
                    "this one a constant",
                    n=n,
                    size=int(v.size),
                    nbytes=v.nbytes / 2**30,
                    limit=limit / 2**30,
                )
            )
    read = dict(zip(given, on.compute([setup.values[n] for n in given]), strict=True))
    for n in setup.wanted:
        setup.values[n] = np.array(read.get(n, setup.values[n]), copy=True)


class Steps:
    """``optimize``'s evaluations on Dask (its ``loss_and_grad``): each one forward and one
    backward pass over the lazy inputs, the loss and the parameters' gradients computed
    together, the gradients then added into the parameters' ``.grad`` as the NumPy path
    adds them. The parameters are in memory (:func:`hold`), each pass reading them as lazy
    arrays of their own; the other inputs stay where they are: a data set on disk is read
    a chunk at a time, each step, and never held."""

    def __init__(self, setup: Setup, params: list[E.Tensor], seed: int, on: Session) -> None:
        self.setup = setup
        self.params = dict(zip(setup.wanted, params, strict=True))
        self.seed = seed
        self.on = on

    def __call__(self) -> float:
        """One step's loss; its floating-point errors counted by the computation it runs in
        (``autograd.computation``), as the NumPy path's are."""
        from ..autograd.state import STATE

        fp = STATE.errors
        setup, params = self.setup, self.params
        values = {
            n: self.on.lazy(params[n].data) if n in params else v for n, v in setup.values.items()
        }
        leaves = Setup(setup.program, values, setup.wanted, setup.dtype).leaves()
        out = setup.program.run(leaves, dtype=setup.dtype, seed=self.seed, retain=False).output
        _scalar_output(out, "optimize")
        if out.requires_grad:
            out.backward()
        grads = [leaves[n].grad for n in setup.wanted]
        loss, *computed = self.on.compute(
            [out.data, *(None if g is None else g.data for g in grads)], fp, [out.data]
        )
        for leaf, g in zip(params.values(), computed, strict=True):
            if g is None:
                continue
            if leaf.grad is None:
                leaf.grad = E.from_numpy(g)
            else:
                leaf.grad.data += g
        return float(loss)
