"""The command line's options and help texts: what ``gradcli --help`` and every command's
``--help`` show, and the option declarations the commands share.

Only typer and the standard library are imported here, so ``gradcli --help`` never loads
NumPy or the engine; the limits' defaults are copies of the engine's for the same reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer


class DType(str, Enum):
    float64 = "float64"
    float32 = "float32"


class Language(str, Enum):
    en = "en"
    bn = "bn"


def _set_language(value: Language | None) -> Language | None:
    """``--lang``, read before the other options (eager), so that their errors are said in
    it; without it, the environment's language (docs/i18n.md)."""
    from .i18n import activate

    activate(None if value is None else Language(value).value)
    return value


class BackendName(str, Enum):
    numpy = "numpy"
    dask = "dask"


class OptimizerName(str, Enum):
    sgd = "sgd"
    momentum = "momentum"
    adam = "adam"


DEFAULT_MAX_ELEMENTS = 10**8
DEFAULT_MAX_PROGRAM_CHARS = 1_000_000  # as gradcli.language's (not imported: start-up time)
DEFAULT_MAX_STDIN_BYTES = 16 * 2**20  # one request, as one line of batch
DEFAULT_MAX_PASSES = 50_000  # as gradcli.analysis's, which says why
DEFAULT_MAX_HISTORY = 100_000  # as gradcli.analysis's
DEFAULT_MAX_LINE_BYTES = 16 * 2**20  # one batch line, as gradcli.batch's


@dataclass(frozen=True)
class Limits:
    """The size limits of one command: elements of a tensor, program text, stdin bytes."""

    elements: int
    program_chars: int
    stdin_bytes: int


