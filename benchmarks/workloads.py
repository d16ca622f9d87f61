"""The in-process workloads W1-W4, W7, W8, W9 and W12, written once per library.

``build(lib, wid, sizes)`` returns a function of no arguments that does the whole workload
once (make the leaves, forward, backward, read the gradients as NumPy arrays) and returns
``(value, grad, grad, ...)`` as NumPy, so every library's answer can be checked against the
NumPy-by-hand one before it is timed. Large inputs are made once, outside the timed
function, and wrapped without a copy (``gradcli.from_numpy`` / ``torch.from_numpy``); new
leaves are made on every call, so no gradient is accumulated across calls.

W3c is W3a's program through ``gradcli.compile``, beside W3a's NumPy and torch functions.
W8 (``optimize``) returns the losses, the final parameters and their gradients; W9
(``check``) returns the verdict of the gradient check (1.0: passed). W12 (a tall Jacobian)
returns the output and the Jacobian; gradcli and torch have a second row there, reverse
mode beside forward mode (``gradcli-reverse``, ``torch-reverse``). Not every library has
every workload (:func:`has`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .libs import AUTOGRAD, GRADCLI, GRADCLI_REV, NUMPY, TORCH, TORCH_REV

Fn = Callable[[], tuple[Any, ...]]


@dataclass(frozen=True)
class Sizes:
    w2_ops: int = 100  # elementwise ops in the W2 chain (a multiple of 4)
    w2_n: int = 4
    w3_n: int = 10**7
    w4: tuple[int, int, int] = (512, 512, 64)  # W is m×k, x is k×n, b is m×1
    w7_n: int = 64
    w8_n: int = 64  # W is n×n, x and b n elements
    w8_steps: int = 1000  # Adam steps in one timed call (the time is reported per step)
    w9_n: int = 32  # W is n×n, x n elements
    w12: tuple[int, int] = (10_000, 4)  # W12: A is m×n, x n elements, the output m


FULL = Sizes()
QUICK = Sizes(
    w2_ops=100, w2_n=4, w3_n=10**4, w4=(16, 16, 4), w7_n=4, w8_n=4, w8_steps=10, w9_n=4,
    w12=(200, 4),
)  # fmt: skip

# W8: gradcli's default learning rate (`gradcli optimize --lr`, gradcli.analysis.optimize),
# Adam's other settings the defaults of both gradcli.optim.Adam and torch.optim.Adam
W8_EXPR = "sum(tanh(W @ x + b) ** 2)"
W8_LR = 0.01
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8
# W9: the defaults of `gradcli check` (gradcli.analysis.check), given to gradcheck as well
W9_EXPR = "sum(tanh(W @ x))"
W9_EPS, W9_RTOL, W9_ATOL = 1e-6, 1e-5, 1e-8
# W12: a tall Jacobian (few inputs, many outputs), with respect to x only
W12_EXPR = "tanh(A @ x)"

DESCRIPTIONS = {
    "W1": "a*b+b, 2 elements: leaves, fwd + bwd of sum (per call)",
    "W2": "chain of {w2_ops} elementwise ops on {w2_n} elements, fwd + bwd (per op)",
    "W3a": "sum(a*b+b), {w3_n:.0e} float64, fwd + bwd",
    "W3b": "sum(tanh(a)*exp(-b**2)), {w3_n:.0e} float64, fwd + bwd",
    "W3c": "sum(a*b+b), {w3_n:.0e} float64, fwd + bwd: W3a through gradcli.compile, replayed",
    "W4": "sum(tanh(W@x+b)**2), W {w4[0]}×{w4[1]}, x {w4[1]}×{w4[2]}, b {w4[0]}×1",
    "W7": "hessian of sum(tanh(W@x)) wrt W and x, W {w7_n}×{w7_n}",
    "W7x": "hessian of sum(tanh(W@x)) wrt x only, W {w7_n}×{w7_n}",
    "W8": "optimize sum(tanh(W@x+b)**2), W {w8_n}×{w8_n}, x and b {w8_n} elements, "
    "wrt all: Adam, lr 0.01, {w8_steps} steps a call (per step)",
    "W9": "check sum(tanh(W@x)), W {w9_n}×{w9_n}, x {w9_n} elements: the whole gradient "
    "check, {w9_passes} forward passes of central differences",
    "W12": "the Jacobian of tanh(A @ x) wrt x, A {w12[0]}×{w12[1]}: x of {w12[1]} elements, "
    "an output of {w12[0]} (tall): forward mode (a pass per input element) and reverse mode "
    "(a pass per output element); report only",
}

# The library column, where a workload's row is more than the library's name.
LABELS = {
    ("W3c", GRADCLI): "gradcli.compile (the plan replayed)",
    ("W8", GRADCLI): "gradcli.analysis.optimize(optimizer='adam')",
    ("W8", NUMPY): "NumPy by hand: gradients and Adam written out",
    ("W8", TORCH): "PyTorch loop: torch.optim.Adam",
    ("W9", GRADCLI): "gradcli.analysis.check",
    ("W9", NUMPY): "NumPy by hand: analytic vs central differences",
    ("W9", TORCH): "torch.autograd.gradcheck",
    ("W12", GRADCLI): "gradcli.analysis.jacobian(mode='forward')",
    ("W12", GRADCLI_REV): "gradcli.analysis.jacobian(mode='reverse')",
    ("W12", NUMPY): "NumPy by hand: (1 - tanh²) A",
    ("W12", TORCH): "torch.func.jacfwd",
    ("W12", TORCH_REV): "torch.func.jacrev",
}
# ... and in the summary's lines, where that is long
SHORT = {("W8", TORCH): "the torch loop", ("W9", TORCH): "gradcheck"}


def describe(wid: str, sizes: Sizes) -> str:
    passes = 2 * (sizes.w9_n**2 + sizes.w9_n)
    return DESCRIPTIONS[wid].format(**sizes.__dict__, w9_passes=passes)


def label(lib: str, wid: str, default: str) -> str:
    return LABELS.get((wid, lib), default)


def short(lib: str, wid: str) -> str:
    return SHORT.get((wid, lib), "")


def has(lib: str, wid: str) -> bool:
    """Whether ``lib`` is measured on ``wid`` at all (W3c, W8, W9: not HIPS autograd)."""
    return wid in _BUILDERS[lib]


def per_call_divisor(wid: str, sizes: Sizes) -> float:
    """W2 is reported per operation: the time of the whole chain over its length; W8 per
    step: the time of a whole run over its steps."""
    if wid == "W2":
        return float(sizes.w2_ops)
    if wid == "W8":
        return float(sizes.w8_steps)
    return 1.0


def make_inputs(wid: str, sizes: Sizes) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    if wid == "W1":
        return {"a": np.array([3.0, 4.0]), "b": np.array([5.0, 6.0])}
    if wid == "W2":
        return {"x": rng.uniform(0.0, 1.0, sizes.w2_n), "y": rng.uniform(0.5, 1.5, sizes.w2_n)}
    if wid in ("W3a", "W3b", "W3c"):
        return {"a": rng.standard_normal(sizes.w3_n), "b": rng.standard_normal(sizes.w3_n)}
    if wid == "W4":
        m, k, n = sizes.w4
        return {
            "W": rng.standard_normal((m, k)) / np.sqrt(k),
            "x": rng.standard_normal((k, n)),
            "b": rng.standard_normal((m, 1)),
        }
    if wid in ("W7", "W7x"):
        n = sizes.w7_n
        return {"W": rng.standard_normal((n, n)) / np.sqrt(n), "x": rng.standard_normal(n)}
    if wid == "W8":
        n = sizes.w8_n
        return {
            "W": rng.standard_normal((n, n)) / np.sqrt(n),
            "x": rng.standard_normal(n),
            "b": rng.standard_normal(n),
        }
    if wid == "W9":
        n = sizes.w9_n
        return {"W": rng.standard_normal((n, n)) / np.sqrt(n), "x": rng.standard_normal(n)}
    if wid == "W12":
        m, n = sizes.w12
        return {"A": rng.standard_normal((m, n)) / np.sqrt(n), "x": rng.standard_normal(n)}
    raise KeyError(wid)


def build(lib: str, wid: str, sizes: Sizes) -> Fn:
    inp = make_inputs(wid, sizes)
    maker = _BUILDERS[lib][wid]
    return maker(inp, sizes)


def check(fn: Fn, reference: tuple[Any, ...]) -> str | None:
    """None when ``fn()`` gives the reference's numbers, else what differs."""
    got = fn()
    if len(got) != len(reference):
        return f"{len(got)} results, expected {len(reference)}"
    for i, (g, r) in enumerate(zip(got, reference, strict=True)):
        g, r = np.asarray(g, dtype=np.float64), np.asarray(r, dtype=np.float64)
        if g.shape != r.shape:
            return f"result {i}: shape {g.shape}, expected {r.shape}"
        if not np.allclose(g, r, rtol=1e-7, atol=1e-9):
            err = float(np.max(np.abs(g - r)))
            return f"result {i}: max abs difference {err:.3g}"
    return None


