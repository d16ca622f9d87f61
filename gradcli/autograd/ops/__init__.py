"""The primitives, grouped by family. Importing this package registers every one of them."""

# (in the order of `gradcli functions`)
# isort: off
from . import elementwise, activations, reduce, shape, cumulative, indexing
from . import linalg, decompositions, einsum, losses
# isort: on

__all__ = [
    "activations", "cumulative", "decompositions", "einsum", "elementwise", "indexing",
    "linalg", "losses", "reduce", "shape",
]  # fmt: skip
