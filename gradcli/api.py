"""The evaluator as a Python API: ``evaluate()`` and the ``Result`` it returns.

The CLI is built on this same function, so a script and a shell user get the same numbers.
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from . import autograd as E
from .errors import (
    GradcliError,
    InputError,
    InvalidValueError,
    LimitError,
    NamingError,
    ShapeError,
    shorten,
)
from .i18n import Message, msg
from .language import (
    DEFAULT_MAX_PROGRAM_CHARS,
    FUNCTIONS,
    Program,
    check_program_length,
    compile_program,
    normalize_name,
    suggest,
)

if TYPE_CHECKING:
    from .compiled import Plans

DTYPES = ("float64", "float32")


@dataclass
class Result:
    """The value of a program and the gradient of every input and binding.

    ``grads[name]`` is ``None`` for an input that was not asked for (not in ``wrt``);
    ``intermediates[name]`` is ``(value, grad)`` with ``grad`` ``None`` where the binding
    depends on no ``wrt`` input. ``warnings`` are the floating-point problems met (overflow
    counts, non-finite values); ``notes`` say what was done with the gradients (the implicit
    sum, clipping), which the CLI's table caption also says (docs/commands.md, "Notes and
    warnings").
    """

    expr: str
    value: np.ndarray
    inputs: dict[str, np.ndarray]
    grads: dict[str, np.ndarray | None]
    intermediates: dict[str, tuple[np.ndarray, np.ndarray | None]] = field(default_factory=dict)
    reduction: str | None = None
    clip: dict[str, float] | None = None
    id: Any = None
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the total gradient norm, when the evaluation learnt it as it wrote the gradients
    #: (``gradcli.lazy.evaluate_into``, whose gradients are not in memory)
    grad_norm: float | None = field(default=None, repr=False)

    @property
    def total_grad_norm(self) -> float:
        """The 2-norm of all input gradients together (the norm of the per-input norms)."""
        if self.grad_norm is not None:
            return self.grad_norm
        return E.total_norm([g for g in self.grads.values() if g is not None], 2.0)

    def to_json(self, *, lists: bool = True) -> dict[str, Any]:
        """The JSON response (docs/json.md), as a dict of plain Python values (strict JSON);
        with ``lists=False`` its arrays stay arrays, for ``io.write_json`` to write a piece
        at a time."""
        from .io import json_array

        array = json_array if lists else _as_is

        return {
            "id": self.id,
            "expr": self.expr,
            "output": {"shape": list(self.value.shape), "value": array(self.value)},
            "reduction": self.reduction,
            "inputs": {
                name: {
                    "shape": list(value.shape),
                    "value": array(value),
                    "requires_grad": self.grads[name] is not None,
                    "grad": array(self.grads[name]),
                }
                for name, value in self.inputs.items()
            },
            "intermediates": {
                name: {
                    "shape": list(value.shape),
                    "value": array(value),
                    "grad": array(grad),
                }
                for name, (value, grad) in self.intermediates.items()
            },
            "clip": None
            if self.clip is None
            else {k: json_array(np.asarray(v)) for k, v in self.clip.items()},
        }


def _as_is(a: Any) -> Any:
    return a


#: How an argument of the API is echoed in a message: a few dozen characters at most, and
#: no deeper than a few levels of nesting (repr of a list nested 10^5 deep would recurse).
_ARG_REPR = reprlib.Repr()
_ARG_REPR.maxstring = _ARG_REPR.maxother = _ARG_REPR.maxlong = 40


def _shown(value: Any) -> str:
    """``value`` for a message about a bad argument: its repr, cut short."""
    try:
        return _ARG_REPR.repr(value)
    except Exception:  # a repr that fails must not replace the error being reported
        return f"an object of type {type(value).__name__}"


def check_dtype(dtype: Any) -> str:
    """``"float64"`` or ``"float32"`` from a name, a NumPy type or a dtype."""
    if isinstance(dtype, str):
        name = dtype
    elif isinstance(dtype, np.dtype) or (
        isinstance(dtype, type) and dtype in (np.float64, np.float32)
    ):
        name = str(np.dtype(dtype))
    else:
        name = ""
    if name not in DTYPES:
        raise InputError(msg("unknown dtype {dtype}: use float64 or float32", dtype=_shown(dtype)))
    return name


def check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError(msg("seed must be a whole number >= 0, not {seed}", seed=_shown(seed)))
    return seed


def check_limit_value(limit: Any, what: str) -> None:
    """A size limit (``max_elements``, ``max_program_chars``) is a whole number >= 1."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InputError(
            msg("{what} must be a whole number >= 1, not {limit}", what=what, limit=_shown(limit))
        )