# --------------------------------------------------------------------------------------
# gradcli (the Python tensor API)
# --------------------------------------------------------------------------------------


def _gradcli_w1(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    import gradcli as g

    def fn() -> tuple[Any, ...]:
        a = g.tensor([3.0, 4.0], requires_grad=True)
        b = g.tensor([5.0, 6.0], requires_grad=True)
        out = g.sum(a * b + b)
        out.backward()
        return out.item(), a.grad.numpy(), b.grad.numpy()

    return fn


def _gradcli_w2(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    import gradcli as g

    x0, y0, cycles = inp["x"], inp["y"], sizes.w2_ops // 4

    def fn() -> tuple[Any, ...]:
        x = g.tensor(x0, requires_grad=True)
        y = g.tensor(y0, requires_grad=True)
        h = x
        for _ in range(cycles):
            h = g.exp(g.tanh(h * y + 0.5))
        out = g.sum(h)
        out.backward()
        return out.item(), x.grad.numpy(), y.grad.numpy()

    return fn


def _gradcli_w3a(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    import gradcli as g

    a0, b0 = inp["a"], inp["b"]

    def fn() -> tuple[Any, ...]:
        a = g.from_numpy(a0, requires_grad=True)
        b = g.from_numpy(b0, requires_grad=True)
        out = g.sum(a * b + b)
        out.backward()
        return out.item(), a.grad.numpy(), b.grad.numpy()

    return fn


def _gradcli_w3b(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    import gradcli as g

    a0, b0 = inp["a"], inp["b"]

    def fn() -> tuple[Any, ...]:
        a = g.from_numpy(a0, requires_grad=True)
        b = g.from_numpy(b0, requires_grad=True)
        out = g.sum(g.tanh(a) * g.exp(-(b**2)))
        out.backward()
        return out.item(), a.grad.numpy(), b.grad.numpy()

    return fn


def _gradcli_w4(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    import gradcli as g

    W0, x0, b0 = inp["W"], inp["x"], inp["b"]

    def fn() -> tuple[Any, ...]:
        W = g.from_numpy(W0, requires_grad=True)
        x = g.from_numpy(x0, requires_grad=True)
        b = g.from_numpy(b0, requires_grad=True)
        out = g.sum(g.tanh(g.matmul(W, x) + b) ** 2)
        out.backward()
        return out.item(), W.grad.numpy(), x.grad.numpy(), b.grad.numpy()

    return fn


def _gradcli_w7(wrt: list[str] | None) -> Callable[[dict[str, np.ndarray], Sizes], Fn]:
    def make(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
        from gradcli.analysis import hessian

        values = {"W": inp["W"], "x": inp["x"]}

        def fn() -> tuple[Any, ...]:
            h = hessian("sum(tanh(W@x))", values, wrt=wrt)
            return float(h.value), h.hessian

        return fn

    return make


def _gradcli_w3c(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    import gradcli as g

    a0, b0 = inp["a"], inp["b"]
    # copy=False: the inputs are read where they are, as W3a wraps them with from_numpy
    # (and torch with torch.from_numpy) instead of copying them
    f = g.compile("sum(a*b+b)", copy=False)
    f({"a": a0, "b": b0})  # the first call records the plan: what is checked and timed replays

    def fn() -> tuple[Any, ...]:
        r = f({"a": a0, "b": b0})
        return float(r.value), r.grads["a"], r.grads["b"]

    return fn


def _gradcli_w8(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    from gradcli.analysis import optimize

    values = dict(inp)  # optimize works on copies of them

    def fn() -> tuple[Any, ...]:
        r = optimize(W8_EXPR, values, optimizer="adam", steps=sizes.w8_steps, lr=W8_LR)
        return (
            np.asarray(r.losses),
            *(r.final[n][0] for n in ("W", "x", "b")),
            *(r.final[n][1] for n in ("W", "x", "b")),
        )

    return fn


def _gradcli_w9(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    from gradcli.analysis import check

    values = dict(inp)

    def fn() -> tuple[Any, ...]:
        c = check(W9_EXPR, values, eps=W9_EPS, rtol=W9_RTOL, atol=W9_ATOL)
        return (float(c.ok),)

    return fn


def _gradcli_w12(mode: str) -> Callable[[dict[str, np.ndarray], Sizes], Fn]:
    def make(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
        from gradcli.analysis import jacobian

        values = dict(inp)

        def fn() -> tuple[Any, ...]:
            j = jacobian(W12_EXPR, values, wrt=["x"], mode=mode)
            return j.value, j.jacobian["x"]

        return fn

    return make


# --------------------------------------------------------------------------------------
# NumPy by hand: the forward pass and the derivatives a person would write
# --------------------------------------------------------------------------------------


def _numpy_w1(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    def fn() -> tuple[Any, ...]:
        a = np.array([3.0, 4.0])
        b = np.array([5.0, 6.0])
        out = float(np.sum(a * b + b))
        return out, b.copy(), a + 1.0

    return fn


def _numpy_w2(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    x0, y0, cycles = inp["x"], inp["y"], sizes.w2_ops // 4

    def fn() -> tuple[Any, ...]:
        x = x0.copy()
        y = y0.copy()
        tape = []
        h = x
        for _ in range(cycles):
            t = np.tanh(h * y + 0.5)
            e = np.exp(t)
            tape.append((h, t, e))
            h = e
        out = float(np.sum(h))
        g = np.ones_like(h)
        gy = np.zeros_like(y)
        for hin, t, e in reversed(tape):
            g = g * e
            g = g * (1.0 - t * t)
            gy += g * hin
            g = g * y
        return out, g, gy

    return fn


def _numpy_w3a(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    a, b = inp["a"], inp["b"]

    def fn() -> tuple[Any, ...]:
        out = float(np.sum(a * b + b))
        return out, b.copy(), a + 1.0

    return fn


def numpy_w3b_step(a: np.ndarray, b: np.ndarray) -> tuple[Any, ...]:
    """``sum(tanh(a)*exp(-b**2))`` and its gradients, written out in NumPy (W3b, W10)."""
    ta = np.tanh(a)
    eb = np.exp(-(b * b))
    out = float(np.sum(ta * eb))
    ga = (1.0 - ta * ta) * eb
    gb = -2.0 * b * ta * eb
    return out, ga, gb


def _numpy_w3b(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    a, b = inp["a"], inp["b"]

    def fn() -> tuple[Any, ...]:
        return numpy_w3b_step(a, b)

    return fn


def _numpy_w4(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    W, x, b = inp["W"], inp["x"], inp["b"]

    def fn() -> tuple[Any, ...]:
        h = np.tanh(W @ x + b)
        out = float(np.sum(h**2))
        gz = 2.0 * h * (1.0 - h * h)
        return out, gz @ x.T, W.T @ gz, gz.sum(axis=1, keepdims=True)

    return fn


def _numpy_w7(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    W, x = inp["W"], inp["x"]
    n = x.size

    def fn() -> tuple[Any, ...]:
        t = np.tanh(W @ x)
        s = 1.0 - t * t  # d tanh
        d2 = -2.0 * t * s  # d² tanh
        h = np.zeros((n * n + n, n * n + n))
        xx = np.outer(x, x)
        for i in range(n):  # d²/dW_ij dW_il = d2_i x_j x_l, zero across rows i
            h[i * n : (i + 1) * n, i * n : (i + 1) * n] = d2[i] * xx
        # d²/dW_ij dx_l = d2_i W_il x_j + s_i [j = l]
        wx = d2[:, None, None] * x[None, :, None] * W[:, None, :] + s[:, None, None] * np.eye(n)
        h[: n * n, n * n :] = wx.reshape(n * n, n)
        h[n * n :, : n * n] = h[: n * n, n * n :].T
        h[n * n :, n * n :] = W.T @ (d2[:, None] * W)
        return float(np.sum(t)), h

    return fn


def _numpy_w7x(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    W, x = inp["W"], inp["x"]

    def fn() -> tuple[Any, ...]:
        t = np.tanh(W @ x)
        d2 = -2.0 * t * (1.0 - t * t)
        return float(np.sum(t)), W.T @ (d2[:, None] * W)

    return fn


def _numpy_w8(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    W0, x0, b0 = inp["W"], inp["x"], inp["b"]
    b1, b2 = ADAM_BETAS

    def loss_and_grads(W: Any, x: Any, b: Any) -> tuple[float, list[Any]]:
        h = np.tanh(W @ x + b)
        gz = 2.0 * h * (1.0 - h * h)
        return float(np.sum(h**2)), [np.outer(gz, x), W.T @ gz, gz]

    def fn() -> tuple[Any, ...]:
        params = [W0.copy(), x0.copy(), b0.copy()]
        ms = [np.zeros_like(p) for p in params]
        vs = [np.zeros_like(p) for p in params]
        losses = []
        for t in range(1, sizes.w8_steps + 1):
            loss, grads = loss_and_grads(*params)
            losses.append(loss)
            for p, m, v, g in zip(params, ms, vs, grads, strict=True):
                m *= b1
                m += (1.0 - b1) * g
                v *= b2
                v += (1.0 - b2) * g * g
                denom = np.sqrt(v) / np.sqrt(1.0 - b2**t) + ADAM_EPS
                p -= (W8_LR / (1.0 - b1**t)) * (m / denom)
        loss, grads = loss_and_grads(*params)
        losses.append(loss)
        return (np.asarray(losses), *params, *grads)

    return fn


def _numpy_w9(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    W, x = inp["W"], inp["x"]

    def f(W: Any, x: Any) -> float:
        return float(np.sum(np.tanh(W @ x)))

    def fn() -> tuple[Any, ...]:
        s = 1.0 - np.tanh(W @ x) ** 2
        analytic = [np.outer(s, x), W.T @ s]
        ok = True
        for i, a in enumerate(analytic):
            args = [W, x]
            numeric = np.empty(a.size)
            for k in range(a.size):
                sides = []
                for step in (W9_EPS, -W9_EPS):
                    moved = args[i].copy()
                    moved.flat[k] += step
                    sides.append(f(*(moved if j == i else v for j, v in enumerate(args))))
                numeric[k] = (sides[0] - sides[1]) / (2 * W9_EPS)
            ok = ok and bool(
                np.all(np.abs(a.ravel() - numeric) <= W9_ATOL + W9_RTOL * np.abs(numeric))
            )
        return (float(ok),)

    return fn


def _numpy_w12(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    A, x = inp["A"], inp["x"]

    def fn() -> tuple[Any, ...]:
        t = np.tanh(A @ x)
        return t, (1.0 - t * t)[:, None] * A

    return fn


# --------------------------------------------------------------------------------------
# PyTorch (float64, CPU)
# --------------------------------------------------------------------------------------


def _torch_w1(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    import torch

    f64 = torch.float64

    def fn() -> tuple[Any, ...]:
        a = torch.tensor([3.0, 4.0], dtype=f64, requires_grad=True)
        b = torch.tensor([5.0, 6.0], dtype=f64, requires_grad=True)
        out = torch.sum(a * b + b)
        out.backward()
        return out.item(), a.grad.numpy(), b.grad.numpy()

    return fn


def _torch_w2(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    import torch

    x0, y0, cycles = inp["x"], inp["y"], sizes.w2_ops // 4

    def fn() -> tuple[Any, ...]:
        x = torch.tensor(x0, requires_grad=True)
        y = torch.tensor(y0, requires_grad=True)
        h = x
        for _ in range(cycles):
            h = torch.exp(torch.tanh(h * y + 0.5))
        out = torch.sum(h)
        out.backward()
        return out.item(), x.grad.numpy(), y.grad.numpy()

    return fn


def _torch_w3a(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    import torch

    a0, b0 = inp["a"], inp["b"]

    def fn() -> tuple[Any, ...]:
        a = torch.from_numpy(a0).requires_grad_()
        b = torch.from_numpy(b0).requires_grad_()
        out = torch.sum(a * b + b)
        out.backward()
        return out.item(), a.grad.numpy(), b.grad.numpy()

    return fn


def _torch_w3b(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    import torch

    a0, b0 = inp["a"], inp["b"]

    def fn() -> tuple[Any, ...]:
        a = torch.from_numpy(a0).requires_grad_()
        b = torch.from_numpy(b0).requires_grad_()
        out = torch.sum(torch.tanh(a) * torch.exp(-(b**2)))
        out.backward()
        return out.item(), a.grad.numpy(), b.grad.numpy()

    return fn


def _torch_w4(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    import torch

    W0, x0, b0 = inp["W"], inp["x"], inp["b"]

    def fn() -> tuple[Any, ...]:
        W = torch.from_numpy(W0).requires_grad_()
        x = torch.from_numpy(x0).requires_grad_()
        b = torch.from_numpy(b0).requires_grad_()
        out = torch.sum(torch.tanh(torch.matmul(W, x) + b) ** 2)
        out.backward()
        return out.item(), W.grad.numpy(), x.grad.numpy(), b.grad.numpy()

    return fn


def _torch_w7(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    import torch
    from torch.autograd.functional import hessian

    W, x = torch.from_numpy(inp["W"]), torch.from_numpy(inp["x"])
    n = inp["x"].size

    def f(W: Any, x: Any) -> Any:
        return torch.sum(torch.tanh(W @ x))

    def fn() -> tuple[Any, ...]:
        (hww, hwx), (hxw, hxx) = hessian(f, (W, x))
        h = torch.cat(
            [
                torch.cat([hww.reshape(n * n, n * n), hwx.reshape(n * n, n)], dim=1),
                torch.cat([hxw.reshape(n, n * n), hxx], dim=1),
            ]
        )
        return f(W, x).item(), h.numpy()

    return fn


def _torch_w7x(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    import torch
    from torch.autograd.functional import hessian

    W, x = torch.from_numpy(inp["W"]), torch.from_numpy(inp["x"])

    def f(x: Any) -> Any:
        return torch.sum(torch.tanh(W @ x))

    def fn() -> tuple[Any, ...]:
        return f(x).item(), hessian(f, x).numpy()

    return fn


def _torch_w8(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    import torch

    W0, x0, b0 = inp["W"], inp["x"], inp["b"]

    def fn() -> tuple[Any, ...]:
        params = [torch.tensor(p, requires_grad=True) for p in (W0, x0, b0)]  # copies
        W, x, b = params
        opt = torch.optim.Adam(params, lr=W8_LR, betas=ADAM_BETAS, eps=ADAM_EPS)
        losses = []
        for _ in range(sizes.w8_steps):
            opt.zero_grad()
            loss = torch.sum(torch.tanh(W @ x + b) ** 2)
            loss.backward()
            losses.append(loss.item())
            opt.step()
        opt.zero_grad()
        loss = torch.sum(torch.tanh(W @ x + b) ** 2)
        loss.backward()
        losses.append(loss.item())
        return (
            np.asarray(losses),
            *(p.detach().numpy() for p in params),
            *(p.grad.numpy() for p in params),
        )

    return fn


def _torch_w9(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    import torch

    W = torch.from_numpy(inp["W"]).requires_grad_()
    x = torch.from_numpy(inp["x"]).requires_grad_()

    def f(W: Any, x: Any) -> Any:
        return torch.sum(torch.tanh(W @ x))

    def fn() -> tuple[Any, ...]:
        ok = torch.autograd.gradcheck(
            f, (W, x), eps=W9_EPS, atol=W9_ATOL, rtol=W9_RTOL, raise_exception=False
        )
        return (float(ok),)

    return fn


def _torch_w12(transform: str) -> Callable[[dict[str, np.ndarray], Sizes], Fn]:
    def make(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
        import torch
        import torch.func

        A, x = torch.from_numpy(inp["A"]), torch.from_numpy(inp["x"])

        def f(x: Any) -> Any:
            return torch.tanh(A @ x)

        jac = getattr(torch.func, transform)(f)

        def fn() -> tuple[Any, ...]:
            return f(x).numpy(), jac(x).numpy()

        return fn

    return make


# --------------------------------------------------------------------------------------
# HIPS autograd
# --------------------------------------------------------------------------------------


def _autograd_w1(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    import autograd
    import autograd.numpy as anp

    vg = autograd.value_and_grad(lambda a, b: anp.sum(a * b + b), (0, 1))

    def fn() -> tuple[Any, ...]:
        value, (ga, gb) = vg(np.array([3.0, 4.0]), np.array([5.0, 6.0]))
        return float(value), ga, gb

    return fn


def _autograd_w2(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    import autograd
    import autograd.numpy as anp

    x0, y0, cycles = inp["x"], inp["y"], sizes.w2_ops // 4

    def f(x: Any, y: Any) -> Any:
        h = x
        for _ in range(cycles):
            h = anp.exp(anp.tanh(h * y + 0.5))
        return anp.sum(h)

    vg = autograd.value_and_grad(f, (0, 1))

    def fn() -> tuple[Any, ...]:
        value, (gx, gy) = vg(x0.copy(), y0.copy())
        return float(value), gx, gy

    return fn


def _autograd_simple(expr: Callable[..., Any], names: tuple[str, ...]) -> Any:
    def make(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
        import autograd

        vg = autograd.value_and_grad(expr, tuple(range(len(names))))
        args = [inp[n] for n in names]

        def fn() -> tuple[Any, ...]:
            value, grads = vg(*args)
            return (float(value), *grads)

        return fn

    return make


def _ag_w3a(a: Any, b: Any) -> Any:
    import autograd.numpy as anp

    return anp.sum(a * b + b)


def _ag_w3b(a: Any, b: Any) -> Any:
    import autograd.numpy as anp

    return anp.sum(anp.tanh(a) * anp.exp(-(b**2)))


def _ag_w4(W: Any, x: Any, b: Any) -> Any:
    import autograd.numpy as anp

    return anp.sum(anp.tanh(anp.matmul(W, x) + b) ** 2)


def _autograd_w7(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    import autograd
    import autograd.numpy as anp

    n = inp["x"].size
    v = np.concatenate([inp["W"].ravel(), inp["x"]])

    def f(v: Any) -> Any:
        return anp.sum(anp.tanh(anp.reshape(v[: n * n], (n, n)) @ v[n * n :]))

    hess = autograd.hessian(f)

    def fn() -> tuple[Any, ...]:
        return float(f(v)), hess(v)

    return fn


def _autograd_w7x(inp: dict[str, np.ndarray], sizes: Sizes) -> Fn:
    import autograd
    import autograd.numpy as anp

    W, x = inp["W"], inp["x"]

    def f(x: Any) -> Any:
        return anp.sum(anp.tanh(W @ x))

    hess = autograd.hessian(f)

    def fn() -> tuple[Any, ...]:
        return float(f(x)), hess(x)

    return fn


_BUILDERS: dict[str, dict[str, Callable[[dict[str, np.ndarray], Sizes], Fn]]] = {
    GRADCLI: {
        "W1": _gradcli_w1,
        "W2": _gradcli_w2,
        "W3a": _gradcli_w3a,
        "W3b": _gradcli_w3b,
        "W3c": _gradcli_w3c,
        "W4": _gradcli_w4,
        "W7": _gradcli_w7(None),
        "W7x": _gradcli_w7(["x"]),
        "W8": _gradcli_w8,
        "W9": _gradcli_w9,
        "W12": _gradcli_w12("forward"),
    },
    GRADCLI_REV: {"W12": _gradcli_w12("reverse")},
    NUMPY: {
        "W1": _numpy_w1,
        "W2": _numpy_w2,
        "W3a": _numpy_w3a,
        "W3b": _numpy_w3b,
        "W3c": _numpy_w3a,  # the same NumPy by hand as W3a
        "W4": _numpy_w4,
        "W7": _numpy_w7,
        "W7x": _numpy_w7x,
        "W8": _numpy_w8,
        "W9": _numpy_w9,
        "W12": _numpy_w12,
    },
    TORCH: {
        "W1": _torch_w1,
        "W2": _torch_w2,
        "W3a": _torch_w3a,
        "W3b": _torch_w3b,
        "W3c": _torch_w3a,
        "W4": _torch_w4,
        "W7": _torch_w7,
        "W7x": _torch_w7x,
        "W8": _torch_w8,
        "W9": _torch_w9,
        "W12": _torch_w12("jacfwd"),
    },
    TORCH_REV: {"W12": _torch_w12("jacrev")},
    AUTOGRAD: {
        "W1": _autograd_w1,
        "W2": _autograd_w2,
        "W3a": _autograd_simple(_ag_w3a, ("a", "b")),
        "W3b": _autograd_simple(_ag_w3b, ("a", "b")),
        "W4": _autograd_simple(_ag_w4, ("W", "x", "b")),
        "W7": _autograd_w7,
        "W7x": _autograd_w7x,
    },
}
