"""The examples run, and print the tutorial's numbers (issue 3).

``examples/tutorial.py`` must print, line for line, what PyTorch prints for the same script
with ``import torch`` in place of ``import gradcli as torch``: TORCH_PRINTS below is that
output, recorded once from PyTorch 2 (CPU). ``examples/tutorial.sh`` must show the same
numbers through ``gradcli eval``.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
TUTORIAL_PY = EXAMPLES / "tutorial.py"
TUTORIAL_SH = EXAMPLES / "tutorial.sh"
TORCH_FUNCTIONS_PY = EXAMPLES / "torch_functions.py"

# `python examples/tutorial.py` with `import torch` instead of `import gradcli as torch`.
TORCH_PRINTS = """\
tensor([1., 1.])
tensor([1., 1.])
a grad: tensor([5., 6.])
b grad: tensor([4., 5.])
after zero_: tensor([0., 0.]) tensor([0., 0.])
total norm: tensor(10.0995)
a grad: tensor([0.4951, 0.5941])
b grad: tensor([0.3961, 0.4951])
a grad after two backwards: tensor([10., 12.])
SGD: tensor([1.9760, 0.4400], requires_grad=True)
Adam: tensor([ 1.2994, -1.7002], requires_grad=True)
grad after zero_grad(): None
"""


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    for var in ("FORCE_COLOR", "CLICOLOR_FORCE", "TTY_COMPATIBLE", "LINES"):
        env.pop(var, None)
    env.update(NO_COLOR="1", COLUMNS="100", PYTHONIOENCODING="utf-8", **extra)
    # The examples import the package from this checkout, installed or not.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def _run(cmd: list[str], **extra: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        encoding="utf-8",
        cwd=REPO,
        env=_env(**extra),
        timeout=300,
    )
    assert proc.returncode == 0, f"{cmd} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr
    return proc


@pytest.mark.parametrize(
    "path", [TUTORIAL_PY, TUTORIAL_SH, TORCH_FUNCTIONS_PY], ids=lambda p: p.name
)
def test_examples_are_executable_scripts(path: Path) -> None:
    assert os.access(path, os.X_OK), f"{path} is not executable"
    assert path.read_text("utf-8").startswith("#!")


# --------------------------------------------------------------------------------------
# tutorial.py
# --------------------------------------------------------------------------------------


def test_tutorial_py_prints_what_pytorch_prints() -> None:
    out = _run([sys.executable, str(TUTORIAL_PY)]).stdout
    assert out.splitlines() == TORCH_PRINTS.splitlines()


def test_tutorial_py_is_pytorch_code_after_its_import() -> None:
    """The only mention of gradcli in the code is ``import gradcli as torch``."""
    source = TUTORIAL_PY.read_text("utf-8")
    assert re.search(r"^import gradcli as torch$", source, re.MULTILINE)
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    lines = {t.start[0] for t in tokens if t.type == tokenize.NAME and t.string == "gradcli"}
    assert len(lines) == 1
    (line,) = lines
    assert source.splitlines()[line - 1] == "import gradcli as torch"


def test_tutorial_py_under_real_torch(tmp_path: Path) -> None:
    """Where PyTorch is installed, the script with ``import torch`` prints TORCH_PRINTS."""
    pytest.importorskip("torch")
    script = tmp_path / "tutorial_torch.py"
    source = TUTORIAL_PY.read_text("utf-8")
    script.write_text(source.replace("import gradcli as torch", "import torch"), "utf-8")
    out = _run([sys.executable, str(script)]).stdout
    assert out.splitlines() == TORCH_PRINTS.splitlines()


# --------------------------------------------------------------------------------------
# torch_functions.py (issue 17, item 4)
# --------------------------------------------------------------------------------------

#: `python examples/torch_functions.py` with torch's two imports, torch 2.13 (CPU): each
#: line a name and the tensor's numbers rounded to 9 decimals
TORCH_FUNCTIONS_PRINTS = """\
loss [64.540074169]
x.grad [12.34309149, 6.508253973, 14.016704775, 6.93780361, 7.011917967, 7.187253979]
W.grad[0] [6.635498133, 8.393969811, 0.593852964]
W.grad[1] [2.090132765, -8.333321647, 0.166789414]
W.grad[2] [13.985419886, 18.693069847, -4.469857678]
jvp out [0.185373427, -0.138083604, 2.484475837]
jvp tangent [0.732327767, -0.117953596, 1.037611086]
vjp [1.03126091, 0.267344347, 0.002178284]
grad [0.64778001, 0.018001888, 1.099401111]
jacfwd [1.0, 0.0, 0.0, -1.2, 0.3, -0.0, -3.0, 0.75, -0.36]
jacrev [0.591715976, 0.0, 0.0, 0.0, 0.20661157, 0.0, 0.0, 0.0, 0.081632653]
hessian [0.934946402, 0.0, 0.0, 0.0, 2.585485373, 0.0, 0.0, 0.0, 2.313235826]
hvp [0.728450728, 0.108744191, -0.074495277]
"""
TORCH_FUNCTIONS_IMPORTS = (
    ("import gradcli as torch", "import torch"),
    ("import gradcli.nn.functional as F", "import torch.nn.functional as F"),
)


def _printed_numbers(text: str) -> dict[str, list[float]]:
    rows = (line.split(" [", 1) for line in text.splitlines() if line)
    return {name: json.loads("[" + rest) for name, rest in rows}


def _same_numbers(ours: str, theirs: str) -> None:
    """The same lines, and numbers equal to 1e-8 (each printed rounded to 9 decimals, so
    a last digit may differ where the libraries round the 16th differently)."""
    mine, ref = _printed_numbers(ours), _printed_numbers(theirs)
    assert list(mine) == list(ref)
    for name, want in ref.items():
        assert len(mine[name]) == len(want), name
        for a, b in zip(mine[name], want, strict=True):
            assert a == pytest.approx(b, rel=1e-8, abs=2e-9), name


def test_torch_functions_py_prints_what_pytorch_prints() -> None:
    _same_numbers(_run([sys.executable, str(TORCH_FUNCTIONS_PY)]).stdout, TORCH_FUNCTIONS_PRINTS)


def test_torch_functions_py_is_pytorch_code_after_its_imports() -> None:
    source = TORCH_FUNCTIONS_PY.read_text("utf-8")
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    lines = {t.start[0] for t in tokens if t.type == tokenize.NAME and t.string == "gradcli"}
    assert [source.splitlines()[n - 1] for n in sorted(lines)] == [
        ours for ours, _ in TORCH_FUNCTIONS_IMPORTS
    ]


def test_torch_functions_py_under_real_torch(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    source = TORCH_FUNCTIONS_PY.read_text("utf-8")
    for ours, theirs in TORCH_FUNCTIONS_IMPORTS:
        source = source.replace(ours, theirs)
    script = tmp_path / "torch_functions_torch.py"
    script.write_text(source, "utf-8")
    _same_numbers(_run([sys.executable, str(script)]).stdout, TORCH_FUNCTIONS_PRINTS)


# --------------------------------------------------------------------------------------
# tutorial.sh
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sh_sections() -> dict[int, str]:
    """The output of tutorial.sh, by step number (the text after each "### N." heading)."""
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed")
    out = _run([bash, str(TUTORIAL_SH)], GRADCLI=f"{sys.executable} -m gradcli").stdout
    parts = re.split(r"^### (\d+)\..*$", out, flags=re.MULTILINE)
    sections = {int(n): text for n, text in zip(parts[1::2], parts[2::2], strict=True)}
    assert sorted(sections) == list(range(1, 9)), out
    return sections


def _row(text: str, name: str) -> str:
    for line in text.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃]", line)]
        if len(cells) > 2 and cells[1] == name:
            return line
    raise AssertionError(f"no row {name!r} in\n{text}")


def _words(text: str) -> str:
    return " ".join(text.split())


def _json_line(text: str) -> dict[str, object]:
    lines = [line for line in text.splitlines() if line.startswith("{")]
    assert len(lines) == 1, text
    result = json.loads(lines[0])
    assert isinstance(result, dict)
    return result


def test_sh_x_plus_y(sh_sections: dict[int, str]) -> None:
    s = sh_sections[1]
    assert "[1. 1.]" in _row(s, "x")
    assert "[1. 1.]" in _row(s, "y")
    assert "[7. 9.]" in _row(s, "output")
    assert "sum()" in _words(s)  # the caption explains the implicit z.sum()


def test_sh_a_times_b_plus_b(sh_sections: dict[int, str]) -> None:
    s = sh_sections[2]
    assert "[5. 6.]" in _row(s, "a").split("│")[-2]
    assert "[4. 5.]" in _row(s, "b").split("│")[-2]


def test_sh_wrt(sh_sections: dict[int, str]) -> None:
    s = sh_sections[3]
    assert "[5. 6.]" in _row(s, "a")
    assert "constant" in _row(s, "b")


def test_sh_grad_output(sh_sections: dict[int, str]) -> None:
    j = _json_line(sh_sections[4])
    assert j["reduction"] is None
    assert j["inputs"]["a"]["grad"] == [5.0, 12.0]  # type: ignore[index]
    assert j["inputs"]["b"]["grad"] == [4.0, 10.0]  # type: ignore[index]


def test_sh_accumulation(sh_sections: dict[int, str]) -> None:
    j = _json_line(sh_sections[5])
    assert j["accumulated"] == {"a": [10.0, 12.0], "b": [8.0, 10.0]}
    assert j["requests"] == 2


def test_sh_clip_value(sh_sections: dict[int, str]) -> None:
    s = sh_sections[6]
    assert "[4.5 4.5]" in _row(s, "a")
    assert re.search(r"\[4\. +4\.5\]", _row(s, "b"))
    assert "4.5" in _words(s.split("└")[-1])


def test_sh_clip_norm_inf(sh_sections: dict[int, str]) -> None:
    s = sh_sections[7]
    assert "0.8333" in _row(s, "a")
    assert "0.6667" in _row(s, "b")
    caption = _words(s.split("└")[-1])
    assert "inf" in caption
    assert "0.166667" in caption


def test_sh_ends_with_the_clipped_tutorial(sh_sections: dict[int, str]) -> None:
    s = sh_sections[8]
    assert "[0.4951 0.5941]" in _row(s, "a")
    assert "[0.3961 0.4951]" in _row(s, "b")
    caption = _words(s.split("└")[-1])
    assert "10.0995" in caption  # sqrt(102), the total norm before clipping
    assert "0.0990147" in caption  # the scale 1 / (sqrt(102) + 1e-6)
