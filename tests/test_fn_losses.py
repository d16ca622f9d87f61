"""The losses of issue 17 (item 3): ``mse_loss``, ``l1_loss``, ``huber_loss``,
``binary_cross_entropy``, ``binary_cross_entropy_with_logits``, ``cross_entropy`` and
``nll_loss``, as ``torch.nn.functional`` defines them (docs/language.md, "Function calls";
docs/conventions.md).

* values against NumPy references written here, every reduction, several shapes;
* first derivatives against central finite differences (``tests/gradcheck.py``) and second
  derivatives against finite differences of the first (``check_hessian``), including the
  options (weights, ``pos_weight``, ``ignore_index``, ``label_smoothing``, probabilities);
* awkward points (BCE at 0 and 1, ties of ``l1_loss``, Huber's joint, logits of ±1000 and
  -inf, every target ignored, zero class weights) against PyTorch 2.13's numbers, written
  here so the test needs no torch, and against torch itself when it is installed;
* option validation and error messages, the language's calls with strings and keywords,
  ``gradcli.nn.functional``, plans and the Dask backend.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from gradcheck import check_grads
from samplers import real, rng_for
from test_higher_order import check_hessian

import gradcli
import gradcli.nn.functional as F
from gradcli import autograd as E
from gradcli.errors import InputError, InvalidValueError, NamingError, ShapeError

NAMES = (
    "mse_loss", "l1_loss", "huber_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "cross_entropy", "nll_loss",
)  # fmt: skip
REDUCTIONS = ("mean", "sum", "none")

# --------------------------------------------------------------------------------------------
# NumPy references, written from torch's documentation
# --------------------------------------------------------------------------------------------


def _reduce(loss: np.ndarray, reduction: str) -> np.ndarray:
    return {"mean": np.mean, "sum": np.sum, "none": np.asarray}[reduction](loss)


def np_log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))


def np_huber(d: np.ndarray, delta: float) -> np.ndarray:
    a = np.abs(d)
    return np.where(a < delta, 0.5 * a * a, delta * (a - 0.5 * delta))


def np_bce(x: np.ndarray, t: np.ndarray, w: Any = 1.0) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return -w * (t * np.maximum(np.log(x), -100) + (1 - t) * np.maximum(np.log1p(-x), -100))


def np_bce_logits(x: np.ndarray, t: np.ndarray, w: Any = 1.0, pw: Any = 1.0) -> np.ndarray:
    log_s = -np.logaddexp(0.0, -x)  # log sigmoid(x)
    log_1ms = -np.logaddexp(0.0, x)  # log (1 - sigmoid(x))
    return -w * (pw * t * log_s + (1 - t) * log_1ms)


def np_nll(
    logp: np.ndarray,
    t: np.ndarray,
    w: Any = None,
    ignore: int = -100,
    reduction: str = "mean",
    smoothing: float = 0.0,
) -> np.ndarray:
    """torch's nll_loss of log-probabilities (classes on axis 1, or 0 for one sample), with
    cross_entropy's label smoothing."""
    axis = 0 if logp.ndim == 1 else 1
    c = logp.shape[axis]
    w = np.ones(c) if w is None else np.asarray(w, dtype=float)
    lp = np.moveaxis(logp, axis, -1)  # (..., C)
    valid = t != ignore
    ti = np.where(valid, t, 0).astype(int)
    picked = np.take_along_axis(lp, ti[..., None], axis=-1)[..., 0]
    wt = np.where(valid, w[ti], 0.0)
    nll = -wt * picked
    smooth = np.where(valid, -np.sum(lp * w, axis=-1), 0.0)
    if reduction == "mean":
        nll, smooth = nll.sum() / wt.sum(), smooth.sum() / wt.sum()
    elif reduction == "sum":
        nll, smooth = nll.sum(), smooth.sum()
    return (1 - smoothing) * nll + smoothing / c * smooth


