# gradient জমা হয় (accumulation), zero_() শূন্য করে (docs/bn/README.md, অংশ ৬)
import gradcli as torch

a = torch.tensor([3.0, 4.0], requires_grad=True)
b = torch.tensor([5.0, 6.0], requires_grad=True)
c = a * b + b

c.sum().backward(retain_graph=True)  # graph রেখে দাও: আবার backward() করব
print("after one backward:", a.grad)
c.sum().backward()  # আগের .grad-এর সাথে যোগ হয়, বদলে যায় না
print("after two backwards:", a.grad)

a.grad.zero_()  # জায়গাতেই (in place) শূন্য
b.grad.zero_()
print("after zero_:", a.grad, b.grad)

c = a * b + b  # নতুন graph, নতুন backward(): আবার শুরু থেকে
c.sum().backward()
print("after zero_ and one backward:", a.grad)
