"""PyTorch's namespaces: ``gradcli.nn.functional`` and ``gradcli.linalg`` hold the engine's
functions under torch's names (docs/api.md, "PyTorch's namespaces")."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import gradcli
import gradcli.nn.functional as F
from gradcli import linalg
from gradcli.autograd import FUNCTIONS

SPACES = {"torch.nn.functional": F, "torch.linalg": linalg}


@pytest.mark.parametrize("space", list(SPACES))
def test_every_name_is_the_engines_function_of_that_name(space: str) -> None:
    module = SPACES[space]
    assert module.NAMES, space
    for name in module.NAMES:
        assert getattr(module, name) is FUNCTIONS[name].call, (space, name)
        assert getattr(module, name) is getattr(gradcli, name), (space, name)
    assert sorted(module.NAMES) == dir(module)


@pytest.mark.parametrize("space", list(SPACES))
def test_a_name_torch_lacks_here_is_an_attribute_error(space: str) -> None:
    with pytest.raises(AttributeError, match="no attribute 'no_such_function'"):
        _ = SPACES[space].no_such_function


@pytest.mark.parametrize("space", list(SPACES))
def test_every_name_is_in_torchs_namespace_too(space: str) -> None:
    pytest.importorskip("torch")
    module = importlib.import_module(space)
    missing = [n for n in SPACES[space].NAMES if not hasattr(module, n)]
    assert not missing, f"{space} has no {missing}"


def test_a_tutorial_line_runs_as_written() -> None:
    torch = gradcli
    x = torch.tensor([[2.0, 1.0], [1.0, 3.0]], requires_grad=True)
    y = torch.nn.functional.softmax(x, dim=0).sum() + torch.linalg.det(x)
    y.backward()
    # d det / dA = det(A) * inv(A).T; the softmax columns sum to 1, so they add nothing
    expected = np.linalg.det(x.data) * np.linalg.inv(x.data).T
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12, atol=1e-15)
    assert torch.nn.utils.clip_grad_norm_ is torch.nn.clip_grad_norm_
