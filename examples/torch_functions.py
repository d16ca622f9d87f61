#!/usr/bin/env python3
"""Issue 17's functions as a PyTorch tutorial uses them, run by gradcli.

Everything below the imports is PyTorch code, unchanged: replace the two imports with
``import torch`` and ``import torch.nn.functional as F`` and the script prints the same
numbers (tests/test_examples.py checks both): activations (gelu in both forms, leaky_relu,
elu, silu, softsign), every loss, slogdet, cholesky, pinv, einsum, cumsum, cumprod, tril,
triu, erf, logaddexp, then torch.func's jvp, vjp, grad, jacfwd, jacrev and hessian, and
torch.autograd.functional.hvp.
"""

import gradcli as torch
import gradcli.nn.functional as F


def show(name, t):
    """Print a tensor's numbers, rounded, the same way in both libraries."""
    values = t.detach().reshape(-1).tolist() if hasattr(t, "detach") else [t]
    print(name, [round(float(v), 9) for v in values])


x = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.0, -0.5]], dtype=torch.float64, requires_grad=True)
W = torch.tensor(
    [[0.1, 0.2, -0.3], [0.4, -0.5, 0.6], [0.7, 0.8, -0.9]], dtype=torch.float64, requires_grad=True
)
y = torch.tensor([2, 0])

h = F.gelu(x @ W)
h2 = F.gelu(x @ W, approximate="tanh")
logits = F.leaky_relu(h, negative_slope=0.1) + F.elu(h2, alpha=1.0) + F.silu(h) + F.softsign(h)
loss = F.cross_entropy(logits, y) + F.nll_loss(F.log_softmax(logits, dim=1), y)
loss = loss + F.cross_entropy(logits, F.softmax(h, dim=1), label_smoothing=0.1)
loss = loss + F.mse_loss(h, h2) + F.huber_loss(h, h2, delta=0.5) + F.l1_loss(h, h2, reduction="sum")
p = torch.sigmoid(logits)
loss = loss + F.binary_cross_entropy(p, torch.ones_like(p) * 0.3, reduction="sum")
loss = loss + F.binary_cross_entropy_with_logits(logits, torch.zeros_like(logits))
A = W @ W.T + torch.eye(3, dtype=torch.float64)
sign, logabsdet = torch.linalg.slogdet(A)
L = torch.linalg.cholesky(A)
loss = loss + sign * logabsdet + L.sum() + torch.linalg.pinv(x).sum()
loss = loss + torch.einsum("ij,jk->ik", x, W).sum() + torch.einsum("ii->", A)
loss = loss + torch.einsum("bi,bj->bij", x, x).sum() + torch.einsum("ii->i", A).sum()
loss = loss + torch.cumsum(x, dim=1).sum() + torch.cumprod(x, dim=0).sum()
loss = loss + torch.tril(A).sum() + torch.triu(A, diagonal=1).sum()
loss = loss + torch.erf(x).sum() + torch.logaddexp(x, 2 * x).sum()
loss.backward()
show("loss", loss)
show("x.grad", x.grad)
for i in range(3):
    show(f"W.grad[{i}]", W.grad[i])

v = torch.tensor([0.3, -1.2, 2.5], dtype=torch.float64)
out, tangent = torch.func.jvp(F.gelu, (v,), (torch.ones_like(v),))
show("jvp out", out)
show("jvp tangent", tangent)
out, vjp_fn = torch.func.vjp(torch.erf, v)
show("vjp", vjp_fn(torch.ones_like(v))[0])
show("grad", torch.func.grad(lambda a: F.silu(a).sum())(v))
show("jacfwd", torch.func.jacfwd(torch.cumprod, argnums=0)(v, 0))
show("jacrev", torch.func.jacrev(lambda a: F.softsign(a))(v))
show("hessian", torch.func.hessian(lambda a: torch.logaddexp(a, a * a).sum())(v))
_, hv = torch.autograd.functional.hvp(lambda a: F.gelu(a).sum(), v, torch.ones_like(v))
show("hvp", hv)