def np_cross_entropy_probs(
    x: np.ndarray, p: np.ndarray, w: Any = None, reduction: str = "mean", smoothing: float = 0.0
) -> np.ndarray:
    axis = 0 if x.ndim == 1 else 1
    c = x.shape[axis]
    p = p * (1 - smoothing) + smoothing / c
    wb = 1.0 if w is None else np.asarray(w).reshape((c,) + (1,) * (x.ndim - axis - 1))
    per = -np.sum(np_log_softmax(x, axis) * p * wb, axis=axis)
    if reduction == "none":
        return per
    return per.sum() / (x.size // c if reduction == "mean" else 1)


# --------------------------------------------------------------------------------------------
# 1. values and first derivatives: every reduction, several shapes, every option
# --------------------------------------------------------------------------------------------


def _probs(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.uniform(0.1, 0.9, shape)


def _indices(rng: np.random.Generator, shape: tuple[int, ...], c: int, ignored: int = 0):
    t = rng.integers(0, c, shape).astype(float)
    if ignored and t.size:
        t.flat[: min(ignored, t.size)] = -100.0
    return t


def _case_difference(name, ref, shapes, **kw):
    def make(rng, reduction, lib=None):
        x, t = real()(rng, shapes[0]), real()(rng, shapes[1])
        if name == "huber_loss":  # away from the joint |d| = delta
            d = np.broadcast_arrays(x, t)
            far = np.abs(np.abs(d[0] - d[1]) - kw.get("delta", 1.0)) > 0.05
            t = t if far.all() else t + 0.11
        f = gradcli.autograd.FUNCTIONS[name].call if lib is None else getattr(lib, name)
        return (
            lambda a, b: f(a, b, reduction=reduction, **kw),
            [x, t],
            [0, 1],
            _reduce(ref(x, t), reduction),
        )

    return make


def _case_bce(shape, weight_shape=None):
    def make(rng, reduction, lib=None):
        bce = (lib or E).binary_cross_entropy
        x, t = _probs(rng, shape), rng.uniform(0.0, 1.0, shape)
        arrays, wrt = [x, t], [0, 1]
        if weight_shape is None:
            return (
                lambda a, b: bce(a, b, reduction=reduction),
                arrays, wrt, _reduce(np_bce(x, t), reduction),
            )  # fmt: skip
        w = rng.uniform(0.5, 2.0, weight_shape)
        return (
            lambda a, b, c: bce(a, b, c, reduction=reduction),
            [x, t, w], [0, 1, 2], _reduce(np_bce(x, t, w), reduction),
        )  # fmt: skip

    return make


def _case_bce_logits(shape, weight=None, pos_weight=None):
    def make(rng, reduction, lib=None):
        bce_logits = (lib or E).binary_cross_entropy_with_logits
        x, t = real(-4, 4)(rng, shape), rng.uniform(0.0, 1.0, shape)
        arrays = [x, t]
        w = None if weight is None else rng.uniform(0.5, 2.0, weight)
        pw = None if pos_weight is None else rng.uniform(0.2, 3.0, pos_weight)
        extra = [a for a in (w, pw) if a is not None]

        def f(a, b, *rest):
            it = iter(rest)
            wa = next(it) if w is not None else None
            pa = next(it) if pw is not None else None
            return bce_logits(a, b, wa, reduction=reduction, pos_weight=pa)

        ref = np_bce_logits(x, t, 1.0 if w is None else w, 1.0 if pw is None else pw)
        return f, arrays + extra, list(range(2 + len(extra))), _reduce(ref, reduction)

    return make


def _case_classes(fn, shape, weighted=False, ignored=0, smoothing=0.0, ignore_index=-100):
    """cross_entropy (of logits) or nll_loss (of log-probabilities) with class indices."""

    def make(rng, reduction, lib=None):
        axis = 0 if len(shape) == 1 else 1
        c = shape[axis]
        x = real(-3, 3)(rng, shape)
        tshape = () if len(shape) == 1 else shape[:1] + shape[2:]
        t = _indices(rng, tshape, c, ignored)
        if ignore_index != -100:
            t = np.where(t == -100, ignore_index, t)
        w = rng.uniform(0.5, 2.0, c) if weighted else None
        kw: dict[str, Any] = {"reduction": reduction}
        if ignore_index != -100:
            kw["ignore_index"] = ignore_index
        if fn == "cross_entropy":
            kw["label_smoothing"] = smoothing
            logp = np_log_softmax(x, axis)
        else:
            logp = x
        ref = np_nll(logp, t, w, ignore_index, reduction, smoothing)
        call = gradcli.autograd.FUNCTIONS[fn].call if lib is None else getattr(lib, fn)
        if w is None:
            return (lambda a, b: call(a, b, **kw)), [x, t], [0], ref
        return (lambda a, b, ww: call(a, b, ww, **kw)), [x, t, w], [0, 2], ref

    return make


def _case_probs(shape, weighted=False, smoothing=0.0):
    def make(rng, reduction, lib=None):
        ce = (lib or E).cross_entropy
        axis = 0 if len(shape) == 1 else 1
        x = real(-3, 3)(rng, shape)
        p = rng.dirichlet(np.ones(shape[axis]), size=int(np.prod(shape)) // shape[axis])
        p = np.moveaxis(p.reshape(np.moveaxis(np.empty(shape), axis, -1).shape), -1, axis)
        w = rng.uniform(0.5, 2.0, shape[axis]) if weighted else None
        ref = np_cross_entropy_probs(x, p, w, reduction, smoothing)
        kw = {"reduction": reduction, "label_smoothing": smoothing}
        if w is None:
            return (lambda a, b: ce(a, b, **kw)), [x, p], [0, 1], ref
        return (lambda a, b, ww: ce(a, b, ww, **kw)), [x, p, w], [0, 1, 2], ref

    return make


CASES = {
    "mse_loss 2x3": _case_difference("mse_loss", lambda x, t: (x - t) ** 2, [(2, 3), (2, 3)]),
    "mse_loss broadcast 2x3 with 3": _case_difference(
        "mse_loss", lambda x, t: (x - t) ** 2, [(2, 3), (3,)]
    ),
    "mse_loss scalars": _case_difference("mse_loss", lambda x, t: (x - t) ** 2, [(), ()]),
    "l1_loss 2x3": _case_difference("l1_loss", lambda x, t: np.abs(x - t), [(2, 3), (2, 3)]),
    "l1_loss broadcast 2x1 with 3": _case_difference(
        "l1_loss", lambda x, t: np.abs(x - t), [(2, 1), (3,)]
    ),
    "huber_loss 2x3": _case_difference(
        "huber_loss", lambda x, t: np_huber(x - t, 1.0), [(2, 3), (2, 3)]
    ),
    "huber_loss delta=0.4, broadcast": _case_difference(
        "huber_loss", lambda x, t: np_huber(x - t, 0.4), [(3, 2), (2,)], delta=0.4
    ),
    "binary_cross_entropy 2x3": _case_bce((2, 3)),
    "binary_cross_entropy 4": _case_bce((4,)),
    "binary_cross_entropy weight 3 on 2x3": _case_bce((2, 3), (3,)),
    "binary_cross_entropy weight 2x1 on 2x3": _case_bce((2, 3), (2, 1)),
    "bce_with_logits 2x3": _case_bce_logits((2, 3)),
    "bce_with_logits weight and pos_weight": _case_bce_logits((2, 3), (2, 3), (3,)),
    "bce_with_logits pos_weight": _case_bce_logits((4,), None, (4,)),
    "cross_entropy (N, C)": _case_classes("cross_entropy", (4, 3)),
    "cross_entropy (C,) one sample": _case_classes("cross_entropy", (5,)),
    "cross_entropy (N, C, d)": _case_classes("cross_entropy", (2, 3, 2)),
    "cross_entropy (N, C, d1, d2) weighted": _case_classes(
        "cross_entropy", (2, 3, 2, 2), weighted=True
    ),
    "cross_entropy weighted, ignored": _case_classes(
        "cross_entropy", (5, 3), weighted=True, ignored=2
    ),
    "cross_entropy ignored, smoothing": _case_classes(
        "cross_entropy", (5, 4), ignored=1, smoothing=0.2
    ),
    "cross_entropy weighted, ignored, smoothing (N, C, d)": _case_classes(
        "cross_entropy", (3, 4, 2), weighted=True, ignored=2, smoothing=0.15
    ),
    "cross_entropy ignore_index=1": _case_classes(
        "cross_entropy", (6, 3), ignored=2, ignore_index=1
    ),
    "cross_entropy probabilities (N, C)": _case_probs((3, 4)),
    "cross_entropy probabilities (C,)": _case_probs((4,)),
    "cross_entropy probabilities (N, C, d) weighted, smoothing": _case_probs(
        (2, 3, 2), weighted=True, smoothing=0.1
    ),
    "nll_loss (N, C)": _case_classes("nll_loss", (4, 3)),
    "nll_loss (C,)": _case_classes("nll_loss", (3,)),
    "nll_loss (N, C, d) weighted, ignored": _case_classes(
        "nll_loss", (3, 4, 2), weighted=True, ignored=2
    ),
    "nll_loss ignore_index=0": _case_classes("nll_loss", (5, 3), ignored=2, ignore_index=0),
}


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("case", list(CASES))
def test_values_and_first_derivatives(case: str, reduction: str) -> None:
    f, arrays, wrt, expected = CASES[case](rng_for("losses", case), reduction)
    what = f"{case}, reduction={reduction}"
    out = check_grads(f, *arrays, wrt=wrt, name=what)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-14, err_msg=what)


def _torch_grads(torch, f, arrays, wrt, upstream):
    """torch's value and the gradients of ``sum(upstream * value)`` for the arguments in
    ``wrt`` that torch differentiates (None for one it does not: the class weights of
    nll_loss and of cross_entropy with class indices, binary_cross_entropy's weight)."""
    grads: list[Any] = []
    value = None
    for i in wrt:
        ts = [torch.tensor(a, dtype=torch.float64, requires_grad=(j == i)) for j, a in
              enumerate(arrays)]  # fmt: skip
        try:
            out = f(*ts)
            (g,) = torch.autograd.grad((out * torch.tensor(upstream)).sum(), [ts[i]])
        except RuntimeError as err:
            assert "not implemented" in str(err) or "not differentiable" in str(err), err
            grads.append(None)
            continue
        value = out.detach().numpy()
        grads.append(g.numpy())
    return value, grads


@pytest.mark.filterwarnings("ignore:Using a target size:UserWarning")  # torch's, broadcasting
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("case", list(CASES))
def test_values_and_first_derivatives_against_torch(case: str, reduction: str) -> None:
    """Every case above, every reduction, at ordinary points: the value and the gradient
    (of a random weighting of the output) equal torch.nn.functional's in float64."""
    torch = pytest.importorskip("torch")
    import test_vs_torch as vt

    class TorchLosses(vt.TorchNS):
        """Class indices (a target not of the input's shape) as torch's int64."""

        @staticmethod
        def cross_entropy(x: Any, t: Any, *args: Any, **kw: Any) -> Any:
            t = t if t.shape == x.shape else t.long()
            return torch.nn.functional.cross_entropy(x, t, *args, **kw)

        @staticmethod
        def nll_loss(x: Any, t: Any, *args: Any, **kw: Any) -> Any:
            return torch.nn.functional.nll_loss(x, t.long(), *args, **kw)

    f, arrays, wrt, _ = CASES[case](rng_for("losses", case), reduction)
    tf, tarrays, _, _ = CASES[case](rng_for("losses", case), reduction, TorchLosses)
    for a, b in zip(arrays, tarrays, strict=True):
        np.testing.assert_array_equal(a, b)  # the same draws for both libraries
    what = f"{case}, reduction={reduction}"
    ts = [E.tensor(a, requires_grad=(i in wrt)) for i, a in enumerate(arrays)]
    out = f(*ts)
    upstream = rng_for("losses-upstream", case).standard_normal(out.shape)
    grads = E.grad(E.sum(out * E.tensor(upstream)), [ts[i] for i in wrt], allow_unused=True)
    value, theirs = _torch_grads(torch, tf, arrays, wrt, upstream)
    np.testing.assert_allclose(out.data, value, rtol=1e-13, atol=1e-15, err_msg=what)
    compared = 0
    for i, g, t in zip(wrt, grads, theirs, strict=True):
        if t is None:
            continue
        mine = np.zeros_like(arrays[i]) if g is None else g.data
        np.testing.assert_allclose(mine, t, rtol=1e-12, atol=1e-15, err_msg=f"{what}: argument {i}")
        compared += 1
    assert compared >= 1, what


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("case", list(CASES))
def test_second_derivatives(case: str, reduction: str) -> None:
    f, arrays, wrt, _ = CASES[case](rng_for("losses2", case), reduction)
    check_hessian(f, *arrays, wrt=wrt, name=f"{case}, reduction={reduction}")


def test_defaults_are_torchs() -> None:
    rng = rng_for("defaults")
    x, t = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    for name in ("mse_loss", "l1_loss", "huber_loss"):
        f = gradcli.autograd.FUNCTIONS[name].call
        assert f(x, t).item() == f(x, t, reduction="mean").item()
    assert E.huber_loss(x, t).item() == E.huber_loss(x, t, delta=1.0).item()
    z = rng.standard_normal((3, 4))
    y = np.array([0.0, 3.0, 1.0])
    assert E.cross_entropy(z, y).item() == E.cross_entropy(z, y, None, -100, "mean", 0.0).item()


# --------------------------------------------------------------------------------------------
# 2. awkward points: PyTorch 2.13's numbers (float64, CPU)
# --------------------------------------------------------------------------------------------

INF, NAN = math.inf, math.nan
#: (function, positional arrays, keywords, differentiable positions, position of the class
#: indices or None)
AWKWARD: dict[str, tuple[str, list[Any], dict[str, Any], tuple[int, ...], int | None]] = {
    "l1_loss at input == target": (
        "l1_loss", [[1.0, 2.0, 3.0], [1.0, 0.0, 3.0]], {"reduction": "sum"}, (0, 1), None,
    ),
    "huber_loss at |d| == delta and at d == 0": (
        "huber_loss", [[0.0, 1.0, -1.0, 2.0, 0.5], [0.0, 0.0, 0.0, 0.0, 0.0]],
        {"reduction": "sum"}, (0, 1), None,
    ),
    "huber_loss delta=0.5 at the joint, mean": (
        "huber_loss", [[0.5, -0.5, 0.25, 3.0], [0.0, 0.0, 0.0, 1.0]], {"delta": 0.5},
        (0, 1), None,
    ),
    "mse_loss broadcast, mean": (
        "mse_loss", [[[1.0, 2.0], [3.0, 4.0]], [0.5, -1.0]], {}, (0, 1), None,
    ),
    "binary_cross_entropy at 0 and 1": (
        "binary_cross_entropy",
        [[0.0, 1.0, 0.0, 1.0, 0.5, 1e-300, 1e-50], [0.0, 1.0, 1.0, 0.0, 0.5, 0.5, 1.0]],
        {"reduction": "none"}, (0, 1), None,
    ),
    "binary_cross_entropy weighted at 0 and 1, mean": (
        "binary_cross_entropy",
        [[[0.0, 0.3], [0.9, 1.0]], [[1.0, 0.0], [0.5, 1.0]], [2.0, 0.5]], {}, (0, 1), None,
    ),
    "binary_cross_entropy_with_logits at +-1000 and +-40": (
        "binary_cross_entropy_with_logits",
        [[-1000.0, -40.0, 0.0, 40.0, 1000.0], [0.0, 1.0, 0.5, 0.0, 1.0]],
        {"reduction": "none"}, (0, 1), None,
    ),
    "binary_cross_entropy_with_logits pos_weight, sum": (
        "binary_cross_entropy_with_logits",
        [[[-3.0, 0.5], [2.0, 1000.0]], [[1.0, 0.0], [0.3, 1.0]]],
        {"pos_weight": [2.0, 0.5], "reduction": "sum"}, (0, 1), None,
    ),
    "cross_entropy with a logit of -inf": (
        "cross_entropy", [[[0.0, -INF, 1.0], [2.0, 1.0, -INF]], [2.0, 0.0]], {}, (0,), 1,
    ),
    "cross_entropy with logits of +-1000": (
        "cross_entropy", [[[1000.0, -1000.0, 0.0], [-1000.0, 1000.0, 999.0]], [1.0, 2.0]],
        {}, (0,), 1,
    ),
    "cross_entropy with every target ignored": (
        "cross_entropy", [[[1.0, 2.0], [0.0, 3.0]], [-100.0, -100.0]], {}, (0,), 1,
    ),
    "cross_entropy with zero class weights": (
        "cross_entropy", [[[1.0, 2.0, 0.0], [0.0, 3.0, 1.0]], [0.0, 0.0], [0.0, 1.0, 1.0]], {},
        (0,), 1,
    ),
    "cross_entropy ignored, weighted, smoothed, mean": (
        "cross_entropy",
        [[[0.5, -1.0, 2.0, 0.0], [1.0, 1.0, 1.0, 1.0], [3.0, -2.0, 0.5, 0.25]],
         [1.0, -100.0, 3.0], [1.0, 2.0, 0.5, 1.5]],
        {"label_smoothing": 0.2}, (0,), 1,
    ),
    "cross_entropy one sample, 0-d target": (
        "cross_entropy", [[1.0, 2.0, 3.0], 2.0], {"reduction": "sum"}, (0,), 1,
    ),
    "cross_entropy probabilities with a zero and -inf": (
        "cross_entropy", [[[0.0, -INF], [1.0, 2.0]], [[1.0, 0.0], [0.25, 0.75]]],
        {"reduction": "none"}, (0, 1), None,
    ),
    "nll_loss ignore_index=1, sum": (
        "nll_loss", [[[-0.5, -1.0, -2.0], [-0.1, -3.0, -0.7], [-1.2, -0.3, -4.0]],
                     [0.0, 1.0, 2.0]],
        {"ignore_index": 1, "reduction": "sum"}, (0,), 1,
    ),
}  # fmt: skip

#: PyTorch 2.13.0 (CPU, float64): value, then the gradient of sum(value) for each
#: differentiable argument, as made by ``test_awkward_points_match_torch_itself``
TORCH_213: dict[str, tuple[Any, list[Any]]] = {
    "l1_loss at input == target": (2.0, [[0.0, 1.0, 0.0], [-0.0, -1.0, -0.0]]),
    "huber_loss at |d| == delta and at d == 0": (
        2.625,
        [[0.0, 1.0, -1.0, 1.0, 0.5], [0.0, -1.0, 1.0, -1.0, -0.5]],
    ),
    "huber_loss delta=0.5 at the joint, mean": (
        0.2890625,
        [[0.125, -0.125, 0.0625, 0.125], [-0.125, 0.125, -0.0625, -0.125]],
    ),
    "mse_loss broadcast, mean": (10.125, [[[0.25, 1.5], [1.25, 2.5]], [-1.5, -4.0]]),
    "binary_cross_entropy at 0 and 1": (
        [0.0, -0.0, 100.0, 100.0, 0.6931471805599453, 50.0, 100.0],
        [
            [
                0.0,
                0.0,
                -1000000003995.8029,
                1000000003995.8029,
                0.0,
                -500000001997.9014,
                -1000000003995.8029,
            ],
            [INF, -INF, INF, -INF, -0.0, 690.7755278982137, 115.12925464970229],
        ],
    ),
    "binary_cross_entropy weighted at 0 and 1, mean": (
        50.646570770155314,
        [
            [[-500000001997.9014, 0.17857142857142858], [2.2222222222222228, 0.0]],
            [[INF, 0.10591223254840045], [-1.0986122886681098, -INF]],
        ],
    ),
    "binary_cross_entropy_with_logits at +-1000 and +-40": (
        [0.0, 40.0, 0.6931471805599453, 40.0, 0.0],
        [[0.0, -1.0, 0.0, 1.0, 0.0], [1000.0, 40.0, -0.0, -40.0, -1000.0]],
    ),
    "binary_cross_entropy_with_logits pos_weight, sum": (
        8.636258101683454,
        [
            [[-1.9051482536448665, 0.6224593312018546], [0.545036201371247, 0.0]],
            [[6.048587351573742, -0.7370384920900533], [-1.8730719889570278, -1000.0]],
        ],
    ),
    "cross_entropy with a logit of -inf": (
        0.31326168751822286,
        [
            [
                [0.13447071068499755, 0.0, -0.13447071068499755],
                [-0.13447071068499755, 0.13447071068499755, 0.0],
            ]
        ],
    ),
    "cross_entropy with logits of +-1000": (
        1000.6566308437591,
        [[[0.5, -0.5, 0.0], [0.0, 0.36552928931500245, -0.36552928931500245]]],
    ),
    "cross_entropy with every target ignored": (NAN, [[[0.0, 0.0], [0.0, 0.0]]]),
    "cross_entropy with zero class weights": (NAN, [[[NAN, NAN, NAN], [NAN, NAN, NAN]]]),
    "cross_entropy ignored, weighted, smoothed, mean": (
        2.9237759459579182,
        [
            [
                [
                    0.06946363217220358,
                    -0.4670272806268042,
                    0.36819567352554927,
                    0.029367974929051383,
                ],
                [0.0, 0.0, 0.0, 0.0],
                [
                    0.3451030728061703,
                    -0.026149885971937844,
                    0.02235757095102486,
                    -0.34131075778525727,
                ],
            ]
        ],
    ),
    "cross_entropy one sample, 0-d target": (
        0.4076059644443804,
        [[0.09003057317038043, 0.24472847105479764, -0.3347590442251782]],
    ),
    "cross_entropy probabilities with a zero and -inf": (
        [NAN, 0.5632616875182228],
        [
            [[0.0, 0.0], [0.018941421369995104, -0.018941421369995104]],
            [[-0.0, INF], [1.3132616875182228, 0.31326168751822286]],
        ],
    ),
    "nll_loss ignore_index=1, sum": (4.5, [[[-1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, -1.0]]]),
}


def _ours(name: str, args: list[Any], kw: dict[str, Any], diff: tuple[int, ...]):
    ts = [E.tensor(a, requires_grad=(i in diff)) for i, a in enumerate(args)]
    out = gradcli.autograd.FUNCTIONS[name].call(*ts, **kw)
    E.sum(out).backward()
    return out.data, [ts[i].grad.data for i in diff]


def _torch(name: str, args: list[Any], kw: dict[str, Any], diff: tuple[int, ...], index):
    import torch

    ts = []
    for i, a in enumerate(args):
        t = torch.tensor(a, dtype=torch.float64, requires_grad=(i in diff))
        ts.append(t.long() if i == index else t)
    kw = {k: torch.tensor(v, dtype=torch.float64) if k == "pos_weight" else v
          for k, v in kw.items()}  # fmt: skip
    out = getattr(torch.nn.functional, name)(*ts, **kw)
    out.sum().backward()
    return out.detach().numpy(), [ts[i].grad.numpy() for i in diff]


def assert_same(ours: Any, theirs: Any, what: str) -> None:
    """Equal nan and infinity, finite numbers to 1e-12 (and 1e-15 of the largest)."""
    a, b = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
    assert a.shape == b.shape, f"{what}: shape {a.shape}, torch {b.shape}"
    assert (np.isnan(a) == np.isnan(b)).all(), f"{what}: nan at other places: {a} vs {b}"
    inf = np.isinf(b)
    assert (a[inf] == b[inf]).all() and not np.isinf(a[~inf]).any(), f"{what}: {a} vs {b}"
    fin = np.isfinite(b)
    scale = float(np.max(np.abs(b[fin]), initial=0.0))
    np.testing.assert_allclose(a[fin], b[fin], rtol=1e-12, atol=1e-15 * scale, err_msg=what)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # 0 / 0, nan * 0
@pytest.mark.parametrize("case", list(AWKWARD))
def test_awkward_points_match_torch_213(case: str) -> None:
    name, args, kw, diff, _ = AWKWARD[case]
    value, grads = _ours(name, args, kw, diff)
    want_value, want_grads = TORCH_213[case]
    assert_same(value, want_value, f"{case}: value")
    for i, g, w in zip(diff, grads, want_grads, strict=True):
        assert_same(g, w, f"{case}: gradient of argument {i}")


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:Using a target size:UserWarning")  # torch's, broadcasting
@pytest.mark.parametrize("case", list(AWKWARD))
def test_awkward_points_match_torch_itself(case: str) -> None:
    pytest.importorskip("torch")
    name, args, kw, diff, index = AWKWARD[case]
    value, grads = _ours(name, args, kw, diff)
    want_value, want_grads = _torch(name, args, kw, diff, index)
    assert_same(value, want_value, f"{case}: value")
    for i, g, w in zip(diff, grads, want_grads, strict=True):
        assert_same(g, w, f"{case}: gradient of argument {i}")
    # and the numbers written above are this torch's
    assert_same(want_value, TORCH_213[case][0], f"{case}: TORCH_213's value")
    for g, w in zip(want_grads, TORCH_213[case][1], strict=True):
        assert_same(g, w, f"{case}: TORCH_213's gradient")


def test_binary_cross_entropy_at_0_and_1_is_torchs_exactly() -> None:
    """The clamp at -100 and the floor 1e-12 (a float32: 9.99999996e-13) of x (1 - x) in
    the gradient: torch's bits, not only its numbers."""
    x = E.tensor([0.0, 1.0, 0.0, 1.0], requires_grad=True)
    t = E.tensor([0.0, 1.0, 1.0, 0.0], requires_grad=True)
    out = E.binary_cross_entropy(x, t, reduction="none")
    assert out.data.tolist() == [0.0, 0.0, 100.0, 100.0]
    assert math.copysign(1.0, out.data[1]) == -1.0  # torch's -0.0 at x = t = 1
    E.sum(out).backward()
    assert x.grad.data.tolist() == [0.0, 0.0, -1.0000000039958029e12, 1.0000000039958029e12]
    assert t.grad.data.tolist() == [INF, -INF, INF, -INF]
    assert out.grad_fn.name() == "BinaryCrossEntropyBackward0"


def test_no_floating_point_warning_at_0_and_1() -> None:
    inputs = {"p": [0.0, 1.0, 0.5], "t": [0.0, 1.0, 1.0]}
    r = gradcli.evaluate("binary_cross_entropy(p, t)", inputs, wrt=["p"])
    assert r.warnings == []
    assert r.value == pytest.approx(math.log(2) / 3)


def test_class_indices_have_no_gradient_as_the_condition_of_where() -> None:
    """A target of class indices is read, not differentiated: the engine gives it no
    gradient (.grad stays None) and a report shows zeros, as for where's condition."""
    z = E.tensor([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]], requires_grad=True)
    y = E.tensor([2.0, 0.0], requires_grad=True)
    for f in (E.cross_entropy, lambda a, b: E.nll_loss(E.log_softmax(a, axis=1), b)):
        z.grad = None
        E.sum(f(z, y)).backward()
        assert y.grad is None and z.grad is not None
    r = gradcli.evaluate("cross_entropy(z, y)", {"z": z.data, "y": [2.0, 0.0]})
    c = gradcli.evaluate("sum(where(c, z, 0))", {"c": [[1.0, 0, 1], [0, 1, 1]], "z": z.data})
    assert r.grads["y"].tolist() == [0.0, 0.0]
    assert c.grads["c"].tolist() == [[0.0] * 3] * 2
    # probabilities (the shape of the input) are differentiated
    p = gradcli.evaluate("cross_entropy(z, p)", {"z": z.data, "p": [[0.2, 0.3, 0.5]] * 2})
    assert np.all(p.grads["p"] != 0)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # the mean's 0 / 0
def test_every_target_ignored_gives_nan_and_zero_gradients() -> None:
    z = E.tensor([[1.0, 2.0], [0.0, 3.0]], requires_grad=True)
    for reduction, want in (("mean", None), ("sum", 0.0), ("none", [0.0, 0.0])):
        z.grad = None
        out = E.cross_entropy(z, [-100.0, -100.0], reduction=reduction)
        if want is None:
            assert math.isnan(out.item())
        else:
            assert out.data.tolist() == want
            assert not np.signbit(out.data).any()  # 0.0 where ignored, as torch (not -0.0)
        E.sum(out).backward()
        assert z.grad.data.tolist() == [[0.0, 0.0], [0.0, 0.0]]


def test_stable_at_large_logits() -> None:
    big = [[1000.0, -1000.0, 0.0], [-1000.0, 1000.0, 999.0]]
    assert E.cross_entropy(big, [0.0, 2.0], reduction="none").data.tolist() == pytest.approx(
        [0.0, 1.0 + math.log1p(math.exp(-1.0))]
    )
    out = E.binary_cross_entropy_with_logits([-1000.0, 1000.0], [1.0, 0.0], reduction="none")
    assert out.data.tolist() == [1000.0, 1000.0]


# --------------------------------------------------------------------------------------------
# 3. options and errors
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("bad", ["avg", "Mean", "", None, 1])
def test_a_reduction_not_mean_sum_none_is_a_value_error(name: str, bad: Any) -> None:
    x = np.full((2, 3), 0.5)
    t = x if name not in ("cross_entropy", "nll_loss") else np.array([0.0, 1.0])
    with pytest.raises(InvalidValueError) as err:
        gradcli.autograd.FUNCTIONS[name].call(x, t, reduction=bad)
    message = str(err.value)
    assert message.startswith(f'{name}: reduction must be "mean", "sum" or "none", not ')
    assert "\n" not in message


def test_huber_delta_must_be_positive() -> None:
    for delta in (0.0, -1.0, math.nan):
        with pytest.raises(InvalidValueError, match="huber_loss: delta must be positive"):
            E.huber_loss([1.0], [0.0], delta=delta)


def test_label_smoothing_between_0_and_1() -> None:
    for eps in (-0.1, 1.5, math.nan):
        with pytest.raises(InvalidValueError, match="label_smoothing must be between 0 and 1"):
            E.cross_entropy([[1.0, 2.0]], [0.0], label_smoothing=eps)
    one = E.cross_entropy([[1.0, 2.0]], [0.0], label_smoothing=1.0)  # the uniform target
    assert one.item() == pytest.approx(-np.mean(np_log_softmax(np.array([1.0, 2.0]), 0)))


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ([0.0, 1.5], r"cross_entropy: target\[1\] is 1.5, not a class index "
                     r"\(a whole number from 0 to 2\)"),
        ([math.nan, 1.0], r"target\[0\] is nan, not a class index"),
        ([math.inf, 1.0], r"target\[0\] is inf, not a class index"),
        ([0.0, 3.0], r"cross_entropy: target\[1\] is 3, out of range for 3 classes "
                     r"\(0 to 2, or ignore_index -100\)"),
        ([-1.0, 0.0], r"target\[0\] is -1, out of range for 3 classes"),
        ([-99.0, 0.0], r"target\[0\] is -99, out of range"),
    ],
)  # fmt: skip
def test_a_bad_class_index_is_a_value_error_naming_it(target: list[float], message: str) -> None:
    z = np.zeros((2, 3))
    with pytest.raises(InvalidValueError, match=message) as err:
        E.cross_entropy(z, target)
    assert "\n" not in str(err.value)


