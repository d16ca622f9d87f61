"""The primitives, grouped by family. Importing this package registers every one of them."""

from . import elementwise, reduce, shape, indexing, linalg  # noqa: I001  (the order of `gradcli functions`)

__all__ = ["elementwise", "indexing", "linalg", "reduce", "shape"]
