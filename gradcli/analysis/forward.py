"""Forward mode and Hessian-vector products of a program: :func:`jvp` (``gradcli jvp``) and
:func:`hvp` (``gradcli hessian --vector``) (docs/commands.md, "jvp", "hessian"; their JSON
in docs/json.md; docs/api.md, "Forward mode and Hessian-vector products").

Both are built on the engine's reverse mode (:mod:`gradcli.autograd.functional`):

* ``jvp``: the **double-VJP**. The backward pass from a dummy upstream gradient ``v`` is
  recorded (``create_graph=True``): ``u = Jᵀ v``, linear in ``v``; the backward pass of
  ``u`` with the tangents as its seed is ``J t``. Three passes (the forward run and two
  backward passes), whatever the sizes; at a kink each function's derivative is the one
  reverse mode uses (docs/conventions.md).
* ``hvp``: the gradient recorded, then the gradient of ``grad · v``: ``H v`` in three
  passes, with memory a few times the inputs', never the n × n Hessian.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import autograd as E
from ..api import Setup, check_inputs, prepare
from ..autograd.functional import directional, hessian_vector
from ..errors import InputError, NamingError, ShapeError, shorten
from ..i18n import msg
from ..io import json_array
from ..language import DEFAULT_MAX_PROGRAM_CHARS, normalize_name, suggest
from .derivatives import DEFAULT_MAX_PASSES, _check_passes, _scalar_output


def _entry(a: np.ndarray) -> dict[str, Any]:
    return {"shape": list(a.shape), "value": json_array(a)}


def _named_arrays(
    given: Any, setup: Setup, allowed: Iterable[str], what: str, option: str, max_elements: int
) -> dict[str, np.ndarray]:
    """The tangents (or the vector) by input name: each name an input of ``allowed``, each
    value of its input's shape and converted to the program's dtype."""
    from ..io import value_from_json

    allowed = list(allowed)
    arrays: dict[str, np.ndarray] = {}
    for given_name, v in check_inputs(given).items():
        if not isinstance(given_name, str) or not given_name.isidentifier():
            raise InputError(
                msg(
                    "{option} names {given_name!r}, which is not a valid input name",
                    option=option,
                    given_name=given_name,
                )
            )
        name = normalize_name(given_name)
        if name not in allowed:
            where = msg("an input") if name not in setup.values else msg("one of --wrt")
            raise NamingError(
                msg(
                    "{option} names `{name}`, which is not {where}{suggest}",
                    option=option,
                    name=shorten(name),
                    where=where,
                    suggest=suggest(name, allowed),
                )
            )
        if name in arrays:
            raise InputError(
                msg("{option} gives `{name}` twice", option=option, name=shorten(name))
            )
        value = value_from_json(
            v.data if isinstance(v, E.Tensor) else v,
            name=f"the {what} of {shorten(name)}",
            dtype=setup.dtype,
            max_elements=max_elements,
        )
        shape = setup.values[name].shape
        if value.shape != shape:
            raise ShapeError(
                msg(
                    "the {what} of `{name}` has shape {shape}, but `{name}` has shape "
                    "{shape2}: they must be the same",
                    what=what,
                    name=shorten(name),
                    shape=value.shape,
                    shape2=shape,
                )
            )
        arrays[name] = value
    return arrays


# --------------------------------------------------------------------------------------
# jvp
# --------------------------------------------------------------------------------------


@dataclass
class JVP:
    expr: str
    value: np.ndarray
    #: every input's value, in order (what the table shows)
    inputs: dict[str, np.ndarray]
    #: the tangent of each input that has one; the others are held fixed
    tangents: dict[str, np.ndarray]
    #: the directional derivative J t, shaped like the output
    jvp: np.ndarray
    #: floating-point warnings counted while computing (the CLI prints them on stderr)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "expr": self.expr,
            "output": _entry(self.value),
            "tangents": {name: _entry(t) for name, t in self.tangents.items()},
            "jvp": _entry(self.jvp),
        }


def jvp(
    expr: str,
    inputs: Mapping[str, Any] | None = None,
    tangents: Mapping[str, Any] | None = None,
    *,
    dtype: Any = "float64",
    seed: int = 0,
    max_elements: int = E.DEFAULT_MAX_ELEMENTS,
    max_program_chars: int = DEFAULT_MAX_PROGRAM_CHARS,
) -> JVP:
    """The output and its directional derivative ``J t = Σ_i ∂out/∂x_i · t_i`` along
    ``tangents`` (name → value, each of its input's shape); inputs without a tangent are
    held fixed. Forward mode by the double-VJP (see the module)."""
    given = check_inputs(tangents)
    if not given:
        raise InputError(
            msg(
                "jvp needs a tangent for at least one input (--tangent NAME=VALUE; in "
                "Python, tangents={name: value})"
            )
        )
    setup = prepare(
        expr, inputs, wrt=[], dtype=dtype,
        max_elements=max_elements, max_program_chars=max_program_chars,
    )  # fmt: skip
    ts = _named_arrays(given, setup, setup.values, "tangent", "--tangent", max_elements)
    setup.wanted = [name for name in setup.values if name in ts]
    with E.computation(max_elements) as fp:
        leaves = setup.leaves()
        out = setup.program.run(leaves, dtype=setup.dtype, seed=seed, retain=False).output
        wanted = [leaves[name] for name in setup.wanted]
        (derivative,) = directional([out], wanted, [ts[name] for name in setup.wanted])
    tangent_of = {name: ts[name] for name in setup.wanted}
    return JVP(expr, out.data, dict(setup.values), tangent_of, derivative, fp.messages())


# --------------------------------------------------------------------------------------
# hvp
# --------------------------------------------------------------------------------------


@dataclass
class HVP:
    expr: str
    value: np.ndarray
    wrt: list[str]
    #: every input's value, in order (what the table shows)
    inputs: dict[str, np.ndarray]
    #: the parts of v that were given (the other ``wrt`` inputs' parts are zero)
    vector: dict[str, np.ndarray]
    #: H v, one part per ``wrt`` input, shaped like it
    hvp: dict[str, np.ndarray]
    #: floating-point warnings counted while computing (the CLI prints them on stderr)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "expr": self.expr,
            "output": _entry(self.value),
            "wrt": self.wrt,
            "vector": {name: _entry(v) for name, v in self.vector.items()},
            "hvp": {name: _entry(h) for name, h in self.hvp.items()},
        }


def hvp(
    expr: str,
    inputs: Mapping[str, Any] | None = None,
    vector: Mapping[str, Any] | None = None,
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
) -> HVP:
    """``H v`` of a scalar output, ``H`` its Hessian with respect to the ``wrt`` inputs (all
    by default) and ``v`` the ``vector`` (name → value, each of its input's shape; a ``wrt``
    input it leaves out has a zero part): the gradient of ``grad · v``, one double backward,
    never the n × n matrix. NumPy backend only."""
    if backend != "numpy" or chunks is not None or scheduler is not None:
        from . import on_dask

        if on_dask.where(backend, chunks, scheduler) is not None:
            raise InputError(
                msg("hessian --vector runs on the NumPy backend only (give --backend numpy)")
            )
    given = check_inputs(vector)
    if not given:
        raise InputError(
            msg(
                "a Hessian-vector product needs the vector of at least one input "
                "(--vector NAME=VALUE; in Python, vector={name: value})"
            )
        )
    setup = prepare(
        expr, inputs, wrt=wrt, dtype=dtype,
        max_elements=max_elements, max_program_chars=max_program_chars,
    )  # fmt: skip
    vs = _named_arrays(given, setup, setup.wanted, "vector", "--vector", max_elements)
    _check_passes("hessian --vector", 3, max_passes)
    with E.computation(max_elements) as fp:
        leaves = setup.leaves()
        out = setup.program.run(leaves, dtype=setup.dtype, seed=seed, retain=False).output
        _scalar_output(out, "hessian --vector")
        wanted = [leaves[name] for name in setup.wanted]
        parts = hessian_vector(out, wanted, [vs.get(name) for name in setup.wanted])
    given_parts = {name: vs[name] for name in setup.wanted if name in vs}
    return HVP(
        expr, out.data, list(setup.wanted), dict(setup.values), given_parts,
        dict(zip(setup.wanted, parts, strict=True)), fp.messages(),
    )  # fmt: skip


__all__ = ["HVP", "JVP", "hvp", "jvp"]