def test_a_bad_class_index_of_more_axes_names_its_place() -> None:
    with pytest.raises(InvalidValueError, match=r"nll_loss: target\[1, 0\] is 5, out of range"):
        E.nll_loss(np.zeros((2, 3, 2)), [[0.0, 1.0], [5.0, 2.0]])
    with pytest.raises(InvalidValueError, match=r"nll_loss: target is 3, out of range"):
        E.nll_loss(np.zeros(3), 3.0)
    with pytest.raises(InvalidValueError, match=r"ignore_index 7\)"):
        E.nll_loss(np.zeros((1, 3)), [-100.0], ignore_index=7)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: E.cross_entropy(np.zeros((2, 3)), [0.0, 1.0, 2.0]), ShapeError,
         r"cross_entropy: input of shape \(2, 3\) needs class indices of shape \(2,\) "
         r"\(or probabilities of its own shape\), got shape \(3,\)"),
        (lambda: E.cross_entropy(np.zeros((2, 3, 4)), np.zeros((2, 3))), ShapeError,
         r"needs class indices of shape \(2, 4\)"),
        (lambda: E.cross_entropy(np.zeros(3), [0.0, 1.0]), ShapeError,
         r"one sample of 3 classes; its target is one class index"),
        (lambda: E.cross_entropy(np.zeros(()), 0.0), ShapeError, r"must have a class axis"),
        (lambda: E.nll_loss(np.zeros(()), 0.0), ShapeError, r"must have a class axis"),
        (lambda: E.cross_entropy(np.zeros((2, 3)), [0.0, 1.0], [1.0, 2.0]), ShapeError,
         r"weight must have one element per class, shape \(3,\); it has shape \(2,\)"),
        (lambda: E.cross_entropy(np.zeros((2, 3)), np.zeros((2, 3)), [1.0]), ShapeError,
         r"weight must have one element per class"),
        (lambda: E.binary_cross_entropy([0.5, 0.5], [0.5]), ShapeError,
         r"binary_cross_entropy: target has shape \(1,\) but input has shape \(2,\)"),
        (lambda: E.binary_cross_entropy_with_logits(np.zeros((2, 2)), [0.5, 0.5]), ShapeError,
         r"must be the same"),
        (lambda: E.binary_cross_entropy([0.5, 0.5], [0.5, 0.5], np.ones((2, 2))), ShapeError,
         r"weight of shape \(2, 2\) does not broadcast to the input's shape \(2,\)"),
        (lambda: E.binary_cross_entropy_with_logits([0.5], [0.5], pos_weight=[1.0, 2.0]),
         ShapeError, r"pos_weight of shape \(2,\) does not broadcast to the input's shape"),
        (lambda: E.binary_cross_entropy_with_logits([0.5, 0.5], [0.5, 0.5], pos_weight=[1.0] * 3),
         ShapeError, r"shapes \(2,\) and \(3,\) cannot be broadcast together"),
        (lambda: E.mse_loss(np.zeros(2), np.zeros(3)), ShapeError, r"cannot be broadcast"),
        (lambda: E.binary_cross_entropy([0.5, 1.5], [0.5, 0.5]), InvalidValueError,
         r"binary_cross_entropy: every element of input must be between 0 and 1; "
         r"input\[1\] is 1.5"),
        (lambda: E.binary_cross_entropy([0.5, 0.5], [-0.5, 0.5]), InvalidValueError,
         r"every element of target must be between 0 and 1; target\[0\] is -0.5"),
        (lambda: E.binary_cross_entropy(math.nan, 0.5), InvalidValueError,
         r"every element of input must be between 0 and 1; input is nan"),
    ],
)  # fmt: skip
def test_shapes_and_domains_are_checked(call: Any, error: type, message: str) -> None:
    with pytest.raises(error, match=message) as err:
        call()
    assert "\n" not in str(err.value)


