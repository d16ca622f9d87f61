#!/usr/bin/env python3
"""Keep one ``gradcli batch`` process open and talk to it a line at a time.

``gradcli batch`` answers each request line as soon as it has read it and flushes the
answer, so a program can write a request, read its answer, and decide what to ask next,
all from one process that starts (and imports NumPy) only once. Here the "program" is
a small training loop: gradcli computes the gradient of the loss, Python takes the step.

Run it:  python examples/coprocess.py   (after `pip install .`; in a checkout without
installing, `GRADCLI="python -m gradcli" python examples/coprocess.py` from the
repository root)
"""

import json
import os
import shlex
import subprocess

# The command to start, e.g. GRADCLI="python -m gradcli" (split as the shell would).
COMMAND = [*shlex.split(os.environ.get("GRADCLI", "gradcli")), "batch"]

# Minimise loss(w) = sum((w - target)**2). Its gradient is 2 (w - target), so with a
# learning rate of 0.25 every step halves the distance to the target.
LOSS = "sum((w - target) ** 2)"
TARGET = [3.0, -1.0]
LR = 0.25

# bufsize=1 with text=True: our end of stdin is line-buffered, so every request line is
# sent as soon as it is written; gradcli flushes each answer line just as promptly.
with subprocess.Popen(
    COMMAND,
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,
    text=True,
    encoding="utf-8",
    bufsize=1,
) as gradcli:
    assert gradcli.stdin is not None and gradcli.stdout is not None

    def ask(request: dict) -> dict:
        """Send one request and wait for its answer (one line each way)."""
        gradcli.stdin.write(json.dumps(request) + "\n")
        return json.loads(gradcli.stdout.readline())

    w = [0.0, 0.0]
    for step in range(4):
        # Only w requires grad: the target is a constant.
        r = ask({"id": step, "expr": LOSS, "inputs": {"w": w, "target": TARGET}, "wrt": ["w"]})
        assert r["id"] == step  # answers come back in order, each with its request's id
        grad = r["inputs"]["w"]["grad"]
        print(f"step {step}: w = {w}, loss = {r['output']['value']}, grad = {grad}")
        w = [wi - LR * gi for wi, gi in zip(w, grad, strict=True)]

    # A bad request gets an error answer and the process stays up for the next one.
    r = ask({"id": "typo", "expr": "sum((w - target) *** 2)", "inputs": {"w": w, "target": TARGET}})
    print(f"bad request: {r['error']['kind']} error: {r['error']['message']}")
    r = ask({"id": "final", "expr": LOSS, "inputs": {"w": w, "target": TARGET}, "wrt": ["w"]})
    print(f"final: w = {w}, loss = {r['output']['value']}")

    # Closing stdin ends the stream: gradcli exits with 1 because one line failed.
    gradcli.stdin.close()
    print("gradcli exit status:", gradcli.wait())
