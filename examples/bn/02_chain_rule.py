# c = a*b + b: chain rule, আর b-র দুই পথের gradient যোগ হয় (docs/bn/README.md, অংশ ৪)
import gradcli as torch

a = torch.tensor([3.0, 4.0], requires_grad=True)
b = torch.tensor([5.0, 6.0], requires_grad=True)
c = a * b + b
print(c)

c.sum().backward()
print("a grad:", a.grad)  # dc/da = b = [5, 6]
print("b grad:", b.grad)  # dc/db = a + 1 = [4, 5]: a*b-র পথে a, "+ b"-র পথে 1
