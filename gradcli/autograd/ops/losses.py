"""Losses as ``torch.nn.functional`` defines them, each reduced by ``reduction="mean"``
(the default), ``"sum"`` or ``"none"`` (docs/language.md, "Function calls"; the conventions at
awkward points are in docs/conventions.md).

Six are composed of primitives, so their first and second derivatives, their plans and
their evaluation on Dask are the primitives' (docs/engine.md, "Adding a primitive"):

* ``mse_loss``, ``l1_loss``, ``huber_loss``: of ``input - target``;
* ``binary_cross_entropy_with_logits``: torch's stable form,
  ``(1 - t) x + (1 + (pw - 1) t) softplus(-x)``;
* ``nll_loss`` and ``cross_entropy`` (``log_softmax`` first): a class index selects its
  element through ``where`` with a constant mask made from the indices, so a logit of
  ``-inf`` elsewhere in the row does no harm (``0 * -inf`` would be nan) and an index
  target has no gradient at all, as the condition of ``where`` has none.

``binary_cross_entropy`` is a primitive of its own: torch clamps both logarithms at -100
and divides its gradient by ``max(x (1 - x), 1e-12)``. A composition clamping with
``maximum`` would have torch's values but, where the clamp holds (``x`` = 0 or 1), a
gradient of 0 or nan (``0 * inf``) instead of torch's -+1e12.
"""

from __future__ import annotations

from typing import Any

from ...errors import InvalidValueError, ShapeError
from ...i18n import msg
from ..backend import NUMPY, backend_of, on_data
from ..registry import Primitive, primitive, public
from ..replay import opaque
from ..shapes import check_broadcast
from ..tensor import Tensor, const, lift, record
from .elementwise import abs, softplus, square, where
from .reduce import log_softmax, mean, sum
from .shape import reshape

_ndarray = NUMPY.ndarray
REDUCTIONS = ("mean", "sum", "none")


def check_reduction(name: str, reduction: Any) -> None:
    if reduction not in REDUCTIONS:
        shown = f'"{reduction}"' if isinstance(reduction, str) else repr(reduction)
        raise InvalidValueError(
            msg(
                '{name}: reduction must be "mean", "sum" or "none", not {shown}',
                name=name,
                shown=shown,
            )
        )


def reduced(loss: Tensor, reduction: str) -> Tensor:
    """``loss`` reduced as ``reduction`` says: its mean, its sum, or itself."""
    if reduction == "mean":
        return mean(loss)
    if reduction == "sum":
        return sum(loss)
    return loss


def _at(mask: Any) -> str:
    """``[i, j]``: where the first true element of ``mask`` is ('' for a 0-d mask)."""
    k = int(mask.reshape(-1).argmax())
    idx = []
    for s in reversed(mask.shape):
        k, r = divmod(k, s)
        idx.append(r)
    return f"[{', '.join(map(str, reversed(idx)))}]" if idx else ""


def _same_shape(name: str, x: Tensor, t: Tensor) -> None:
    if x.data.shape != t.data.shape:
        raise ShapeError(
            msg(
                "{name}: target has shape {shape} but input has shape {shape2}; they "
                "must be the same",
                name=name,
                shape=t.data.shape,
                shape2=x.data.shape,
            )
        )


def _weight_of(name: str, what: str, w: Any, x: Tensor) -> Tensor:
    """An elementwise weight that broadcasts to the input's shape without growing it."""
    w = lift(w, x)
    if check_broadcast(name, x.data.shape, w.data.shape) != x.data.shape:
        raise ShapeError(
            msg(
                "{name}: {what} of shape {shape} does not broadcast to the input's shape {shape2}",
                name=name,
                what=what,
                shape=w.data.shape,
                shape2=x.data.shape,
            )
        )
    return w


# ---- of the difference -----------------------------------------------------------------


@public(
    None,
    "mean squared error: (input - target)^2, reduced",
    derivative="2 (input - target) g to input (g / n for mean), the negative to target",
    method=False,
)
def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """``(input - target) ** 2`` reduced, as ``torch.nn.functional.mse_loss``; the two
    broadcast together (torch warns when their shapes differ)."""
    check_reduction("mse_loss", reduction)
    x = lift(input)
    return reduced(square(x - lift(target, x)), reduction)


@public(
    None,
    "mean absolute error: |input - target|, reduced",
    derivative="sign(input - target) g to input (0 where equal; g / n for mean), "
    "the negative to target",
    method=False,
)
def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """``|input - target|`` reduced, as ``torch.nn.functional.l1_loss``; its gradient is 0
    where ``input == target`` (``sign(0) = 0``, as torch)."""
    check_reduction("l1_loss", reduction)
    x = lift(input)
    return reduced(abs(x - lift(target, x)), reduction)


