"""Einstein summation: ``einsum("ij,jk->ik", a, b)`` as torch.einsum and NumPy's einsum read
it (docs/language.md, "A few functions in detail").

The subscripts are read and checked here, then every operand is *cleaned* by ordinary
primitives before one ``einsum`` primitive contracts them:

- a dimension of length 1 whose subscript is longer elsewhere (broadcasting) is squeezed
  away (``reshape``);
- a subscript repeated in one operand (``"ii->i"``) takes that operand's diagonal
  (``getitem``, whose rule puts the gradient back on the diagonal);
- a subscript found in one operand only and not in the output is summed out (``sum``).

After that every subscript of an operand appears once in it and somewhere else too (in the
output or another operand), and the gradient of operand k is itself one einsum: of ``g``
and the other operands, into operand k's subscripts. The same rule, run on tensors, is
differentiable (``create_graph``), and on Dask arrays is Dask's einsum.
"""

from __future__ import annotations

import functools
import string
from collections.abc import Sequence
from typing import Any

from ...errors import InvalidValueError, ShapeError, shorten
from ...i18n import Message, msg
from ..backend import NUMPY, on_data
from ..registry import Primitive, primitive, public
from ..shapes import broadcast_shape
from ..state import check_size
from ..tensor import Tensor, lift, record
from .indexing import getitem
from .reduce import sum
from .shape import reshape, transpose

_LETTERS = string.ascii_letters  # a-z then A-Z: the subscripts
_ALLOWED = set(_LETTERS) | set(",.->")
_DOC = (
    "d operand k = einsum(output,others->k) of g and the other operands; a repeated "
    "subscript puts g on the diagonal, a summed-out one broadcasts it"
)


def _ordinal(i: int) -> Message:
    return msg("operand {n}", n=i + 1)


# --- reading the subscripts ---------------------------------------------------------------


def _term(text: str, i: int | None) -> tuple[list[str], bool, int]:
    """The labels of one term, whether it has ``...`` and where (its position among the
    labels)."""
    what = _ordinal(i) if i is not None else "the output"
    if text.count("...") > 1:
        raise InvalidValueError(
            msg("einsum: '...' appears twice in the subscripts of {what}", what=what)
        )
    before, dots, after = text.partition("...")
    if "." in before or "." in after:
        raise InvalidValueError(
            msg("einsum: a '.' in the subscripts of {what} is not part of '...'", what=what)
        )
    return list(before + after), bool(dots), len(before)


