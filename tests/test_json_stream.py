"""A response written a piece at a time (``io.write_json``) is the text ``dumps`` writes,
byte for byte, whatever its arrays: large, N-d, non-finite, float32, empty, lazy."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import gradcli
from gradcli.io import dumps, jsonio, write_json


def _streamed(obj: Any) -> tuple[str, list[str]]:
    parts: list[str] = []
    write_json(obj, parts.append)
    return "".join(parts), parts


ARRAYS = {
    "0-d": np.array(2.5),
    "empty": np.zeros((0, 3)),
    "rows of nothing": np.zeros((40, 0)),
    "1-d": np.linspace(-1, 1, 1000),
    "2-d": np.arange(35 * 41, dtype=float).reshape(35, 41) / 7,
    "long rows": np.arange(3 * 200, dtype=float).reshape(3, 200) / 3,
    "3-d": np.arange(5 * 6 * 7, dtype=float).reshape(5, 6, 7) - 100.5,
    "non-finite": np.array([1.0, np.nan, -np.inf, np.inf, 0.0, -0.0] * 30),
    "float32": (np.arange(500, dtype=np.float32) / 3).reshape(20, 25),
}


@pytest.mark.parametrize("name", list(ARRAYS))
@pytest.mark.parametrize("lazy", [False, True], ids=["numpy", "dask"])
def test_arrays_written_in_pieces_are_dumps_text(name: str, lazy: bool, monkeypatch: Any) -> None:
    monkeypatch.setattr(jsonio, "JSON_PIECE", 16)  # every array of more is cut into pieces
    a = ARRAYS[name]
    given: Any = a
    if lazy:
        da = pytest.importorskip("dask.array")
        given = da.from_array(a, chunks=tuple(max(1, n // 3) for n in a.shape) or ())
    doc = {"id": "x\u2028y", "value": given, "nested": [{"grad": given}, None, 1.5]}
    text, parts = _streamed(doc)
    want = dumps({"id": "x\u2028y", "value": a, "nested": [{"grad": a}, None, 1.5]})
    assert text == want
    if a.size > 64:
        assert max(map(len, parts)) < len(want) // 2  # written in pieces, not whole


def test_eval_json_and_save_json_write_the_response_in_pieces(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """The command's --json and --save out.json: the text of dumps(result.to_json())."""
    from harness import run

    monkeypatch.setattr(jsonio, "JSON_PIECE", 64)
    x = np.random.default_rng(1).standard_normal((30, 50))
    np.save(tmp_path / "x.npy", x)
    args = ["eval", "h = tanh(x); sum(h * x)", f"x=@{tmp_path / 'x.npy'}"]
    want = gradcli.evaluate("h = tanh(x); sum(h * x)", {"x": x})
    done = run(*args, "--json", "--save", str(tmp_path / "out.json"))
    assert done.code == 0
    assert done.stdout == dumps(want.to_json()) + "\n"
    assert (tmp_path / "out.json").read_text() == done.stdout
    lazy = run(*args, "--backend", "dask", "--chunks", "512", "--json")  # chunks of 64
    assert lazy.code == 0 and lazy.stdout.count("\n") == 1
    got, expected = json.loads(lazy.stdout), want.to_json()
    assert got.keys() == expected.keys()
    assert got["inputs"]["x"]["value"] == expected["inputs"]["x"]["value"]
    for part in (got["inputs"]["x"]["grad"], got["intermediates"]["h"]["grad"]):
        assert np.shape(part) == (30, 50)
    np.testing.assert_allclose(got["inputs"]["x"]["grad"], want.grads["x"], rtol=1e-12)
    np.testing.assert_allclose(got["intermediates"]["h"]["value"], np.tanh(x), rtol=1e-12)