@public(
    None,
    "0.5 d^2 where |d| < delta, else delta (|d| - delta / 2); d = input - target",
    derivative="d g where |d| < delta, else delta sign(d) g, to input (g / n for mean); "
    "the negative to target",
    method=False,
)
def huber_loss(
    input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0
) -> Tensor:
    """Huber's loss as ``torch.nn.functional.huber_loss``: quadratic within ``delta`` of
    the target, linear beyond; ``delta`` must be positive."""
    check_reduction("huber_loss", reduction)
    delta = float(delta)
    if not delta > 0:
        raise InvalidValueError(
            msg("huber_loss: delta must be positive, not {delta:g}", delta=delta)
        )
    x = lift(input)
    d = x - lift(target, x)
    a = abs(d)
    return reduced(where(a < delta, square(d) * 0.5, (a - 0.5 * delta) * delta), reduction)


# ---- binary cross-entropy: a primitive, for torch's clamps ------------------------------


def _bce_forward(xp: Any, x: Any, t: Any) -> Any:
    """torch's ``(t - 1) max(log1p(-x), -100) - t max(log(x), -100)``, without taking the
    logarithm of 0 (no floating-point error at ``x = 0`` or ``x = 1``)."""
    log_x = xp.where(x == 0, -100.0, xp.maximum(xp.log(xp.where(x == 0, 1.0, x)), -100.0))
    log_1mx = xp.where(x == 1, -100.0, xp.maximum(xp.log1p(-xp.where(x == 1, 0.0, x)), -100.0))
    return (t - 1.0) * log_1mx - t * log_x


def _bce_checked(xp: Any, x: Any, t: Any) -> Any:
    """The forward pass, refusing what torch refuses: elements of input or target outside
    [0, 1] (nan too). Not on another backend (it would compute the arrays): there an input
    outside gives nan, and a target outside is taken as it is."""
    for what, a in (("input", x), ("target", t)):
        if isinstance(a, _ndarray):
            bad = ~((a >= 0) & (a <= 1))
            if bad.any():
                raise InvalidValueError(
                    msg(
                        "binary_cross_entropy: every element of {what} must be between 0 and 1; "
                        "{what}{at} is {reshape:g}",
                        what=what,
                        at=_at(bad),
                        reshape=float(a[bad].reshape(-1)[0]),
                    )
                )
    return _bce_forward(xp, x, t)


#: torch's floor of ``x (1 - x)`` in the gradient: 1e-12 as a float32 (9.99999996e-13),
#: so a gradient at x = 0 or 1 is -+1.0000000039958e12, torch's number
BCE_EPSILON = 9.999999960041972e-13

BCE = primitive(
    "binary_cross_entropy",
    _bce_forward,
    # torch's rules: the input's gradient divided by max(x (1 - x), eps), finite at 0
    # and 1; the target's -logit(x), unclamped
    lambda xp, g, ans, ctx, x, t: g * (x - t) / xp.maximum((1.0 - x) * x, BCE_EPSILON),
    lambda xp, g, ans, ctx, x, t: g * -xp.log(x / (1.0 - x)),
    saves=("x", "t"),
    inputs=("x", "t"),
    doc="g (x - t) / max(x (1 - x), 1e-12) to input, -g logit(x) to target "
    "(times weight; g / n for mean)",
)


@public(BCE, "-w (t log(x) + (1 - t) log(1 - x)), logs clamped at -100", method=False)
def binary_cross_entropy(
    prim: Primitive,
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    reduction: str = "mean",
) -> Tensor:
    """Binary cross-entropy of probabilities ``input`` (in [0, 1]) against ``target`` (in
    [0, 1], the same shape), as ``torch.nn.functional.binary_cross_entropy``: each
    logarithm clamped at -100, so ``x = 0`` or ``1`` gives at most 100 and a finite
    gradient; ``weight`` multiplies each element's loss (it broadcasts to the input)."""
    check_reduction("binary_cross_entropy", reduction)
    x = lift(input)
    t = lift(target, x)
    _same_shape("binary_cross_entropy", x, t)
    redo = on_data(_bce_checked)
    data = (x.data, t.data)
    loss = record(redo(*data), prim, (x, t), prim.saved(data), None, redo)
    if weight is not None:
        loss = loss * _weight_of("binary_cross_entropy", "weight", weight, x)
    return reduced(loss, reduction)