def test_a_single_sample_takes_a_one_element_target_too() -> None:
    """As torch: input (C,) with target (1,) is one sample (the result is 0-d)."""
    a = E.cross_entropy([1.0, 2.0, 0.5], [1.0], reduction="none")
    b = E.cross_entropy([1.0, 2.0, 0.5], 1.0, reduction="none")
    assert a.shape == b.shape == () and a.item() == b.item()


def test_an_input_of_one_class_with_one_element_target_is_probabilities() -> None:
    """Shapes equal: probabilities (torch's rule), even when they could be indices."""
    out = E.cross_entropy([[0.5], [1.5]], [[1.0], [1.0]], reduction="none")
    assert out.data.tolist() == [0.0, 0.0]


def test_float32_stays_float32() -> None:
    for name in NAMES:
        x = E.tensor([[0.2, 0.7], [0.4, 0.9]], dtype="float32", requires_grad=True)
        t = E.tensor([1.0, 0.0], dtype="float32") if name in ("cross_entropy", "nll_loss") \
            else E.tensor([[0.0, 1.0], [0.5, 0.5]], dtype="float32")  # fmt: skip
        for reduction in REDUCTIONS:
            x.grad = None
            out = gradcli.autograd.FUNCTIONS[name].call(x, t, reduction=reduction)
            assert out.data.dtype == np.float32, (name, reduction)
            E.sum(out).backward()
            assert x.grad.data.dtype == np.float32, (name, reduction)