def check_norm_type(norm_type: Any) -> float:
    """``norm_type`` as a float (a positive number or inf); a bad one is an input error."""
    try:
        return E.norm_type_of(norm_type)
    except OverflowError:  # an int beyond any float: 10**400 is as good as inf
        if norm_type > 0:
            return math.inf
    except InvalidValueError:
        pass
    raise InputError(
        msg(
            "norm_type must be a positive number or inf, not {norm_type}",
            norm_type=_shown(norm_type),
        )
    )


def check_inputs(inputs: Any) -> dict[Any, Any]:
    """The ``inputs`` argument: a mapping of name -> value (or None: no inputs)."""
    if inputs is None:
        return {}
    if not isinstance(inputs, Mapping):
        raise InputError(
            msg(
                "inputs must be a mapping of name -> value (a dict), not {inputs}",
                inputs=_shown(inputs),
            )
        )
    return dict(inputs)


def check_wrt(wrt: Any) -> list[str] | None:
    """The ``wrt`` argument: None (every input), one input name, or an iterable of names."""
    if wrt is None:
        return None
    if isinstance(wrt, str):
        return [wrt]  # one name; iterating it would give its letters
    try:
        names = list(wrt)
    except TypeError:
        raise InputError(
            msg("wrt must be a list of input names (strings), not {wrt}", wrt=_shown(wrt))
        ) from None
    for name in names:
        if not isinstance(name, str):
            raise InputError(
                msg("wrt must hold input names (strings), not {name}", name=_shown(name))
            )
    return list(dict.fromkeys(normalize_name(name) for name in names))