@public(
    None,
    "binary cross-entropy of logits: sigmoid inside, stable for large |x|",
    derivative="g ((1 + (pw - 1) t) sigmoid(x) - pw t) to input, "
    "g ((pw - 1) softplus(-x) - x) to target (pw = 1 without pos_weight; times weight, "
    "g / n for mean)",
    method=False,
)
def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    reduction: str = "mean",
    pos_weight: Tensor | None = None,
) -> Tensor:
    """``binary_cross_entropy(sigmoid(input), target)`` computed in torch's stable form
    ``(1 - t) x + (1 + (pw - 1) t) softplus(-x)``, as
    ``torch.nn.functional.binary_cross_entropy_with_logits``: ``pos_weight`` weighs the
    positive term (by class, along the last axis), ``weight`` each element's loss."""
    name = "binary_cross_entropy_with_logits"
    check_reduction(name, reduction)
    x = lift(input)
    t = lift(target, x)
    _same_shape(name, x, t)
    log_weight: Any = 1.0
    if pos_weight is not None:
        log_weight = (_weight_of(name, "pos_weight", pos_weight, x) - 1.0) * t + 1.0
    loss = (1.0 - t) * x + log_weight * softplus(-x)
    if weight is not None:
        loss = loss * _weight_of(name, "weight", weight, x)
    return reduced(loss, reduction)


# ---- class targets: nll_loss and cross_entropy ------------------------------------------


def _class_weight(name: str, weight: Any, x: Tensor, axis: int) -> Tensor | None:
    """``weight`` (one per class; None: none) shaped to broadcast along the class axis."""
    if weight is None:
        return None
    n = x.data.shape[axis]
    w = lift(weight, x)
    if w.data.shape != (n,):
        raise ShapeError(
            msg(
                "{name}: weight must have one element per class, shape ({n},); it has "
                "shape {shape}",
                name=name,
                n=n,
                shape=w.data.shape,
            )
        )
    return reshape(w, (n,) + (1,) * (x.data.ndim - axis - 1))


class _Classes:
    """What a target of class indices says, read once into constant masks (its values
    are read into Python: a plan cannot follow a target that depends on the inputs)."""

    def __init__(self, name: str, x: Tensor, target: Tensor, ignore_index: int) -> None:
        xd = x.data
        if xd.ndim == 0:
            raise ShapeError(msg("{name}: input must have a class axis; it is 0-d", name=name))
        self.axis = axis = 0 if xd.ndim == 1 else 1
        self.classes = n = xd.shape[axis]
        td = target.data
        if backend_of(td) is not NUMPY:
            raise backend_of(td).refuse(
                name, " for class indices given as an input (write them in the program)"
            )
        opaque(target, f"{name}'s class indices")
        if xd.ndim == 1:
            if td.shape not in ((), (1,)):
                raise ShapeError(
                    msg(
                        "{name}: input of shape {shape} is one sample of {n} classes; its target "
                        "is one class index (shape ()), not shape {shape2}",
                        name=name,
                        shape=xd.shape,
                        n=n,
                        shape2=td.shape,
                    )
                )
            td = td.reshape(())
        elif td.shape != xd.shape[:1] + xd.shape[2:]:
            raise ShapeError(
                msg(
                    "{name}: input of shape {shape} needs class indices of shape {shape2} "
                    "(or probabilities of its own shape), got shape {shape3}",
                    name=name,
                    shape=xd.shape,
                    shape2=xd.shape[:1] + xd.shape[2:],
                    shape3=td.shape,
                )
            )
        whole = NUMPY.isfinite(td) & (td == NUMPY.floor(td))
        if not whole.all():
            bad = ~whole
            raise InvalidValueError(
                msg(
                    "{name}: target{at} is {reshape:g}, not a class index (a whole number "
                    "from 0 to {n})",
                    name=name,
                    at=_at(bad),
                    reshape=float(td[bad].reshape(-1)[0]),
                    n=n - 1,
                )
            )
        self.valid = valid = td != ignore_index
        out = valid & ((td < 0) | (td >= n))
        if out.any():
            raise InvalidValueError(
                msg(
                    "{name}: target{at} is {reshape:g}, out of range for {n} classes (0 to "
                    "{n2}, or ignore_index {ignore_index})",
                    name=name,
                    at=_at(out),
                    reshape=float(td[out].reshape(-1)[0]),
                    n=n,
                    n2=n - 1,
                    ignore_index=ignore_index,
                )
            )
        self.all_valid = bool(valid.all())
        index = NUMPY.where(valid, td, 0.0).astype("int64")
        labels = NUMPY.arange(n).reshape((n,) + (1,) * (xd.ndim - axis - 1))
        #: the chosen element of each sample along the class axis (none where ignored)
        self.mask = (NUMPY.expand_dims(index, axis) == labels) & NUMPY.expand_dims(valid, axis)
        self.dtype = xd.dtype

    def weighed(self, w: Tensor | None) -> None:
        """Take the class weights ``w`` (None: all 1): each sample's negated weight
        ``-w[t]`` (0.0 where ignored) and the total weight of the samples that count, by
        which the mean divides, as torch's."""
        self.w = w
        if w is None:
            self.neg_w: Any = None
            self.total: Any = float(self.valid.sum())
        else:
            self.neg_w = sum(where(self.mask, -w, 0.0), axis=self.axis)
            self.total = -sum(self.neg_w)

    def nll(self, logp: Tensor, reduction: str) -> Tensor:
        """``-w[t] logp[t]`` per sample (0 where ignored), reduced."""
        picked = sum(where(self.mask, logp, 0.0), axis=self.axis)
        if self.neg_w is not None:
            loss = picked * self.neg_w
        elif self.all_valid:
            loss = -picked
        else:  # 0.0 (not -0.0) where ignored
            loss = picked * const(NUMPY.where(self.valid, -1.0, 0.0).astype(self.dtype))
        return sum(loss) / self.total if reduction == "mean" else reduced(loss, reduction)

    def smooth(self, logp: Tensor, reduction: str) -> Tensor:
        """torch's term of label smoothing: ``-sum(w logp)`` over the classes of each
        sample, 0 where ignored, reduced as the loss is."""
        s = -sum(logp if self.w is None else logp * self.w, axis=self.axis)
        if not self.all_valid:
            s = where(self.valid, s, 0.0)
        return sum(s) / self.total if reduction == "mean" else reduced(s, reduction)


