# clip_grad_norm_: সব gradient একসাথে ছোট করা (docs/bn/README.md, অংশ ৭)
import gradcli as torch

a = torch.tensor([3.0, 4.0], requires_grad=True)
b = torch.tensor([5.0, 6.0], requires_grad=True)
c = a * b + b
c.sum().backward()

# মোট norm = sqrt(5² + 6² + 4² + 5²) = sqrt(102) > 1, তাই প্রতিটা gradient গুণ হয়
# 1 / (sqrt(102) + 1e-6) দিয়ে। ফেরত আসে clip করার *আগের* মোট norm।
total = torch.nn.utils.clip_grad_norm_([a, b], max_norm=1.0)
print("total norm:", total)
print("a grad:", a.grad)
print("b grad:", b.grad)
