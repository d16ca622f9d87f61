"""``gradcli.optim``: SGD (with momentum) and Adam, with PyTorch's update rules."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from . import autograd as E
from .autograd import Tensor


class Optimizer:
    """Holds parameters; ``zero_grad()`` sets their grads to None (PyTorch 2's default)."""

    def __init__(self, params: Tensor | Iterable[Tensor], lr: float) -> None:
        self.params = [params] if isinstance(params, Tensor) else list(params)
        if not self.params:
            raise ValueError("optimizer got an empty parameter list")
        if not lr >= 0:
            raise ValueError(f"Invalid learning rate: {lr}")
        self.lr = float(lr)
        self.state: dict[int, dict[str, Any]] = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.zero_()

    def step(self) -> None:
        with E.no_grad():
            for i, p in enumerate(self.params):
                if p.grad is not None:
                    self._update(p, p.grad.data, self.state.setdefault(i, {}))

    def _update(self, p: Tensor, g: Any, state: dict[str, Any]) -> None:
        raise NotImplementedError


class SGD(Optimizer):
    """``p -= lr * g``; with ``momentum`` the buffer ``b = momentum * b + (1 - dampening) * g``
    (the first step ``b = g``), and ``nesterov`` uses ``g + momentum * b``."""

    def __init__(
        self,
        params: Tensor | Iterable[Tensor],
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
    ) -> None:
        super().__init__(params, lr)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        self.momentum = float(momentum)
        self.dampening = float(dampening)
        self.weight_decay = float(weight_decay)
        self.nesterov = nesterov

    def _update(self, p: Tensor, g: Any, state: dict[str, Any]) -> None:
        if self.weight_decay:
            g = g + self.weight_decay * p.data
        if self.momentum:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = g.copy()
            else:
                buf *= self.momentum
                buf += (1.0 - self.dampening) * g
            g = g + self.momentum * buf if self.nesterov else buf
        p.data -= self.lr * g


class Adam(Optimizer):
    """Adam with bias correction, exactly as ``torch.optim.Adam`` (``amsgrad`` included)."""

    def __init__(
        self,
        params: Tensor | Iterable[Tensor],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
    ) -> None:
        super().__init__(params, lr)
        self.betas = (float(betas[0]), float(betas[1]))
        self.eps = float(eps)
        self.weight_decay = float(weight_decay)
        self.amsgrad = amsgrad

    def _update(self, p: Tensor, g: Any, state: dict[str, Any]) -> None:
        b1, b2 = self.betas
        if self.weight_decay:
            g = g + self.weight_decay * p.data
        if not state:
            state["step"] = 0
            state["exp_avg"] = g * 0.0
            state["exp_avg_sq"] = g * 0.0
            if self.amsgrad:
                state["max_exp_avg_sq"] = g * 0.0
        state["step"] += 1
        t = state["step"]
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m *= b1
        m += (1.0 - b1) * g
        v *= b2
        v += (1.0 - b2) * g * g
        if self.amsgrad:
            vmax = state["max_exp_avg_sq"]
            E.NUMPY.maximum(vmax, v, out=vmax)
            v = vmax
        bias1 = 1.0 - b1**t
        bias2 = 1.0 - b2**t
        denom = E.NUMPY.sqrt(v) / math.sqrt(bias2) + self.eps
        p.data -= (self.lr / bias1) * (m / denom)
