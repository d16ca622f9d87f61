"""``gradcli explain`` (docs/explain.md): the steps are the engine's, the final gradients
``evaluate``'s to the last bit, and every ``--json`` document fits docs/explain.schema.json
(checked by the small validator below, and by ``jsonschema`` too when it is installed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import harness
import numpy as np
import pytest

import gradcli
from gradcli.analysis import explain
from gradcli.autograd import backward as engine_backward
from gradcli.autograd.registry import OPS

SCHEMA = json.loads((Path(__file__).parent.parent / "docs" / "explain.schema.json").read_text())


def _validate(doc: Any, schema: dict[str, Any], path: str = "$") -> None:
    """The part of JSON Schema the schema uses: type, const, enum, required, properties,
    additionalProperties, items, oneOf, $ref, minimum, minItems."""
    if "$ref" in schema:
        schema = SCHEMA["$defs"][schema["$ref"].rsplit("/", 1)[1]]
    if "oneOf" in schema:
        ok = 0
        for option in schema["oneOf"]:
            try:
                _validate(doc, option, path)
                ok += 1
            except AssertionError:
                pass
        assert ok == 1, f"{path}: {ok} of oneOf match {doc!r:.200}"
        return
    kinds = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}
    t = schema.get("type")
    if t in ("number", "integer"):
        assert isinstance(doc, int | float) and not isinstance(doc, bool), path
        assert t == "number" or isinstance(doc, int), path
        assert doc >= schema.get("minimum", -np.inf), path
    elif t is not None:
        assert isinstance(doc, kinds[t]), f"{path}: not {t}: {doc!r:.100}"
    if "const" in schema:
        assert doc == schema["const"], path
    if "enum" in schema:
        assert doc in schema["enum"], path
    if isinstance(doc, dict):
        for key in schema.get("required", ()):
            assert key in doc, f"{path}: no {key}"
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, value in doc.items():
            if key in props:
                _validate(value, props[key], f"{path}.{key}")
            else:
                assert extra is not False, f"{path}: unknown field {key}"
                if isinstance(extra, dict):
                    _validate(value, extra, f"{path}.{key}")
    if isinstance(doc, list) and "items" in schema:
        assert len(doc) >= schema.get("minItems", 0), path
        for i, item in enumerate(doc):
            _validate(item, schema["items"], f"{path}[{i}]")


def check_schema(doc: dict[str, Any]) -> None:
    _validate(doc, SCHEMA)
    try:
        import jsonschema
    except ImportError:  # not a dependency: the validator above is the check
        return
    jsonschema.validate(doc, SCHEMA)


CASES = [
    ("a*b+b", {"a": [3, 4], "b": [5, 6]}, {}),
    ("x + y", {"x": [2, 3], "y": [5, 6]}, {}),
    ("sum(W @ x + b)", {"W": [[1, 2], [3, 4], [5, 6]], "x": [1, -1], "b": [1, 2, 3]}, {}),
    ("sum(M + b)", {"M": [[1, 2], [3, 4], [5, 6]], "b": [1, 2]}, {}),
    ("h = a*b; v = var(h); sum(h + b) * v", {"a": [3, 4, 1], "b": [5, 6, 2]}, {}),
    ("a*b+b", {"a": [3, 4], "b": [5, 6]}, {"wrt": ["a"]}),
    ("a*b+b", {"a": [3, 4], "b": [5, 6]}, {"grad_output": [1, -2]}),
    ("a*b+b", {"a": [3, 4], "b": [5, 6]}, {"wrt": ["a"], "clip_norm": 1}),
    ("sum(x*x*y)", {"x": [1, 2], "y": [3, 4]}, {"clip_value": 2, "dtype": "float32"}),
    ("sum(relu(x) * 2)", {"x": [-1, 0, 2]}, {}),
    ("sum(x[[0, 0, 1]] ** 2)", {"x": [1, 2]}, {"clip_norm": 1, "norm_type": "inf"}),
    ("3 * 2", {"x": 1}, {}),
]


@pytest.mark.parametrize(("expr", "inputs", "opts"), CASES)
def test_final_gradients_are_evaluate_s(expr: str, inputs: Any, opts: Any) -> None:
    ex = explain(expr, inputs, **opts)
    r = gradcli.evaluate(expr, inputs, **opts)
    assert np.array_equal(ex.value, r.value)
    assert ex.gradients.keys() == r.grads.keys()
    for name, g in r.grads.items():
        mine = ex.gradients[name]
        assert (g is None) == (mine is None)
        if g is not None:
            assert mine.dtype == g.dtype and np.array_equal(mine, g), name
    # the leaf steps are what the engine wrote into .grad (before any clipping)
    leaves = {s["label"]: s["grad"] for s in ex.backward if s["kind"] == "leaf"}
    clip = [s for s in ex.backward if s["kind"] == "clip"]
    for name, g in leaves.items():
        final = clip[0]["grads"][name]["before"] if clip else r.grads[name]
        assert np.array_equal(g, final), name
    doc = ex.to_json()
    check_schema(doc)
    assert engine_backward.OBSERVER.get() is None


def test_tutorial_steps() -> None:
    ex = explain("a*b+b", {"a": [3, 4], "b": [5, 6]})
    fw = ex.to_json()["forward"]
    assert [s["op"] for s in fw] == ["input", "input", "mul", "add", "sum"]
    assert fw[-1]["implicit"] and fw[3]["value"] == [20.0, 30.0]
    kinds = [s["kind"] for s in ex.to_json()["backward"]]
    assert kinds == ["reduction", "seed", "node", "node", "node", "leaf", "accumulate", "leaf"]
    acc = next(s for s in ex.to_json()["backward"] if s["kind"] == "accumulate")
    assert [t["grad"] for t in acc["terms"]] == [[1.0, 1.0], [3.0, 4.0]]
    assert acc["grad"] == [4.0, 5.0] and acc["node"] == 1
    mul = next(s for s in ex.backward if s["kind"] == "node" and s["primitive"] == "mul")
    assert mul["rule"] == OPS["mul"].doc
    assert [s["to"] for s in mul["sends"]] == [0, 1]


def test_broadcast_wrt_grad_output_and_clip_are_steps() -> None:
    ex = explain("sum(W @ X + b)", {"W": [[1, 2], [3, 4]], "X": [[1, 0, 1], [0, 1, 1]],
                                    "b": [1, 2, 3]})  # fmt: skip
    (u,) = [s for s in ex.backward if s["kind"] == "unbroadcast"]
    assert u["from_shape"] == [2, 3] and u["shape"] == [3] and u["axes"] == [0]
    assert ex.forward[u["to"]]["label"] == "b" and u["grad"].tolist() == [2.0, 2.0, 2.0]
    ex = explain("a*b+b", {"a": [3, 4], "b": [5, 6]}, wrt=["a"], grad_output=[1, 2], clip_norm=1)
    kinds = [s["kind"] for s in ex.backward]
    assert kinds[0] == "wrt" and ex.backward[0]["constants"] == ["b"]
    assert "reduction" not in kinds and ex.backward[1]["source"] == "grad_output"
    assert kinds[-1] == "clip" and ex.backward[-1]["method"] == "norm"
    assert "accumulate" not in kinds  # b is a constant: nothing meets there


def test_relu_kink() -> None:
    ex = explain("sum(relu(x))", {"x": [-1.0, 0.0, 2.0]})
    assert ex.gradients["x"].tolist() == [0.0, 0.0, 1.0]


def test_cli_table_and_json() -> None:
    out = harness.invoke("explain", "a*b+b", "a=[3,4]", "b=[5,6]", columns=120).expect(0)
    assert "gradients meet: [1. 1.] (from #3 add) + [3. 4.] (from #2 mul) = [4. 5.]" in out.stdout
    assert "gradients: a: [5. 6.]; b: [4. 5.]" in out.stdout
    run = harness.invoke("explain", "sum(W @ x + b)", "W=[[1,2],[3,4],[5,6]]", "x=[1,1]",
                         "b=[1,2,3]", "--json", "-q").expect(0)  # fmt: skip
    lines = run.stdout.splitlines()
    assert len(lines) == 1
    doc = harness.strict_loads(lines[0])
    check_schema(doc)
    assert doc["gradients"]["b"] == [1.0, 1.0, 1.0]
    run = harness.invoke("explain", "a*b+b", "a=[3,4]", "b=[5,6]", "--json", "--wrt", "a",
                         "--clip-norm", "1", "--grad-output", "[1,1]")  # fmt: skip
    doc = harness.strict_loads(run.expect(0).stdout)
    check_schema(doc)
    assert doc["gradients"]["b"] is None


def test_cli_errors() -> None:
    run = harness.invoke("explain", "sum(x) +* 1", "x=1", "--json")
    assert run.code == 2 and '"kind":"parse"' in run.stdout
    run = harness.invoke("explain", "x @ y", "x=[1,2]", "y=[1,2,3]")
    assert run.code == 1 and run.stderr.startswith("error")
    run = harness.invoke("explain", "x", "x=[1,2]", "--wrt", "z")
    assert run.code == 2


def test_explain_in_several_threads_at_once_sees_its_own_steps() -> None:
    """The observer is per context: threads explaining and evaluating side by side each
    get their own steps and the engine's numbers."""
    import threading

    errors: list[str] = []

    def work(k: int) -> None:
        try:
            for _ in range(20):
                inputs = {"a": np.arange(3.0) + k, "b": np.arange(3.0) * k}
                ex = explain("a*b + b", inputs)
                want = gradcli.evaluate("a*b + b", inputs)
                for n in "ab":
                    assert np.array_equal(ex.gradients[n], want.grads[n]), (k, n)
                gradcli.evaluate("sum(tanh(a) * b)", inputs)  # a backward not watched
        except Exception as e:  # reported below, with the others
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