def parse(
    subscripts: str, shapes: Sequence[tuple[int, ...]]
) -> tuple[list[str], str, dict[str, int]]:
    """The terms and the output with ``...`` written out in letters of their own, and the
    size of every letter; every check is made here, before anything is computed."""
    if not isinstance(subscripts, str):
        raise InvalidValueError(
            msg(
                'einsum: the subscripts come first, as a string such as "ij,jk->ik" '
                "(torch's sublist form is not supported)"
            )
        )
    text = "".join(subscripts.split())  # white space is allowed anywhere, as torch allows
    shown = shorten(subscripts)
    bad = next((c for c in text if c not in _ALLOWED), None)
    if bad is not None:
        raise InvalidValueError(
            msg(
                'einsum: invalid character {bad!r} in the subscripts "{shown}"; '
                "subscripts are the letters a-z and A-Z, with ',', '->' and '...'",
                bad=bad,
                shown=shown,
            )
        )
    if text.count("->") > 1:
        raise InvalidValueError(msg("einsum: \"{shown}\" has more than one '->'", shown=shown))
    explicit = "->" in text
    lhs, _, rhs = text.partition("->")
    if "-" in lhs or ">" in lhs or "-" in rhs or ">" in rhs or "," in rhs:
        raise InvalidValueError(
            msg(
                "einsum: \"{shown}\" has a '-', '>' or ',' out of place; write the "
                "operands' subscripts separated by ',', then '->' and the output's",
                shown=shown,
            )
        )
    texts = lhs.split(",")
    if len(texts) != len(shapes):
        raise InvalidValueError(
            msg(
                'einsum: the subscripts "{shown}" name {n_texts} operands, got {n_shapes}',
                shown=shown,
                n_texts=len(texts),
                n_shapes=len(shapes),
            )
            if len(texts) != 1
            else msg(
                'einsum: the subscripts "{shown}" name 1 operand, got {n_shapes}',
                shown=shown,
                n_shapes=len(shapes),
            )
        )
    terms = [_term(t, i) for i, t in enumerate(texts)]

    # the dimensions of each operand that '...' stands for, broadcast together
    ellipsis: tuple[int, ...] = ()
    for i, ((labels, dots, _), shape) in enumerate(zip(terms, shapes, strict=True)):
        if (len(labels) != len(shape)) if not dots else len(labels) > len(shape):
            raise ShapeError(
                msg(
                    "einsum: {ordinal} has {n_shape} dimensions but its subscripts "
                    '"{texts}" name {n_labels}',
                    ordinal=_ordinal(i),
                    n_shape=len(shape),
                    texts=texts[i],
                    n_labels=len(labels),
                )
                if len(shape) != 1
                else msg(
                    'einsum: {ordinal} has 1 dimension but its subscripts "{texts}" name '
                    "{n_labels}",
                    ordinal=_ordinal(i),
                    texts=texts[i],
                    n_labels=len(labels),
                )
            )
        if dots:
            part = shape[terms[i][2] : terms[i][2] + len(shape) - len(labels)]
            try:
                ellipsis = broadcast_shape(ellipsis, part)
            except ValueError:
                raise ShapeError(
                    msg(
                        "einsum: the dimensions '...' stands for do not broadcast: {part} in "
                        "{ordinal} and {ellipsis} before it",
                        part=part,
                        ordinal=_ordinal(i),
                        ellipsis=ellipsis,
                    )
                ) from None
    used = {c for labels, _, _ in terms for c in labels}
    fresh = [c for c in _LETTERS if c not in used]
    if len(ellipsis) > len(fresh):
        raise ShapeError(msg("einsum: more than {n} distinct dimensions", n=len(_LETTERS)))
    dots_letters = fresh[: len(ellipsis)]

    def spelled(labels: list[str], dots: bool, at: int, n: int) -> str:
        if not dots:
            return "".join(labels)
        return "".join(labels[:at] + dots_letters[len(dots_letters) - n :] + labels[at:])

    full = [
        spelled(labels, dots, at, len(shape) - len(labels))
        for (labels, dots, at), shape in zip(terms, shapes, strict=True)
    ]
    if explicit:
        labels, dots, at = _term(rhs, None)
        if len(set(labels)) != len(labels):
            twice = next(c for c in labels if labels.count(c) > 1)
            raise InvalidValueError(
                msg("einsum: the output names subscript {twice} twice", twice=twice)
            )
        missing = next((c for c in labels if c not in used), None)
        if missing is not None:
            raise InvalidValueError(
                msg(
                    "einsum: the output's subscript {missing} is not a subscript of any operand",
                    missing=missing,
                )
            )
        # without '...' in the output, the dimensions it stands for are summed, as torch
        # sums them (NumPy refuses)
        out = spelled(labels, dots, at, len(ellipsis)) if dots else "".join(labels)
    else:
        # implicit mode, as torch and NumPy: '...' first, then the subscripts that appear
        # exactly once, in alphabetical order (A-Z before a-z)
        counts: dict[str, int] = {}
        for labels, _, _ in terms:
            for c in labels:
                counts[c] = counts.get(c, 0) + 1
        out = "".join(dots_letters) + "".join(sorted(c for c, k in counts.items() if k == 1))

    sizes: dict[str, int] = {}
    first: dict[str, int] = {}  # the operand that gave a subscript its size
    for i, (term, shape) in enumerate(zip(full, shapes, strict=True)):
        seen: dict[str, int] = {}
        for c, n in zip(term, shape, strict=True):
            if c in seen and seen[c] != n:
                raise ShapeError(
                    msg(
                        "einsum: subscript {c} is repeated in {ordinal} with sizes {seen} and {n}",
                        c=c,
                        ordinal=_ordinal(i),
                        seen=seen[c],
                        n=n,
                    )
                )
            seen[c] = n
            m = sizes.get(c)
            if m is None or m == 1:
                sizes[c], first[c] = n, i
            elif n not in (1, m):  # (the dimensions of '...' were checked above)
                raise ShapeError(
                    msg(
                        "einsum: subscript {c} has size {m} in {ordinal} and {n} in {ordinal2}",
                        c=c,
                        m=m,
                        ordinal=_ordinal(first[c]),
                        n=n,
                        ordinal2=_ordinal(i),
                    )
                )
    return full, out, sizes


# --- the primitive ------------------------------------------------------------------------


def _contract(xp: Any, subscripts: str, *operands: Any) -> Any:
    """``xp.einsum``: NumPy's with its contraction order chosen (BLAS where it can) when
    there are several operands; the tensor namespace's is :func:`einsum` itself."""
    if len(operands) > 1 and not any(isinstance(o, Tensor) for o in operands):
        return xp.einsum(subscripts, *operands, optimize=True)
    return xp.einsum(subscripts, *operands)


