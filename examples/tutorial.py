#!/usr/bin/env python3
"""The torch.autograd tutorial's gradient handling, run by gradcli.

Everything below the import is PyTorch code, unchanged: replace the import with
``import torch`` and the script prints exactly the same lines (tests/test_examples.py
checks that gradcli prints what PyTorch printed for this very script).

Run it:  python examples/tutorial.py  (after `pip install .`; in a checkout without
installing, `PYTHONPATH=. python examples/tutorial.py` from the repository root)
"""

import gradcli as torch

# 1. Leaves that require grad collect .grad; tensors made from them carry the graph.
#    backward() needs a scalar, so the vector z is summed first (as the tutorial does).
x = torch.tensor([2.0, 3.0], requires_grad=True)
y = torch.tensor([5.0, 6.0], requires_grad=True)
z = x + y
z.sum().backward()
print(x.grad)  # d sum(x + y) / dx = 1 for every element
print(y.grad)

# 2. A product: d(a*b + b)/da = b and d(a*b + b)/db = a + 1.
a = torch.tensor([3.0, 4.0], requires_grad=True)
b = torch.tensor([5.0, 6.0], requires_grad=True)
c = a * b + b
c.sum().backward()
print("a grad:", a.grad)
print("b grad:", b.grad)

# 3. Zero the gradients in place: the next backward() would otherwise add to them.
x.grad.zero_()
y.grad.zero_()
print("after zero_:", x.grad, y.grad)

# 4. Clip a and b's gradients together: their total 2-norm is sqrt(5²+6²+4²+5²) = sqrt(102),
#    so every gradient is scaled by 1 / (sqrt(102) + 1e-6). The norm *before* clipping is
#    returned, so a training loop can log it.
total = torch.nn.utils.clip_grad_norm_([a, b], max_norm=1.0)
print("total norm:", total)
print("a grad:", a.grad)
print("b grad:", b.grad)

# 5. Gradients accumulate across backward() calls until zeroed: two backwards through
#    a*b + b give twice the gradient. A backward frees the graph's saved values unless
#    retain_graph=True, in gradcli as in PyTorch (a second backward would raise).
a.grad = None  # forget the clipped gradients (the same as never having any)
b.grad = None
c = a * b + b
c.sum().backward(retain_graph=True)
c.sum().backward()
print("a grad after two backwards:", a.grad)  # [5, 6] + [5, 6]

# 6. An optimiser does the bookkeeping of a training loop: zero_grad() sets the grads to
#    None, backward() fills them, step() moves the parameters against them.
#    Minimise sum((w - 3)²), whose gradient is 2 (w - 3).
w = torch.tensor([1.0, -2.0], requires_grad=True)
opt = torch.optim.SGD([w], lr=0.1)
for _ in range(3):
    opt.zero_grad()
    loss = ((w - 3.0) ** 2).sum()
    loss.backward()
    opt.step()
print("SGD:", w)  # each step takes 20% of the way to 3

w = torch.tensor([1.0, -2.0], requires_grad=True)
opt = torch.optim.Adam([w], lr=0.1)
for _ in range(3):
    opt.zero_grad()
    loss = ((w - 3.0) ** 2).sum()
    loss.backward()
    opt.step()
print("Adam:", w)  # Adam's steps are about lr long, whatever the gradient's size
opt.zero_grad()
print("grad after zero_grad():", w.grad)  # None, not zeros (PyTorch 2)
