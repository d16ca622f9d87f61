"""The primitives, grouped by family. Importing this package registers every one of them."""

# (in the order of `gradcli functions`)
from . import elementwise, activations, reduce, shape, cumulative, indexing, linalg, einsum, losses  # noqa: I001

__all__ = [
    "activations", "cumulative", "einsum", "elementwise", "indexing", "linalg", "losses",
    "reduce", "shape",
]  # fmt: skip
