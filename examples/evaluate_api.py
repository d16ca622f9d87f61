#!/usr/bin/env python3
"""gradcli from a Python script: ``gradcli.evaluate()`` is what ``gradcli eval`` runs.

Run it:  python examples/evaluate_api.py  (after `pip install .`; in a checkout without
installing, `PYTHONPATH=. python examples/evaluate_api.py` from the repository root)
"""

import json

import gradcli

# 1. The tutorial's c = a*b + b. The output is a vector, so it is summed before backward()
#    (as c.sum().backward()) and the result says so.
r = gradcli.evaluate("a*b + b", {"a": [3, 4], "b": [5, 6]})
print("value:", r.value)  # a NumPy array: [20. 30.]
print("grad a:", r.grads["a"])  # d sum(c) / da = b = [5. 6.]
print("grad b:", r.grads["b"])  # d sum(c) / db = a + 1 = [4. 5.]
print("reduction:", r.reduction)  # "sum"

# 2. Only a requires grad (b is a constant: its grad is None). A binding such as h is an
#    intermediate: (value, gradient of the output with respect to it), as retain_grad().
r = gradcli.evaluate("h = a*b; sum(h + b)", {"a": [3, 4], "b": [5, 6]}, wrt=["a"])
h_value, h_grad = r.intermediates["h"]
print("h:", h_value, "grad h:", h_grad)
print("grad a:", r.grads["a"], "grad b:", r.grads["b"])

# 3. Clipping as torch.nn.utils.clip_grad_norm_: r.clip reports the norm before clipping
#    and the scale applied; the gradients in r.grads are the clipped ones.
r = gradcli.evaluate("sum(a*b + b)", {"a": [3, 4], "b": [5, 6]}, clip_norm=1.0)
print(f"total norm {r.clip['total_norm']:.4f}, scale {r.clip['scale']:.6f}")
print("clipped grad a:", r.grads["a"].round(4))

# 4. to_json() is exactly the response of `gradcli eval --json` (strict JSON, a dict).
r = gradcli.evaluate("x * y", {"x": 2, "y": 3}, wrt=["x"])
print(json.dumps(r.to_json()))

# 5. Errors are typed: one class per "kind" of the JSON error, all subclasses of
#    gradcli.GradcliError, with the message and (where it applies) the position.
try:
    gradcli.evaluate("a @ b", {"a": [1, 2], "b": [1, 2, 3]})
except gradcli.ShapeError as e:
    print(f"ShapeError (kind {e.kind!r}): {e.message}")

try:
    gradcli.evaluate("h = a * 2\nsum(h +* 1)", {"a": [1, 2]})
except gradcli.GradcliError as e:
    print(f"{type(e).__name__} (kind {e.kind!r}) at line {e.line}, column {e.column}")