# ---- options shared by the commands ---------------------------------------------------
ExprArg = Annotated[
    str | None,
    typer.Argument(metavar="EXPR", show_default=False, help='The program, e.g. "a*b+b".'),
]
ValuesArg = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="[NAME=VALUE]...",
        show_default=False,
        help="Inputs: JSON ([3,4]), @file (.npy .json .csv .txt) or a constant expression.",
    ),
]
FileOpt = Annotated[
    Path | None, typer.Option("-f", "--file", metavar="FILE", help="Read the program from FILE.")
]
InputsOpt = Annotated[
    str | None,
    typer.Option("--inputs", metavar="FILE|-", help="A JSON object of name -> value."),
]
WrtOpt = Annotated[
    str | None,
    typer.Option("--wrt", metavar="a,b", help="Inputs that require grad (default: all)."),
]
DTypeOpt = Annotated[DType, typer.Option("--dtype", help="Floating-point type.")]
SeedOpt = Annotated[int, typer.Option("--seed", min=0, metavar="N", help="Seed of rand/randn.")]
SaveOpt = Annotated[
    Path | None,
    typer.Option(
        "--save",
        metavar="FILE",
        help="Write the result: .npz (every array), .json (the --json response) or .npy "
        "(one array).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]
PrecisionOpt = Annotated[
    int, typer.Option("--precision", min=0, max=17, metavar="N", help="Digits shown.")
]
FullOpt = Annotated[bool, typer.Option("--full", help="Show every element, no summary.")]
# the limits on work (docs/cli.md, "Limits on work") are listed under their own heading
LIMITS = "Limits"
MaxElementsOpt = Annotated[
    int,
    typer.Option(
        "--max-elements",
        min=1,
        metavar="N",
        rich_help_panel=LIMITS,
        help="Largest number of elements of one tensor.",
    ),
]
MaxProgramCharsOpt = Annotated[
    int,
    typer.Option(
        "--max-program-chars",
        min=1,
        metavar="N",
        rich_help_panel=LIMITS,
        help="Longest program accepted, in characters.",
    ),
]
MaxStdinBytesOpt = Annotated[
    int,
    typer.Option(
        "--max-stdin-bytes",
        min=1,
        metavar="N",
        rich_help_panel=LIMITS,
        help="Most bytes read from stdin (eval -, --inputs -).",
    ),
]
MaxPassesOpt = Annotated[
    int,
    typer.Option(
        "--max-passes",
        min=1,
        metavar="N",
        rich_help_panel=LIMITS,
        help="Most forward and backward passes of the program; more are refused unrun.",
    ),
]
MaxHistoryOpt = Annotated[
    int,
    typer.Option(
        "--max-history",
        min=1,
        metavar="N",
        rich_help_panel=LIMITS,
        help="Most losses kept; more are evenly thinned.",
    ),
]
MaxLineBytesOpt = Annotated[
    int,
    typer.Option(
        "--max-line-bytes",
        min=1,
        metavar="N",
        rich_help_panel=LIMITS,
        help="Longest request line accepted, in bytes.",
    ),
]
#: the Dask backend's options (docs/dask.md): shown under their own heading
SCALE = "Scale (the Dask backend)"
BackendOpt = Annotated[
    BackendName | None,
    typer.Option(
        "--backend",
        help="Arrays in memory (numpy) or in chunks, lazily (dask; pip install "
        "'gradcli[dask]'). Default: numpy, or dask when an input is a Zarr store or an .npy "
        "file larger than a quarter of memory.",
        rich_help_panel=SCALE,
    ),
]
ChunksOpt = Annotated[
    str | None,
    typer.Option(
        "--chunks",
        metavar="SIZE",
        help="Bytes per chunk with --backend dask: 32MiB (the default), 128MB, 1e6.",
        rich_help_panel=SCALE,
    ),
]
SchedulerOpt = Annotated[
    str | None,
    typer.Option(
        "--scheduler",
        metavar="ADDRESS|local:N",
        help="Where --backend dask computes: a distributed scheduler (tcp://host:8786) or a "
        "cluster of N local worker processes (local:N). Default: threads of this process.",
        rich_help_panel=SCALE,
    ),
]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show Python tracebacks.")]
LangOpt = Annotated[
    Language | None,
    typer.Option(
        "--lang",
        help="Language of tables, captions, notes and errors: en or bn (Bengali). Default: "
        "bn when LC_ALL, LC_MESSAGES or LANG starts with bn (bn_BD.UTF-8), else en. "
        "JSON output is the same in every language.",
        callback=_set_language,
        is_eager=True,
        show_default=False,
    ),
]
QuietOpt = Annotated[
    bool,
    typer.Option(
        "-q",
        "--quiet",
        help="Print no notes, warnings or progress bar on stderr (errors still are).",
    ),
]
GradOutputOpt = Annotated[
    str | None,
    typer.Option(
        "--grad-output", metavar="VALUE", help="Upstream gradient of a non-scalar output."
    ),
]
ClipNormOpt = Annotated[
    float | None,
    typer.Option("--clip-norm", metavar="MAX", help="Scale all gradients as clip_grad_norm_."),
]
NormTypeOpt = Annotated[
    str, typer.Option("--norm-type", metavar="P", help="Norm of --clip-norm (number or inf).")
]
ClipValueOpt = Annotated[
    float | None,
    typer.Option("--clip-value", metavar="V", help="Clamp every gradient into [-V, V]."),
]


# ---- help texts ----------------------------------------------------------------------
#: each command's line in ``gradcli --help``: a whole sentence (click would cut the first
#: sentence of the long help mid-word to fit)
SHORT_HELP = {  # in the order of the commands in `gradcli --help`
    "eval": "Evaluate a program, backpropagate, print value and gradients.",
    "batch": "Answer NDJSON requests with one JSON response per line.",
    "check": "Compare analytic gradients with finite differences.",
    "jacobian": "Print the full Jacobian of the output.",
    "hessian": "Print the Hessian of a scalar output.",
    "jvp": "Print the directional derivative J t (forward mode).",
    "graph": "Draw the computation graph with values and gradients.",
    "explain": "Show the forward and backward pass step by step.",
    "optimize": "Minimise a scalar program by gradient descent.",
    "functions": "List the functions of the language and their derivatives.",
    "repl": "An interactive session that keeps inputs between lines.",
}

HELP = """gradcli: the value of a tensor expression and the gradient of every input,
computed by reverse-mode automatic differentiation (the numbers torch.autograd gives)."""

EVAL_HELP = """Evaluate EXPR, backpropagate, and print the value and every gradient.

A non-scalar output is reduced with sum() first (the tutorial's z.sum().backward()),
unless --grad-output gives the upstream gradient.

\b
Examples:
  gradcli eval "a*b+b" a='[3,4]' b='[5,6]'
  gradcli eval "h = tanh(W @ x); sum(h**2)" W="randn(3, 3)" x='[1,2,3]' --json
  gradcli eval "-x**2" x=3
  echo '{"expr": "x*y", "inputs": {"x": 2, "y": 3}}' | gradcli eval - --json
"""

BATCH_HELP = """Answer NDJSON requests, one JSON response per line, in order.

Each line is a request {"expr": ..., "inputs": {...}, "wrt", "grad_output", "clip_norm",
"norm_type", "clip_value", "seed", "dtype", "id"}. Every response line is flushed as it is
written (with --jobs, a block of them), so gradcli works as a coprocess. A bad line gets an
error response (with its "input_line") and the stream goes on; the exit code is 1 if any
line failed.

Several FILEs are read one after another as one stream; the line numbers go on across
them. --scheduler answers the files on a Dask cluster (tcp://host:8786, or local:N for N
worker processes here), with the same output: each worker reads its part of the files, so
they must be at the same path for the workers, and stdin cannot be one of them.

With stderr a terminal, a progress bar runs there (not with --quiet); the responses
still go to stdout.

\b
Examples:
  printf '%s\\n' '{"expr": "sum(a*b)", "inputs": {"a": [1,2], "b": [3,4]}}' | gradcli batch
  printf '%s\\n' '{"expr": "sum(a*b)", "inputs": {"a": [1,2], "b": [3,4]}}' > requests.ndjson
  gradcli batch requests.ndjson > responses.ndjson
  gradcli batch examples/requests.ndjson --accumulate | tail -n 1
  gradcli batch --scheduler local:2 requests.ndjson > responses.ndjson
  (the second example writes requests.ndjson; examples/requests.ndjson holds five)
"""


CHECK_HELP = """Compare analytic gradients with central finite differences (float64).

Like torch.autograd.gradcheck: every element of the Jacobian (or, with --order 2, of the
Hessian) must satisfy |analytic - numeric| <= atol + rtol |numeric|. Exit code 1 when any
input fails. At a kink (relu at 0) the finite difference is wrong and the check fails.

The work grows as the square of the inputs' size (two runs of the program per input
element, each over all of them): a check needing more than --max-passes is refused.

\b
Examples:
  gradcli check "sum(tanh(W @ x))" W="randn(3, 3)" x='[1,2,3]'
  gradcli check "sum(x**3)" x='[1,2]' --order 2
"""

JACOBIAN_HELP = """The full Jacobian d output / d input, shaped output.shape + input.shape.

\b
Example:
  gradcli jacobian "a*b+b" a='[3,4]' b='[5,6]'
"""

HESSIAN_HELP = """The Hessian of a scalar output with respect to the --wrt inputs.

Computed by differentiating the backward pass (never by finite differences); rows and
columns are the inputs' elements, flattened and concatenated in order.

\b
Example:
  gradcli hessian "sum(x**3)" x='[1,2]'
"""

GRAPH_HELP = """The computation graph: operation, shape, value and gradient of every node.

\b
Examples:
  gradcli graph "h = a*b; sum(h + b)" a='[1,2]' b='[3,4]'
  gradcli graph "sum(tanh(W @ x))" W="randn(2, 2)" x='[1,2]' --dot
  gradcli graph "sum(tanh(W @ x))" W="randn(2, 2)" x='[1,2]' --dot | dot -Tsvg > graph.svg
  (the last needs Graphviz's dot program: apt install graphviz, brew install graphviz)
"""

OPTIMIZE_HELP = """Minimise a scalar expression over the --wrt inputs by gradient descent.

Each step does zero_grad(), backward(), the optional --clip-norm/--clip-value, and
step(): the tutorial's training loop. --no-zero-grad shows what forgetting zero_grad()
does (gradients accumulate). The loss history (plot, --json) holds every loss up to
--max-history of them; a longer run keeps an evenly thinned history ("loss_every").

--tol stops early, once the loss changes by less than TOL from one step to the next.
Ctrl-C stops after the current step and prints the result so far (exit status 130);
a second Ctrl-C ends at once.

With --backend dask each step is one pass over the inputs where they lie (a data set
on disk is read a chunk at a time, every step); the inputs optimised are held in memory.

\b
Examples:
  gradcli optimize "sum((x - 3)**2)" x='[0,0]' --optimizer adam --lr 0.1 --steps 200
  gradcli optimize "sum((x - 3)**2)" x='[0,0]' --lr 0.1 --steps 10000 --tol 1e-9
"""


FUNCTIONS_HELP = """List every function of the language with its signature and derivative rule.

The table is generated from the registry the evaluator uses, and the derivative column
from the engine's rule table, so it is always what gradcli computes. Forward mode (jvp,
jacobian --mode forward) and Hessian-vector products (hessian --vector) are built from the
same rules, so every function has them, with the same values at kinks.

\b
Examples:
  gradcli functions
  gradcli functions tanh sigmoid
  gradcli functions --json
"""

EXPLAIN_HELP = """The gradient step by step: the forward pass as a numbered list of nodes,
then the backward pass in the order the engine runs it (the incoming gradient, the rule,
what each node sends to each input, where gradients accumulate, broadcasting undone, the
implicit sum, --grad-output, --wrt and clipping). The same inputs and options as eval.

\b
Examples:
  gradcli explain "a*b+b" a='[3,4]' b='[5,6]'
  gradcli explain "sum(W @ x + b)" W='[[1,2],[3,4]]' x='[1,1]' b='[1,2]'
  gradcli explain "a*b+b" a='[3,4]' b='[5,6]' --wrt a --clip-norm 1 --json
"""


JVP_HELP = """The output and its directional derivative J t along the inputs' tangents.

Forward mode: give each input that moves a --tangent NAME=VALUE of its shape; the inputs
without one are held fixed. Computed by the double-VJP (a backward pass recorded, then
differentiated), never by finite differences.

\b
Examples:
  gradcli jvp "sin(x) * y" x='[0,1]' y=2 --tangent x='[1,0]'
  gradcli jvp "tanh(W @ x)" W='randn(3, 2)' x='[1,2]' --tangent x='[1,1]' --json
"""

REPL_HELP = """An interactive session: inputs kept between lines, tables as eval prints them.

a = [3, 4], then b = [5, 6], then a*b + b prints eval's table; each line's gradients are
added into the inputs' accumulated .grad (:grad a, :zero). :help lists the commands.
On a terminal: line editing, history, tab completion; Ctrl-C cancels the line, Ctrl-D
leaves. From a pipe: no prompts; the exit status is 1 when a line failed.
`gradcli` alone on a terminal starts one. More in docs/repl.md.

\b
Examples:
  gradcli repl
  printf 'a = [3, 4]\\nb = [5, 6]\\na*b + b\\n:grad a\\n' | gradcli repl
"""
