#!/usr/bin/env bash
# gradcli in pipes: JSON requests in, JSON responses out. No jq needed: a few lines of
# Python's json module read the answers.
#
# Run it:  bash examples/pipeline.sh
# Without an installed `gradcli`, point GRADCLI at the module (from the repository root):
#   GRADCLI="python -m gradcli" bash examples/pipeline.sh
set -euo pipefail

# Deliberately unquoted where used below, so "python -m gradcli" splits into three words.
GRADCLI=${GRADCLI:-gradcli}
PYTHON=${PYTHON:-python3}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

step() { printf '\n### %s\n' "$*"; }

step "1. One request on stdin, one JSON response on stdout"
# `eval -` reads one request object. Only "expr" and "inputs" are required; "id" is any
# JSON value and comes back untouched, so answers can be matched to questions.
echo '{"id": "tutorial", "expr": "a*b + b", "inputs": {"a": [3, 4], "b": [5, 6]}}' |
    $GRADCLI eval - --json |
    $PYTHON -c '
import json, sys

r = json.load(sys.stdin)
print("id:", r["id"])
print("output:", r["output"]["value"], "reduced with", r["reduction"])
for name, item in r["inputs"].items():
    print("grad of " + name + ":", item["grad"])
'

step "2. Errors are JSON too, with an exit code that says what went wrong"
# A shape error is an evaluation failure: exit code 1 (a bad request or option is 2). The
# error object goes to stdout, a one-line message to stderr (silenced here).
status=0
echo '{"id": 7, "expr": "a @ b", "inputs": {"a": [1, 2], "b": [1, 2, 3]}}' |
    $GRADCLI eval - --json 2>/dev/null || status=$?
echo "exit status: $status"

step "3. A whole file of requests: one response per line, in order"
# requests.ndjson has five requests; the fourth is deliberately bad (a shape error). It gets
# an error response naming its line ("input_line") and the stream goes on. batch exits
# with 1 at the end because one line failed.
$GRADCLI batch "$HERE/requests.ndjson" |
    $PYTHON -c '
import json, sys

for line in sys.stdin:
    r = json.loads(line)
    if "error" in r:
        e = r["error"]
        print("%s: %s error on line %d: %s" % (r["id"], e["kind"], r["input_line"], e["message"]))
    else:
        grads = {name: item["grad"] for name, item in r["inputs"].items()}
        print("%s: output %s, grads %s" % (r["id"], r["output"]["value"], grads))
' || echo "batch exit status: $? (one line failed; every line was answered)"
