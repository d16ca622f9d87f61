# x + y: requires_grad, grad_fn আর .grad (docs/bn/README.md, অংশ ২ ও ৩)
import gradcli as torch

# requires_grad=True: এই tensor-এর gradient আমাদের দরকার। এর ওপর যা-ই হিসাব হবে, gradcli
# (PyTorch-এর মতোই) তার graph মনে রাখবে।
x = torch.tensor([2.0, 3.0], requires_grad=True)
y = torch.tensor([5.0, 6.0], requires_grad=True)
w = torch.tensor([1.0, 1.0])  # requires_grad ছাড়া: একটা constant
print(x)
print(w.requires_grad)
print(x.grad)  # backward()-এর আগে কোনো gradient নেই: None

z = x + y
print(z)  # grad_fn: z কোন operation থেকে এসেছে, backward() সেটা ধরে পিছনে হাঁটবে

# backward()-এর একটা scalar দরকার, তাই আগে sum() (কেন, তা অংশ ৫-এ)
z.sum().backward()
print(x.grad)  # d sum(x + y) / dx = [1, 1]
print(y.grad)