# --------------------------------------------------------------------------------------------
# 4. the language: strings, keywords, `gradcli functions`
# --------------------------------------------------------------------------------------------

Z = [[2.0, 1.0, 0.1], [0.5, 2.5, 0.3]]


@pytest.mark.parametrize(
    ("program", "inputs", "python"),
    [
        ('cross_entropy(z, y, reduction="none")', {"z": Z, "y": [0, 2]},
         lambda z, y: E.cross_entropy(z, y, reduction="none")),
        ("cross_entropy(z, y, reduction='sum', label_smoothing=0.1)", {"z": Z, "y": [0, 2]},
         lambda z, y: E.cross_entropy(z, y, reduction="sum", label_smoothing=0.1)),
        ("cross_entropy(z, [0, 1], weight=[1, 2, 3], ignore_index=1)", {"z": Z},
         lambda z: E.cross_entropy(z, [0.0, 1.0], [1.0, 2.0, 3.0], ignore_index=1)),
        ("cross_entropy(z, softmax(z * 2), [1, 2, 3], -100, 'none', 0.2)", {"z": Z},
         lambda z: E.cross_entropy(z, E.softmax(z * 2.0), [1.0, 2.0, 3.0], -100, "none", 0.2)),
        ("nll_loss(log_softmax(z, axis=1), [2, 0], ignore_index=-1)", {"z": Z},
         lambda z: E.nll_loss(E.log_softmax(z, axis=1), [2.0, 0.0], ignore_index=-1)),
        ('huber_loss(x, y, "sum", 0.5)', {"x": [0.1, 2.0, -1.0], "y": [0.0, 0.0, 0.0]},
         lambda x, y: E.huber_loss(x, y, "sum", 0.5)),
        ("mse_loss(x, y) + l1_loss(x, y, reduction='none')[1]",
         {"x": [0.1, 2.0, -1.0], "y": [0.0, 0.0, 0.5]},
         lambda x, y: E.mse_loss(x, y) + E.l1_loss(x, y, reduction="none")[1]),
        ("binary_cross_entropy(sigmoid(x), y, weight=[1, 2, 3], reduction='sum')",
         {"x": [0.1, 2.0, -1.0], "y": [0.0, 1.0, 0.5]},
         lambda x, y: E.binary_cross_entropy(E.sigmoid(x), y, [1.0, 2.0, 3.0], "sum")),
        ('binary_cross_entropy_with_logits(x, y, pos_weight=[2, 1, 0.5], reduction="none")',
         {"x": [0.1, 2.0, -1.0], "y": [0.0, 1.0, 0.5]},
         lambda x, y: E.binary_cross_entropy_with_logits(
             x, y, reduction="none", pos_weight=[2.0, 1.0, 0.5])),
    ],
)  # fmt: skip
def test_language_calls_with_strings_and_keywords(program: str, inputs: dict, python) -> None:
    r = gradcli.evaluate(program, inputs)
    ts = {k: E.tensor(v, requires_grad=True) for k, v in inputs.items()}
    want = python(*ts.values())
    np.testing.assert_array_equal(r.value, want.data)
    E.sum(want).backward()
    for k, t in ts.items():
        expected = np.zeros_like(t.data) if t.grad is None else t.grad.data
        np.testing.assert_array_equal(r.grads[k], expected, err_msg=f"{program}: {k}")


