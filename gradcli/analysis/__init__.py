"""Beyond one gradient: Jacobians, Hessians, gradient checks, the graph, and optimisation.

Every function here starts from :func:`api.prepare` (parse once, check inputs) and uses the
engine's reverse mode: a Jacobian is one backward pass per output element, a Hessian one
backward pass *of the backward pass* (``create_graph=True``) per input element — never
finite differences, which only :func:`check` uses, as the independent oracle.

The functions are the commands of the same names (docs/commands.md) as Python
(docs/api.md, "gradcli.analysis"); each result's ``to_json()`` is the command's ``--json``
document (docs/json.md). The package's names are all imported from here; its modules, each
a part of the work:

================  =====================================================================
``derivatives``   :func:`jacobian`, :func:`hessian`, and what the others share with them
                  (the pass limit :data:`DEFAULT_MAX_PASSES`, the scalar-output check)
``gradcheck``     :func:`check`: analytic derivatives against finite differences
``compgraph``     :func:`graph`: the computation graph, as JSON or Graphviz DOT
``explain``       :func:`explain`: the forward and backward steps the engine ran
``optimization``  :func:`optimize`, :class:`Optimization` and :class:`LossHistory`
================  =====================================================================
"""

from __future__ import annotations

from .compgraph import Graph, Node, graph
from .derivatives import DEFAULT_MAX_PASSES, Hessian, Jacobian, element_labels, hessian, jacobian
from .explain import Explanation, explain
from .forward import HVP, JVP, hvp, jvp
from .gradcheck import Check, InputCheck, check
from .optimization import DEFAULT_MAX_HISTORY, OPTIMIZERS, LossHistory, Optimization, optimize

__all__ = [
    "DEFAULT_MAX_HISTORY",
    "DEFAULT_MAX_PASSES",
    "HVP",
    "JVP",
    "OPTIMIZERS",
    "Check",
    "Explanation",
    "Graph",
    "Hessian",
    "InputCheck",
    "Jacobian",
    "LossHistory",
    "Node",
    "Optimization",
    "check",
    "element_labels",
    "explain",
    "graph",
    "hessian",
    "hvp",
    "jacobian",
    "jvp",
    "optimize",
]