def _check_limit(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(
            msg("{what} must be a number, not {value}", what=what, value=_shown(value))
        )
    try:
        v = float(value)
    except OverflowError:  # an int beyond any float (10**400)
        v = math.inf
    if not math.isfinite(v) or v < 0:
        raise InputError(
            msg("{what} must be a finite number >= 0, not {value}", what=what, value=_shown(value))
        )
    return v


def check_clipping(clip_norm: Any, clip_value: Any, norm_type: Any) -> tuple[Any, Any, float]:
    """``clip_norm``, ``clip_value`` and the norm's ``p``, checked (at most one of the two
    clippings), as every evaluation takes them."""
    clip_norm = _check_limit(clip_norm, "clip_norm")
    clip_value = _check_limit(clip_value, "clip_value")
    if clip_norm is not None and clip_value is not None:
        raise InputError(msg("clip_norm and clip_value cannot be used together: choose one"))
    return clip_norm, clip_value, check_norm_type(norm_type)


def _input_values(given: dict[Any, Any]) -> dict[str, Any]:
    """The inputs by name, each name as Python reads an identifier (NFKC, see
    ``language.normalize_name``): this is where every input name enters, from the command
    line, a JSON request or the API. Two names that are one once normalised are an error."""
    raw: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for given_name, v in given.items():
        if not isinstance(given_name, str) or not given_name.isidentifier():
            raise InputError(
                msg(
                    "input name {given_name} is not a valid name (an identifier)",
                    given_name=_shown(given_name),
                )
            )
        name = normalize_name(given_name)
        if name in FUNCTIONS:
            raise NamingError(
                msg("an input cannot be named `{name}`: that is a function", name=name)
            )
        if name in raw:
            raise InputError(
                msg(
                    "the inputs {spelling} and {spelling2} are one name, `{name}`, as Python "
                    "reads identifiers (Unicode NFKC): give it once",
                    spelling=_spelling(spelled[name]),
                    spelling2=_spelling(given_name),
                    name=shorten(name),
                )
            )
        raw[name] = v.data if isinstance(v, E.Tensor) else v
        spelled[name] = given_name
    return raw


def _spelling(name: str) -> str:
    """A name and, when short, its code points: two spellings that look alike differ here."""
    if len(name) > 8:
        return f"`{shorten(name)}`"
    return f"`{name}` ({' '.join(f'U+{ord(c):04X}' for c in name)})"


@dataclass
class Setup:
    """A parsed program with checked input values: what every command starts from."""

    program: Program
    values: dict[str, np.ndarray]
    wanted: list[str]
    dtype: str

    def leaves(self) -> dict[str, E.Tensor]:
        """Fresh leaf tensors (sharing the values), those in ``wanted`` requiring grad."""
        leaves = {}
        for name, v in self.values.items():
            leaf = E.const(v, requires_grad=name in self.wanted)
            leaf.label = name
            leaves[name] = leaf
        return leaves


def prepare(
    expr: str,
    inputs: Mapping[str, Any] | None,
    *,
    wrt: Iterable[str] | None = None,
    dtype: Any = "float64",
    max_elements: int = E.DEFAULT_MAX_ELEMENTS,
    max_program_chars: int = DEFAULT_MAX_PROGRAM_CHARS,
    copy: bool = True,
) -> Setup:
    """Parse ``expr`` (cached), check the input names, ``wrt`` and values (arrays copied,
    or with ``copy=False`` borrowed as read-only views where their dtype and layout allow)."""
    from .io import lazy_value, value_from_json

    dtype = check_dtype(dtype)
    check_limit_value(max_elements, "max_elements")
    check_limit_value(max_program_chars, "max_program_chars")
    if not isinstance(expr, str):
        raise InputError(msg("expr must be a string, not {expr}", expr=_shown(expr)))
    check_program_length(expr, max_program_chars)
    raw = _input_values(check_inputs(inputs))
    names = check_wrt(wrt)
    wanted = list(raw) if names is None else names
    for name in wanted:
        if name not in raw:
            raise NamingError(
                msg(
                    "--wrt names `{name}`, which is not an input{suggest}",
                    name=shorten(name),
                    suggest=suggest(name, raw),
                )
            )
    with E.no_cycle_collection():
        program = compile_program(expr)
    lazy = E.backend.OTHER_ARRAYS  # another backend's arrays stay lazy (gradcli.lazy)
    values = {
        name: lazy_value(v, name=name, dtype=dtype, max_elements=max_elements)
        if lazy and isinstance(v, lazy)
        else value_from_json(v, name=name, dtype=dtype, max_elements=max_elements, copy=copy)
        for name, v in raw.items()
    }
    return Setup(program, values, wanted, dtype)


def evaluate(
    expr: str,
    inputs: Mapping[str, Any] | None = None,
    *,
    wrt: Iterable[str] | None = None,
    grad_output: Any = None,
    clip_norm: float | None = None,
    norm_type: Any = 2.0,
    clip_value: float | None = None,
    dtype: Any = "float64",
    seed: int = 0,
    max_elements: int = E.DEFAULT_MAX_ELEMENTS,
    max_program_chars: int = DEFAULT_MAX_PROGRAM_CHARS,
    id: Any = None,
    plans: Plans | None = None,
    backend: str = "numpy",
    chunks: Any = None,
    scheduler: str | None = None,
    copy: bool = True,
) -> Result:
    """Evaluate ``expr`` on ``inputs`` and backpropagate, as ``gradcli eval`` does.

    ``inputs`` maps names to numbers, nested lists or arrays. A non-scalar output without
    ``grad_output`` is reduced with ``sum`` first (``Result.reduction == "sum"``), as the
    tutorial's ``z.sum().backward()``. Errors raise subclasses of ``GradcliError``.
    ``plans``: where the plans of programs evaluated before are kept (:class:`Plans`, as
    :func:`compile` and ``batch`` keep them); the same numbers, to the last bit.
    ``backend="dask"``: evaluated in chunks (``chunks`` bytes each) on Dask's threads or
    the ``scheduler`` (``local:N``, an address), as :func:`gradcli.lazy.evaluate` does
    (docs/dask.md); inputs may then be Dask arrays. ``copy=False``: an input that is a
    C-contiguous array of ``dtype`` is read where it is, not copied (``Result.inputs`` holds
    a read-only view of it), as :func:`from_numpy` shares memory.

    >>> r = evaluate("a*b+b", {"a": [3, 4], "b": [5, 6]})
    >>> r.value.tolist(), r.grads["a"].tolist(), r.grads["b"].tolist()
    ([20.0, 30.0], [5.0, 6.0], [4.0, 5.0])
    """
    if backend != "numpy":
        from . import lazy

        lazy.check_backend(backend)
        return lazy.evaluate(
            expr, inputs, wrt=wrt, grad_output=grad_output, clip_norm=clip_norm,
            norm_type=norm_type, clip_value=clip_value, dtype=dtype, seed=seed,
            max_elements=max_elements, max_program_chars=max_program_chars, id=id,
            chunks=chunks, scheduler_address=scheduler,
        )  # fmt: skip
    if chunks is not None or scheduler is not None:
        raise InputError(msg("chunks and scheduler go with backend='dask'"))
    seed = check_seed(seed)
    clip_norm, clip_value, p = check_clipping(clip_norm, clip_value, norm_type)
    setup = prepare(
        expr,
        inputs,
        wrt=wrt,
        dtype=dtype,
        max_elements=max_elements,
        max_program_chars=max_program_chars,
        copy=copy,
    )
    with E.computation(max_elements) as fp:
        run = None if plans is None else plans.run(setup, grad_output, seed, max_elements, fp)
        if run is None:
            run = _fresh(setup, grad_output, seed, max_elements)
        # still counted: clipping float32 gradients can overflow too
        clip = _clip(run, clip_norm, clip_value, p)
    finite = run.finite
    if finite and clip is not None and not math.isfinite(clip.get("scale", 1.0)):
        finite = None  # a nan norm scaled every gradient to nan: what was finite is not
    return _finish(expr, setup, run, clip, fp, id, finite)


@dataclass
class _Run:
    """What the engine gives for one evaluation: the output, the inputs' gradients (None
    for those not asked for), the bindings' values and gradients."""

    value: np.ndarray
    grads: dict[str, np.ndarray | None]
    intermediates: dict[str, tuple[np.ndarray, np.ndarray | None]]
    reduction: str | None
    literal_overflow: bool
    #: what is known to be all finite without looking (see _finish), by "output" or name
    finite: dict[str, bool] | None = None


def _grad_output(grad_output: Any, setup: Setup, max_elements: int) -> np.ndarray:
    from .io import value_from_json

    return value_from_json(
        grad_output, name="grad_output", dtype=setup.dtype, max_elements=max_elements
    )


def _root(out: E.Tensor, g: np.ndarray | None) -> tuple[E.Tensor, str | None]:
    """What backward starts from: the output, or its sum (the implicit reduction)."""
    if g is not None:
        if g.shape != out.shape:
            raise ShapeError(
                msg(
                    "grad_output has shape {shape} but the output has shape {shape2}",
                    shape=g.shape,
                    shape2=out.shape,
                )
            )
        return out, None
    if out.ndim > 0:
        return E.sum(out), "sum"
    return out, None


def _fresh(setup: Setup, grad_output: Any, seed: int, max_elements: int) -> _Run:
    """One evaluation by the engine: the program run on leaf tensors, then backward."""
    leaves = setup.leaves()
    ev = setup.program.run(leaves, dtype=setup.dtype, seed=seed)
    out = ev.output
    g = None if grad_output is None else _grad_output(grad_output, setup, max_elements)
    root, reduction = _root(out, g)
    if root.requires_grad:
        root.backward(g)
    grads: dict[str, np.ndarray | None] = {}
    for name, leaf in leaves.items():
        if name not in setup.wanted:
            grads[name] = None
        else:
            grads[name] = leaf.grad.data if leaf.grad is not None else np.zeros_like(leaf.data)
    intermediates: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
    for name, t in ev.bindings.items():
        if t.requires_grad:
            g_b = t.grad.data if t.grad is not None else np.zeros_like(t.data)
            if t.is_leaf:  # `h = x` binds the input itself: keep its grad apart from clipping
                g_b = g_b.copy()
        else:
            g_b = None
        intermediates[name] = (t.data, g_b)
    return _Run(out.data, grads, intermediates, reduction, ev.literal_overflow)


def _clip(
    run: _Run, clip_norm: float | None, clip_value: float | None, p: float
) -> dict[str, float] | None:
    """Clip the asked-for gradients in place, as torch's clip_grad_norm_ / _value_."""
    asked = [g for g in run.grads.values() if g is not None]
    if clip_norm is not None:
        total, scale = E.clip_by_norm(asked, clip_norm, p)
        return {"max_norm": clip_norm, "norm_type": p, "total_norm": total, "scale": scale}
    if clip_value is not None:
        E.clip_by_value(asked, clip_value)
        return {"clip_value": clip_value}
    return None


def _finish(
    expr: str,
    setup: Setup,
    run: _Run,
    clip: dict[str, float] | None,
    fp: Any,
    id: Any,
    finite: dict[str, bool] | None = None,
) -> Result:
    """The Result, with its notes and warnings. ``finite``: whether the output
    (``"output"``) and each gradient (by input name) is all finite, where the caller knows
    (an evaluation on Dask learns it as it writes them: gradcli.lazy; a replay's fused
    runs as they make them); the others are looked at. Clipping, done before, keeps a
    finite gradient finite (evaluate passes no claims when a nan norm scaled them)."""
    warnings = fp.messages()
    notes: list[str] = []
    if run.reduction == "sum":
        notes.append(
            msg(
                "the output has shape {shape}: gradients are those of sum(output), as "
                "z.sum().backward() (give grad_output for a vector-Jacobian product)",
                shape=run.value.shape,
            )
        )
    if clip is not None:
        notes.append(_clip_note(clip))
    if run.literal_overflow:
        warnings.append(msg("a number in the program is too large for a float and became inf"))
    known = finite or {}
    if not (known["output"] if "output" in known else E.all_finite(run.value)):
        warnings.append(msg("the output has non-finite values (nan or inf)"))
    bad = [
        n
        for n, g in run.grads.items()
        if g is not None and not (known[n] if n in known else E.all_finite(g))
    ]
    if bad:
        warnings.append(msg("non-finite gradient for {names}", names=", ".join(bad)))

    return Result(
        expr=expr,
        value=run.value,
        inputs=setup.values,
        grads=run.grads,
        intermediates=run.intermediates,
        reduction=run.reduction,
        clip=clip,
        id=id,
        warnings=warnings,
        notes=notes,
    )


def _clip_note(clip: dict[str, float]) -> Message:
    """What clipping did, in a sentence (the table's caption says it with --precision)."""
    if "clip_value" in clip:
        v = abs(float(clip["clip_value"]))
        return msg("gradients clamped to [-{v:.6g}, {v:.6g}]", v=v)
    p, total, max_norm = clip["norm_type"], clip["total_norm"], clip["max_norm"]
    if float(clip["scale"]) < 1.0:
        return msg(
            "gradients clipped: total {p:.6g}-norm {total:.6g} > max_norm {max_norm:.6g}, "
            "scaled by {scale:.6g}",
            p=p,
            total=total,
            max_norm=max_norm,
            scale=clip["scale"],
        )
    return msg(
        "gradients not clipped: total {p:.6g}-norm {total:.6g} <= max_norm {max_norm:.6g}",
        p=p,
        total=total,
        max_norm=max_norm,
    )


REQUEST_FIELDS = (
    "expr", "inputs", "wrt", "grad_output", "clip_norm", "norm_type", "clip_value", "id",
    "seed", "dtype",
)  # fmt: skip


def request_kwargs(request: Any) -> dict[str, Any]:
    """A JSON request (docs/json.md) as keyword arguments of :func:`evaluate`.

    Unknown fields are an error that names them: a typo must not be silently ignored.
    Values in a request are numbers and nested lists, never file paths.
    """
    if not isinstance(request, dict):
        raise InputError(msg('a request must be a JSON object with at least "expr" and "inputs"'))
    unknown = [k for k in request if k not in REQUEST_FIELDS]
    if unknown:
        hints = "".join(suggest(str(k), REQUEST_FIELDS) for k in unknown)
        shown = ", ".join(repr(str(k)[:40]) for k in unknown[:5])
        raise InputError(msg("unknown request field {shown}{hints}", shown=shown, hints=hints))
    if not isinstance(request.get("expr"), str):
        raise InputError(msg('a request needs "expr", a string'))
    if "inputs" not in request or not isinstance(request["inputs"], dict):
        raise InputError(msg('a request needs "inputs", an object of name -> value'))
    kwargs = {k: v for k, v in request.items() if v is not None}
    kwargs["id"] = request.get("id")
    wrt = kwargs.get("wrt")
    if wrt is not None and (not isinstance(wrt, list) or not all(isinstance(n, str) for n in wrt)):
        raise InputError(msg('"wrt" must be a list of input names'))
    check_seed(kwargs.get("seed", 0))
    return kwargs


def constant_value(
    text: str,
    *,
    dtype: Any = "float64",
    seed: int = 0,
    max_elements: int = E.DEFAULT_MAX_ELEMENTS,
    max_program_chars: int = DEFAULT_MAX_PROGRAM_CHARS,
) -> np.ndarray:
    """The value of a program that uses no inputs (``linspace(0, pi, 5)``, ``randn(3)``)."""
    check_program_length(text, max_program_chars)
    program = compile_program(text)
    missing = sorted(program.free_names())
    if missing:
        raise NamingError(
            msg("it uses `{missing}`, which has no value", missing=shorten(missing[0]))
        )
    with E.computation(max_elements):
        return program.run({}, dtype=check_dtype(dtype), seed=seed).output.data


def as_gradcli_error(exc: BaseException) -> GradcliError:
    """Any exception as the typed error a user sees (bugs become a one-line internal error)."""
    if isinstance(exc, GradcliError):
        return exc
    if isinstance(exc, RecursionError):
        return InvalidValueError(msg("the program is nested too deeply to evaluate"))
    if isinstance(exc, MemoryError):
        return LimitError(msg("out of memory: the computation is too large"))
    return InvalidValueError(
        msg(
            "internal error: {name}: {exc} (run with --debug for details)",
            name=type(exc).__name__,
            exc=exc,
        )
    )


def request_id(request: Any) -> Any:
    """The ``id`` of a request, echoed back even when the request itself is bad."""
    return request.get("id") if isinstance(request, dict) else None


__all__ = ["FUNCTIONS", "REQUEST_FIELDS", "Result", "evaluate", "request_kwargs"]