def _label_smoothing(name: str, value: float) -> float:
    eps = float(value)
    if not 0.0 <= eps <= 1.0:
        raise InvalidValueError(
            msg("{name}: label_smoothing must be between 0 and 1, not {eps:g}", name=name, eps=eps)
        )
    return eps


@public(
    None,
    "negative log-likelihood of class indices, from log-probabilities",
    derivative="-w[t] g at each target's class, 0 elsewhere (g / total weight for mean); "
    "none to the class indices",
    method=False,
)
def nll_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    ignore_index: int = -100,
    reduction: str = "mean",
) -> Tensor:
    """``-weight[t] * input[t]`` per sample, as ``torch.nn.functional.nll_loss``: input
    ``(N, C)`` (or ``(C,)``, or ``(N, C, d1, ...)``) of log-probabilities, target the class
    indices ``(N,)`` (``()``, ``(N, d1, ...)``) as whole numbers; samples whose target is
    ``ignore_index`` count for nothing, and the mean divides by the total weight of the
    others."""
    check_reduction("nll_loss", reduction)
    x = lift(input)
    c = _Classes("nll_loss", x, lift(target, x), int(ignore_index))
    c.weighed(_class_weight("nll_loss", weight, x, c.axis))
    return c.nll(x, reduction)


@public(
    None,
    "cross-entropy of logits against class indices or probabilities",
    derivative="g (softmax(x) - onehot(t)) for class indices (weighted; g / total weight "
    "for mean), none to the indices; g (softmax(x) sum(p) - p) for probabilities p, "
    "-g log_softmax(x) to p",
    method=False,
)
def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Cross-entropy of logits ``input`` (classes along axis 1, or axis 0 of a single
    sample), as ``torch.nn.functional.cross_entropy``: ``log_softmax`` then ``nll_loss``
    when ``target`` holds class indices, ``-sum(target * log_softmax(input))`` when it holds
    probabilities (the same shape as ``input``). ``label_smoothing`` mixes the target with
    the uniform distribution; ``ignore_index`` applies to class indices only."""
    name = "cross_entropy"
    check_reduction(name, reduction)
    eps = _label_smoothing(name, label_smoothing)
    x = lift(input)
    t = lift(target, x)
    if x.data.ndim == 0:
        raise ShapeError(msg("{name}: input must have a class axis; it is 0-d", name=name))
    axis = 0 if x.data.ndim == 1 else 1
    n = x.data.shape[axis]
    if t.data.shape == x.data.shape:  # class probabilities (torch's rule)
        w = _class_weight(name, weight, x, axis)
        logp = log_softmax(x, axis=axis)
        if eps > 0:
            t = t * (1.0 - eps) + eps / n
        p = logp * t if w is None else logp * t * w
        if reduction == "none":
            return -sum(p, axis=axis)
        if reduction == "sum":
            return -sum(p)
        return -sum(p) / float(x.data.size // n if n else 0)  # per sample; nan when empty
    c = _Classes(name, x, t, int(ignore_index))
    c.weighed(_class_weight(name, weight, x, axis))
    logp = log_softmax(x, axis=axis)
    loss = c.nll(logp, reduction)
    if eps > 0:  # torch's (1 - eps) nll + eps / C smooth
        loss = loss * (1.0 - eps) + c.smooth(logp, reduction) * (eps / n)
    return loss


__all__ = [
    "BCE",
    "REDUCTIONS",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "check_reduction",
    "cross_entropy",
    "huber_loss",
    "l1_loss",
    "mse_loss",
    "nll_loss",
    "reduced",
]