@pytest.mark.parametrize(
    ("program", "error", "message"),
    [
        ('mse_loss(x, x, reduction="avg")', InvalidValueError,
         r'mse_loss: reduction must be "mean", "sum" or "none", not "avg"'),
        ("mse_loss(x, x, reduction=1)", InvalidValueError,
         r'mse_loss: argument `reduction`: expected a string in quotes, as "mean"'),
        ("mse_loss(x, x, reduction=mean)", NamingError, r"mean"),
        ('mse_loss(x, "x")', InvalidValueError, r'the string "x" is not a tensor'),
        ('mse_loss(x, x, reduce="sum")', NamingError,
         r"mse_loss\(\) has no argument `reduce`"),
        ("cross_entropy(x, [0, 7])", InvalidValueError,
         r"cross_entropy: target\[1\] is 7, out of range for 3 classes"),
        ("cross_entropy(x, [0, 1], ignore_index=0.5)", InvalidValueError,
         r"argument `ignore_index`: expected a whole number"),
    ],
)  # fmt: skip
def test_language_errors(program: str, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        gradcli.evaluate(program, {"x": [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]})


def test_functions_lists_every_loss_with_torchs_signature() -> None:
    from gradcli.language import FUNCTIONS

    want = {
        "mse_loss": 'mse_loss(input, target, reduction="mean")',
        "l1_loss": 'l1_loss(input, target, reduction="mean")',
        "huber_loss": 'huber_loss(input, target, reduction="mean", delta=1.0)',
        "binary_cross_entropy": "binary_cross_entropy(input, target, weight=none, "
        'reduction="mean")',
        "binary_cross_entropy_with_logits": "binary_cross_entropy_with_logits(input, target, "
        'weight=none, reduction="mean", pos_weight=none)',
        "cross_entropy": "cross_entropy(input, target, weight=none, ignore_index=-100, "
        'reduction="mean", label_smoothing=0.0)',
        "nll_loss": 'nll_loss(input, target, weight=none, ignore_index=-100, reduction="mean")',
    }
    for name, signature in want.items():
        spec = FUNCTIONS[name]
        assert spec.signature == signature
        assert spec.summary and spec.derivative
    assert FUNCTIONS["binary_cross_entropy"].derivative == E.OPS["binary_cross_entropy"].doc


def test_the_torch_namespace_and_keywords() -> None:
    for name in NAMES:
        assert name in F.NAMES
        assert getattr(F, name) is getattr(gradcli, name)
    z = gradcli.tensor([[2.0, 1.0, 0.1]], requires_grad=True)
    loss = F.cross_entropy(input=z, target=gradcli.tensor([0.0]), reduction="sum")
    loss.backward()
    assert z.grad is not None
    assert not hasattr(gradcli.Tensor, "cross_entropy")  # torch has no such method


# --------------------------------------------------------------------------------------------
# 5. plans and the Dask backend
# --------------------------------------------------------------------------------------------


def test_a_plan_replays_written_indices_and_refuses_none_read_from_inputs() -> None:
    from test_compiled import _UNPLANNED, _plan_of, _Recorded, assert_same_bits

    rng = rng_for("plans")
    text = "cross_entropy(z, [0, 2], weight=[1, 2, 3], label_smoothing=0.1)"
    f = gradcli.compile(text)
    f({"z": rng.standard_normal((2, 3))})
    assert isinstance(_plan_of(f), _Recorded)
    z = {"z": rng.standard_normal((2, 3))}
    assert_same_bits(f(z), gradcli.evaluate(text, z), text)
    # indices that are an input are read into Python: evaluated afresh on every call
    text = "cross_entropy(z, y)"
    g = gradcli.compile(text)
    inputs = {"z": rng.standard_normal((2, 3)), "y": [0.0, 2.0]}
    assert_same_bits(g(inputs), gradcli.evaluate(text, inputs), text)
    assert _plan_of(g) is _UNPLANNED
    other = {**inputs, "y": [1.0, 1.0]}
    assert_same_bits(g(other), gradcli.evaluate(text, other), text)


def test_a_replay_refuses_a_probability_outside_0_1_as_an_evaluation_does() -> None:
    text = "binary_cross_entropy(p, t)"
    f = gradcli.compile(text)
    f({"p": [0.5, 0.2], "t": [1.0, 0.0]})
    bad = {"p": [0.5, 1.2], "t": [1.0, 0.0]}
    with pytest.raises(InvalidValueError) as replayed:
        f(bad)
    with pytest.raises(InvalidValueError) as fresh:
        gradcli.evaluate(text, bad)
    assert str(replayed.value) == str(fresh.value)
    assert "input[1] is 1.2" in str(fresh.value)


def test_on_dask_written_indices_work_and_indices_from_an_input_are_refused() -> None:
    pytest.importorskip("dask.array")
    from test_dask_backend import TINY, assert_as_numpy

    from gradcli import lazy

    rng = rng_for("dask")
    inputs = {"z": rng.standard_normal((4, 3)), "p": rng.uniform(0.1, 0.9, (4, 3))}
    text = (
        'cross_entropy(z, [0, 2, -100, 1], weight=[1, 2, 3], reduction="sum") '
        "+ cross_entropy(z, p, label_smoothing=0.1) + binary_cross_entropy(p, sigmoid(z))"
    )
    assert_as_numpy(lazy.evaluate(text, inputs, chunks=TINY), gradcli.evaluate(text, inputs), text)
    with pytest.raises(InputError, match="`nll_loss` is not available with the Dask backend "
                       "for class indices given as an input"):  # fmt: skip
        lazy.evaluate("nll_loss(z, y)", {"z": inputs["z"], "y": [0.0, 1, 2, 0]}, chunks=TINY)