def _forward(xp: Any, *operands: Any, subscripts: str) -> Any:
    return _contract(xp, subscripts, *operands)


def _vjp(k: int, xp: Any, g: Any, ans: Any, ctx: Any, *saved: Any) -> Any:
    terms, out = ctx
    others = [i for i in range(len(terms)) if i != k]
    subs = ",".join([out, *(terms[i] for i in others)]) + "->" + terms[k]
    return _contract(xp, subs, g, *(saved[i] for i in others))


@functools.cache
def _einsum_primitive(n: int) -> Primitive:
    """The contraction of ``n`` clean operands (see the module's docstring)."""
    names = tuple(f"x{i}" for i in range(n))
    rules = [functools.partial(_vjp, k) for k in range(n)]
    saves = names if n > 1 else ()  # one operand: its gradient is g with axes moved
    return primitive("einsum", _forward, *rules, saves=saves, inputs=names, doc=_DOC)


_einsum_primitive(1)  # OPS has einsum from the start


# --- cleaning the operands ----------------------------------------------------------------


def _squeeze_broadcast(t: Tensor, term: str, sizes: dict[str, int]) -> tuple[Tensor, str]:
    """Dimensions of length 1 that broadcast against a longer one elsewhere, removed."""
    shape = t.data.shape
    keep = [i for i, (c, n) in enumerate(zip(term, shape, strict=True)) if n == sizes[c]]
    if len(keep) == len(term):
        return t, term
    return reshape(t, tuple(shape[i] for i in keep)), "".join(term[i] for i in keep)


def _diagonals(t: Tensor, term: str) -> tuple[Tensor, str]:
    """Each subscript repeated in ``term``: the diagonal over its axes, taken as the first
    axis (``getitem``, whose gradient lies on that diagonal)."""
    while len(set(term)) != len(term):
        c = next(c for c in term if term.count(c) > 1)
        axes = [i for i, d in enumerate(term) if d == c]
        rest = [i for i, d in enumerate(term) if d != c]
        if axes + rest != list(range(len(term))):
            t = transpose(t, axes + rest)
        # an integer array on every axis (the other axes' aranges broadcast against the
        # diagonal's), the form Dask's scatter writes too
        shape = t.data.shape
        k, out_nd = len(axes), len(rest) + 1  # the result: the diagonal, then the rest
        key = []
        for a, n in enumerate(shape):
            at = 0 if a < k else a - k + 1  # the result's axis this one becomes
            key.append(
                NUMPY.reshape(NUMPY.arange(n), [-1 if j == at else 1 for j in range(out_nd)])
            )
        t = getitem(t, tuple(key))
        term = c + "".join(term[i] for i in rest)
    return t, term


def _summed_out(t: Tensor, term: str, elsewhere: set[str]) -> tuple[Tensor, str]:
    """The subscripts found nowhere else (not in another operand, not in the output),
    summed out."""
    axes = tuple(i for i, c in enumerate(term) if c not in elsewhere)
    if not axes:
        return t, term
    return sum(t, axis=axes), "".join(c for c in term if c in elsewhere)


@public(None, 'Einstein summation: einsum("ij,jk->ik", a, b)', derivative=_DOC, method=False)
def einsum(subscripts: str, *operands: Tensor) -> Tensor:
    """torch.einsum: the subscripts, then the operands (or one list of them). Subscripts
    are letters; ``...`` stands for broadcast dimensions; without ``->`` the output is
    ``...`` then the subscripts that appear once, in alphabetical order (implicit mode)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    like = next((o for o in operands if isinstance(o, Tensor)), None)
    tensors = [lift(o, like) for o in operands]
    terms, out, sizes = parse(subscripts, [t.data.shape for t in tensors])
    check_size(tuple(sizes[c] for c in out), "einsum")

    cleaned = [_squeeze_broadcast(t, term, sizes) for t, term in zip(tensors, terms, strict=True)]
    cleaned = [_diagonals(t, term) for t, term in cleaned]
    done: list[tuple[Tensor, str]] = []
    for i, (t, term) in enumerate(cleaned):
        elsewhere = set(out).union(*(set(s) for j, (_, s) in enumerate(cleaned) if j != i))
        done.append(_summed_out(t, term, elsewhere))
    ts = [t for t, _ in done]
    terms = [term for _, term in done]
    subs = ",".join(terms) + "->" + out
    prim = _einsum_primitive(len(ts))
    redo = on_data(_forward, subscripts=subs)
    arrays = [t.data for t in ts]
    return record(redo(*arrays), prim, tuple(ts), prim.saved(arrays), (terms, out), redo)
