#!/usr/bin/env bash
# The torch.autograd tutorial's gradient handling as `gradcli eval` calls: the same numbers
# examples/tutorial.py prints from Python, one command per idea.
#
# Run it:  bash examples/tutorial.sh
# Without an installed `gradcli`, point GRADCLI at the module (from the repository root):
#   GRADCLI="python -m gradcli" bash examples/tutorial.sh
set -euo pipefail

# Deliberately unquoted where used below, so "python -m gradcli" splits into three words.
GRADCLI=${GRADCLI:-gradcli}

step() { printf '\n### %s\n' "$*"; }

# Values are quoted ('[2,3]') so that the shell never reads the brackets as a glob pattern.

step "1. z = x + y; z.sum().backward(): every input gets d sum(z) / d input = [1, 1]"
# eval requires grad for every input by default. The output z is a vector and backward()
# needs a scalar, so eval sums it first, as the tutorial does, and the caption says so.
$GRADCLI eval "x + y" x='[2,3]' y='[5,6]'

step "2. c = a*b + b: d/da = b = [5, 6], d/db = a + 1 = [4, 5]"
$GRADCLI eval "a*b + b" a='[3,4]' b='[5,6]'

step "3. --wrt a: only a requires grad; b is a constant and gets no gradient"
# In PyTorch: a = torch.tensor(..., requires_grad=True) but b = torch.tensor(...) without.
$GRADCLI eval "a*b + b" a='[3,4]' b='[5,6]' --wrt a

step "4. --grad-output: c.backward(gradient=[1, 2]) instead of c.sum().backward()"
# The upstream gradient weights each output element: a gets b * [1, 2] = [5, 12] and
# b gets (a + 1) * [1, 2] = [4, 10]. Nothing is summed: the JSON says "reduction": null.
$GRADCLI eval "a*b + b" a='[3,4]' b='[5,6]' --grad-output '[1,2]' --json

step "5. Gradients accumulate until zeroed: two backwards give a.grad = [10, 12]"
# Every eval starts from fresh (zero) gradients: that is the tutorial's x.grad.zero_().
# `batch --accumulate` calls backward() once per request line without zeroing in between,
# so the same request twice gives twice the gradient in its last line.
printf '%s\n' \
    '{"expr": "a*b + b", "inputs": {"a": [3, 4], "b": [5, 6]}}' \
    '{"expr": "a*b + b", "inputs": {"a": [3, 4], "b": [5, 6]}}' |
    $GRADCLI batch --accumulate | tail -n 1

step "6. --clip-value 4.5: every gradient element clamped into [-4.5, 4.5]"
# As torch.nn.utils.clip_grad_value_: a's [5, 6] becomes [4.5, 4.5], b's [4, 5] [4, 4.5].
$GRADCLI eval "a*b + b" a='[3,4]' b='[5,6]' --clip-value 4.5

step "7. --clip-norm 1 --norm-type inf: the largest |gradient| (6) becomes about 1"
$GRADCLI eval "a*b + b" a='[3,4]' b='[5,6]' --clip-norm 1 --norm-type inf

step "8. --clip-norm 1: torch.nn.utils.clip_grad_norm_([a, b], max_norm=1.0)"
# The total norm of all the gradients together is sqrt(5²+6²+4²+5²) = sqrt(102) = 10.0995;
# it is over max_norm, so every gradient is scaled by 1 / (10.0995 + 1e-6) = 0.0990147:
# a.grad = [0.4951, 0.5941], b.grad = [0.3961, 0.4951]. The table shows the clipped
# gradients; the caption, the total norm before clipping and the scale.
$GRADCLI eval "a*b + b" a='[3,4]' b='[5,6]' --clip-norm 1
