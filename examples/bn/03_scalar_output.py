# backward()-এর কেন scalar লাগে (docs/bn/README.md, অংশ ৫)
import gradcli as torch

x = torch.tensor([2.0, 3.0], requires_grad=True)
y = torch.tensor([5.0, 6.0], requires_grad=True)
z = x + y

# z একটা vector: কোন দিকে কতটা gradient পাঠাতে হবে, তা না বললে backward() চলে না
try:
    z.backward()
except RuntimeError as error:
    print("RuntimeError:", error)

# gradient= দিয়ে upstream gradient নিজেই দিলে চলে (vector-Jacobian product)
z.backward(gradient=torch.tensor([1.0, 2.0]))
print(x.grad)
print(y.grad)
