"""The command line: options in, calls to ``api`` and ``present`` out.

Imports of NumPy and the engine happen inside the commands, so ``gradcli --help`` starts
fast. Every failure ends in :func:`_fail`: one line on stderr, the SPEC's exit code, and in
``--json`` mode an error object on stdout.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from . import __version__

HELP = """gradcli: the value of a tensor expression and the gradient of every input,
computed by reverse-mode automatic differentiation (the numbers torch.autograd gives)."""

EVAL_HELP = """Evaluate EXPR, backpropagate, and print the value and every gradient.

A non-scalar output is reduced with sum() first (the tutorial's z.sum().backward()),
unless --grad-output gives the upstream gradient.

\b
Examples:
  gradcli eval "a*b+b" a=[3,4] b=[5,6]
  gradcli eval "h = tanh(W @ x); sum(h**2)" W="randn(3, 3)" x=[1,2,3] --json
  gradcli eval "-x**2" x=3
  echo '{"expr": "x*y", "inputs": {"x": 2, "y": 3}}' | gradcli eval - --json
"""

BATCH_HELP = """Answer NDJSON requests, one JSON response per line, in order.

Each line is a request {"expr": ..., "inputs": {...}, "wrt", "grad_output", "clip_norm",
"norm_type", "clip_value", "seed", "dtype", "id"}. Every response line is flushed as it is
written, so gradcli works as a coprocess. A bad line gets an error response (with its
"input_line") and the stream goes on; the exit code is 1 if any line failed.

\b
Examples:
  gradcli batch requests.ndjson > responses.ndjson
  printf '%s\\n' '{"expr": "sum(a*b)", "inputs": {"a": [1,2], "b": [3,4]}}' | gradcli batch
  gradcli batch data.ndjson --accumulate | tail -n 1
"""


class _Group(typer.core.TyperGroup):
    """gradcli's command group: an expression may begin with ``-``, and click's own usage
    errors are reported like every other gradcli error (one line, JSON with ``--json``)."""

    def main(  # type: ignore[override]
        self,
        args: list[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        given = sys.argv[1:] if args is None else list(args)
        try:
            code = super().main(
                args=_expressions_as_arguments(given, self),
                prog_name=prog_name,
                complete_var=complete_var,
                standalone_mode=False,
                **extra,
            )
        except Exception as exc:  # click's errors (typer may bundle its own click)
            if not hasattr(exc, "format_message") or not hasattr(exc, "exit_code"):
                raise
            code = _click_error(exc, json_out="--json" in given)
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(
    cls=_Group,
    # plain help: rich-formatted help imports markdown and pygments (+100 ms per --help)
    rich_markup_mode=None,
    help=HELP,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class DType(str, Enum):
    float64 = "float64"
    float32 = "float32"


# ---- options shared by the commands ---------------------------------------------------
ExprArg = Annotated[
    str | None,
    typer.Argument(show_default=False, help='The program, e.g. "a*b+b".'),
]
ValuesArg = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="[NAME=VALUE]...",
        show_default=False,
        help="Inputs: JSON ([3,4]), @file (.npy .json .csv .txt) or a constant expression.",
    ),
]
FileOpt = Annotated[Path | None, typer.Option("-f", "--file", help="Read the program from FILE.")]
InputsOpt = Annotated[
    str | None,
    typer.Option("--inputs", metavar="FILE|-", help="A JSON object of name -> value."),
]
WrtOpt = Annotated[
    str | None,
    typer.Option("--wrt", metavar="a,b", help="Inputs that require grad (default: all)."),
]
DTypeOpt = Annotated[DType, typer.Option("--dtype", help="Floating-point type.")]
SeedOpt = Annotated[int, typer.Option("--seed", min=0, help="Seed of rand/randn.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]
PrecisionOpt = Annotated[int, typer.Option("--precision", min=0, max=17, help="Digits shown.")]
FullOpt = Annotated[bool, typer.Option("--full", help="Show every element, no summary.")]
MaxElementsOpt = Annotated[
    int,
    typer.Option("--max-elements", min=1, help="Largest number of elements of one tensor."),
]
MaxProgramCharsOpt = Annotated[
    int,
    typer.Option("--max-program-chars", min=1, help="Longest program accepted, in characters."),
]
MaxStdinBytesOpt = Annotated[
    int,
    typer.Option(
        "--max-stdin-bytes", min=1, help="Most bytes read from stdin (eval -, --inputs -)."
    ),
]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show Python tracebacks.")]
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

DEFAULT_MAX_ELEMENTS = 10**8
DEFAULT_MAX_PROGRAM_CHARS = 1_000_000  # as gradcli.language's (not imported: start-up time)
DEFAULT_MAX_STDIN_BYTES = 16 * 2**20  # one request, as one line of batch


@dataclass(frozen=True)
class _Limits:
    """The size limits of one command: elements of a tensor, program text, stdin bytes."""

    elements: int
    program_chars: int
    stdin_bytes: int


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gradcli {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """gradcli: values and gradients of tensor expressions."""


@app.command("eval", help=EVAL_HELP, no_args_is_help=True)
def eval_command(
    expr: ExprArg = None,
    values: ValuesArg = None,
    file: FileOpt = None,
    inputs: InputsOpt = None,
    wrt: WrtOpt = None,
    grad_output: GradOutputOpt = None,
    clip_norm: ClipNormOpt = None,
    norm_type: NormTypeOpt = "2",
    clip_value: ClipValueOpt = None,
    dtype: DTypeOpt = DType.float64,
    seed: SeedOpt = 0,
    json_out: JsonOpt = False,
    precision: PrecisionOpt = 4,
    full: FullOpt = False,
    save: Annotated[
        Path | None,
        typer.Option("--save", metavar="FILE.npz", help="Write output and gradients (.npz)."),
    ] = None,
    max_elements: MaxElementsOpt = DEFAULT_MAX_ELEMENTS,
    max_program_chars: MaxProgramCharsOpt = DEFAULT_MAX_PROGRAM_CHARS,
    max_stdin_bytes: MaxStdinBytesOpt = DEFAULT_MAX_STDIN_BYTES,
    debug: DebugOpt = False,
) -> None:
    limits = _Limits(max_elements, max_program_chars, max_stdin_bytes)
    with _failures(json_out, debug) as state:
        from . import present
        from .api import evaluate, request_id, request_kwargs
        from .errors import InputError
        from .inputs import read_stdin, read_value
        from .io import dumps, parse_json_text, save_npz

        if expr == "-" and file is None:
            if values:
                raise InputError("`eval -` reads one JSON request from stdin: give no NAME=VALUE")
            request = parse_json_text(read_stdin(limits.stdin_bytes), what="request")
            state.id = request_id(request)
            kwargs = request_kwargs(request)
        else:
            text, given = _program_and_inputs(expr, values, file, inputs, dtype, seed, limits)
            upstream_grad = None
            if grad_output is not None:
                upstream_grad = read_value(
                    grad_output, "grad_output", dtype=dtype.value, seed=seed,
                    max_elements=limits.elements, max_program_chars=limits.program_chars,
                )  # fmt: skip
            kwargs = {
                "expr": text,
                "inputs": given,
                "wrt": _split_names(wrt),
                "grad_output": upstream_grad,
                "clip_norm": clip_norm,
                "norm_type": norm_type,
                "clip_value": clip_value,
                "dtype": dtype.value,
                "seed": seed,
            }
        result = evaluate(**kwargs, max_elements=max_elements, max_program_chars=max_program_chars)
        if save is not None:  # before printing: a failed save must not follow a success
            save_npz(str(save), _arrays_to_save(result))
        present.print_warnings(result.warnings, present.make_console(stderr=True))
        if json_out:
            _print_line(dumps(result.to_json()))
        else:
            present.print_result(result, present.make_console(), precision=precision, full=full)


@app.command("batch", help=BATCH_HELP)
def batch_command(
    source: Annotated[
        str, typer.Argument(metavar="[FILE|-]", help="NDJSON requests (default: stdin).")
    ] = "-",
    accumulate: Annotated[
        bool,
        typer.Option(
            "--accumulate",
            help="Also sum each input's gradient over all requests; a final summary line.",
        ),
    ] = False,
    max_line_bytes: Annotated[
        int, typer.Option("--max-line-bytes", min=1, help="Longest request line accepted.")
    ] = 16 * 2**20,
    max_elements: MaxElementsOpt = DEFAULT_MAX_ELEMENTS,
    max_program_chars: MaxProgramCharsOpt = DEFAULT_MAX_PROGRAM_CHARS,
    debug: DebugOpt = False,
) -> None:
    with _failures(True, debug):
        import gc

        from .batch import run_batch
        from .inputs import open_requests

        gc.enable()  # a stream of any length: cycles (an error's traceback) must be freed
        stream, total = open_requests(source)
        failed = run_batch(
            stream,
            _print_line,
            accumulate=accumulate,
            max_line_bytes=max_line_bytes,
            max_elements=max_elements,
            max_program_chars=max_program_chars,
            progress_total=total if source != "-" and sys.stderr.isatty() else None,
            debug=debug,
        )
        if failed:
            raise typer.Exit(1)


CHECK_HELP = """Compare analytic gradients with central finite differences (float64).

Like torch.autograd.gradcheck: every element of the Jacobian (or, with --order 2, of the
Hessian) must satisfy |analytic - numeric| <= atol + rtol |numeric|. Exit code 1 when any
input fails. At a kink (relu at 0) the finite difference is wrong and the check fails.

\b
Examples:
  gradcli check "sum(tanh(W @ x))" W="randn(3, 3)" x=[1,2,3]
  gradcli check "sum(x**3)" x=[1,2] --order 2
"""

JACOBIAN_HELP = """The full Jacobian d output / d input, shaped output.shape + input.shape.

\b
Example:
  gradcli jacobian "a*b+b" a=[3,4] b=[5,6]
"""

HESSIAN_HELP = """The Hessian of a scalar output with respect to the --wrt inputs.

Computed by differentiating the backward pass (never by finite differences); rows and
columns are the inputs' elements, flattened and concatenated in order.

\b
Example:
  gradcli hessian "sum(x**3)" x=[1,2]
"""

GRAPH_HELP = """The computation graph: operation, shape, value and gradient of every node.

\b
Examples:
  gradcli graph "h = a*b; sum(h + b)" a=[1,2] b=[3,4]
  gradcli graph "sum(tanh(W @ x))" W="randn(2, 2)" x=[1,2] --dot | dot -Tsvg > graph.svg
"""

OPTIMIZE_HELP = """Minimise a scalar expression over the --wrt inputs by gradient descent.

Each step does zero_grad(), backward(), the optional --clip-norm/--clip-value, and
step(): the tutorial's training loop. --no-zero-grad shows what forgetting zero_grad()
does (gradients accumulate).

\b
Example:
  gradcli optimize "sum((x - 3)**2)" x=[0,0] --optimizer adam --lr 0.1 --steps 200
"""


def _program_and_inputs(
    expr: str | None,
    values: list[str] | None,
    file: Path | None,
    inputs: str | None,
    dtype: DType,
    seed: int,
    limits: _Limits,
) -> tuple[str, dict[str, Any]]:
    from .inputs import read_program_and_inputs

    return read_program_and_inputs(
        expr, values, file, inputs, dtype=dtype.value, seed=seed,
        max_elements=limits.elements, max_program_chars=limits.program_chars,
        max_stdin_bytes=limits.stdin_bytes,
    )  # fmt: skip


def _analyse(
    command: str,
    expr: str | None,
    values: list[str] | None,
    file: Path | None,
    inputs: str | None,
    wrt: str | None,
    dtype: DType,
    seed: int,
    limits: _Limits,
    **options: Any,
) -> Any:
    """Run ``gradcli.analysis.<command>`` on the command line's program and inputs."""
    from . import analysis

    text, given = _program_and_inputs(expr, values, file, inputs, dtype, seed, limits)
    run = getattr(analysis, command)
    return run(
        text, given, wrt=_split_names(wrt), dtype=dtype.value, seed=seed,
        max_elements=limits.elements, max_program_chars=limits.program_chars, **options,
    )  # fmt: skip


def _emit(result: Any, json_out: bool, show: Callable[[Any], None]) -> None:
    """The result's warnings on stderr, then the result as one line of JSON, or drawn by
    ``show`` on the console."""
    _print_warnings(result.warnings)
    if json_out:
        from .io import dumps

        _print_line(dumps(result.to_json()))
    else:
        from . import present

        show(present.make_console())


def _print_warnings(warnings: list[str]) -> None:
    if warnings:
        from . import present

        present.print_warnings(warnings, present.make_console(stderr=True))


@app.command("check", help=CHECK_HELP, no_args_is_help=True)
def check_command(
    expr: ExprArg = None,
    values: ValuesArg = None,
    file: FileOpt = None,
    inputs: InputsOpt = None,
    wrt: WrtOpt = None,
    eps: Annotated[float, typer.Option("--eps", help="Finite-difference step.")] = 1e-6,
    rtol: Annotated[float, typer.Option("--rtol", help="Relative tolerance.")] = 1e-5,
    atol: Annotated[float, typer.Option("--atol", help="Absolute tolerance.")] = 1e-8,
    order: Annotated[
        int, typer.Option("--order", min=1, max=2, help="1: gradients, 2: the Hessian.")
    ] = 1,
    dtype: DTypeOpt = DType.float64,
    seed: SeedOpt = 0,
    json_out: JsonOpt = False,
    max_elements: MaxElementsOpt = DEFAULT_MAX_ELEMENTS,
    max_program_chars: MaxProgramCharsOpt = DEFAULT_MAX_PROGRAM_CHARS,
    max_stdin_bytes: MaxStdinBytesOpt = DEFAULT_MAX_STDIN_BYTES,
    debug: DebugOpt = False,
) -> None:
    limits = _Limits(max_elements, max_program_chars, max_stdin_bytes)
    with _failures(json_out, debug):
        from . import present

        result = _analyse(
            "check", expr, values, file, inputs, wrt, dtype, seed, limits,
            eps=eps, rtol=rtol, atol=atol, order=order,
        )  # fmt: skip
        _emit(result, json_out, lambda console: present.print_check(result, console))
        if not result.ok:
            raise typer.Exit(1)


@app.command("jacobian", help=JACOBIAN_HELP, no_args_is_help=True)
def jacobian_command(
    expr: ExprArg = None,
    values: ValuesArg = None,
    file: FileOpt = None,
    inputs: InputsOpt = None,
    wrt: WrtOpt = None,
    dtype: DTypeOpt = DType.float64,
    seed: SeedOpt = 0,
    json_out: JsonOpt = False,
    precision: PrecisionOpt = 4,
    full: FullOpt = False,
    max_elements: MaxElementsOpt = DEFAULT_MAX_ELEMENTS,
    max_program_chars: MaxProgramCharsOpt = DEFAULT_MAX_PROGRAM_CHARS,
    max_stdin_bytes: MaxStdinBytesOpt = DEFAULT_MAX_STDIN_BYTES,
    debug: DebugOpt = False,
) -> None:
    limits = _Limits(max_elements, max_program_chars, max_stdin_bytes)
    with _failures(json_out, debug):
        from . import present

        result = _analyse("jacobian", expr, values, file, inputs, wrt, dtype, seed, limits)
        _emit(
            result, json_out,
            lambda console: present.print_jacobian(result, console, precision=precision, full=full),
        )  # fmt: skip


@app.command("hessian", help=HESSIAN_HELP, no_args_is_help=True)
def hessian_command(
    expr: ExprArg = None,
    values: ValuesArg = None,
    file: FileOpt = None,
    inputs: InputsOpt = None,
    wrt: WrtOpt = None,
    dtype: DTypeOpt = DType.float64,
    seed: SeedOpt = 0,
    json_out: JsonOpt = False,
    precision: PrecisionOpt = 4,
    max_elements: MaxElementsOpt = DEFAULT_MAX_ELEMENTS,
    max_program_chars: MaxProgramCharsOpt = DEFAULT_MAX_PROGRAM_CHARS,
    max_stdin_bytes: MaxStdinBytesOpt = DEFAULT_MAX_STDIN_BYTES,
    debug: DebugOpt = False,
) -> None:
    limits = _Limits(max_elements, max_program_chars, max_stdin_bytes)
    with _failures(json_out, debug):
        from . import present

        result = _analyse("hessian", expr, values, file, inputs, wrt, dtype, seed, limits)
        _emit(
            result, json_out,
            lambda console: present.print_hessian(result, console, precision=precision),
        )  # fmt: skip


@app.command("graph", help=GRAPH_HELP, no_args_is_help=True)
def graph_command(
    expr: ExprArg = None,
    values: ValuesArg = None,
    file: FileOpt = None,
    inputs: InputsOpt = None,
    wrt: WrtOpt = None,
    dot: Annotated[bool, typer.Option("--dot", help="Write Graphviz DOT text.")] = False,
    dtype: DTypeOpt = DType.float64,
    seed: SeedOpt = 0,
    json_out: JsonOpt = False,
    precision: PrecisionOpt = 4,
    max_elements: MaxElementsOpt = DEFAULT_MAX_ELEMENTS,
    max_program_chars: MaxProgramCharsOpt = DEFAULT_MAX_PROGRAM_CHARS,
    max_stdin_bytes: MaxStdinBytesOpt = DEFAULT_MAX_STDIN_BYTES,
    debug: DebugOpt = False,
) -> None:
    limits = _Limits(max_elements, max_program_chars, max_stdin_bytes)
    with _failures(json_out, debug):
        from . import present

        result = _analyse("graph", expr, values, file, inputs, wrt, dtype, seed, limits)
        if dot and not json_out:
            _print_warnings(result.warnings)
            sys.stdout.write(result.to_dot())
            return
        _emit(
            result, json_out,
            lambda console: present.print_graph(result, console, precision=precision),
        )  # fmt: skip


class OptimizerName(str, Enum):
    sgd = "sgd"
    momentum = "momentum"
    adam = "adam"


@app.command("optimize", help=OPTIMIZE_HELP, no_args_is_help=True)
def optimize_command(
    expr: ExprArg = None,
    values: ValuesArg = None,
    file: FileOpt = None,
    inputs: InputsOpt = None,
    wrt: WrtOpt = None,
    steps: Annotated[int, typer.Option("--steps", min=0, help="Number of steps.")] = 100,
    lr: Annotated[float, typer.Option("--lr", help="Learning rate.")] = 0.01,
    optimizer: Annotated[
        OptimizerName, typer.Option("--optimizer", help="sgd, momentum or adam.")
    ] = OptimizerName.sgd,
    momentum: Annotated[
        float, typer.Option("--momentum", help="Momentum of the momentum optimizer.")
    ] = 0.9,
    clip_norm: ClipNormOpt = None,
    norm_type: NormTypeOpt = "2",
    clip_value: ClipValueOpt = None,
    zero_grad: Annotated[
        bool,
        typer.Option(
            "--zero-grad/--no-zero-grad", help="Zero the gradients before each backward()."
        ),
    ] = True,
    dtype: DTypeOpt = DType.float64,
    seed: SeedOpt = 0,
    json_out: JsonOpt = False,
    precision: PrecisionOpt = 4,
    full: FullOpt = False,
    max_elements: MaxElementsOpt = DEFAULT_MAX_ELEMENTS,
    max_program_chars: MaxProgramCharsOpt = DEFAULT_MAX_PROGRAM_CHARS,
    max_stdin_bytes: MaxStdinBytesOpt = DEFAULT_MAX_STDIN_BYTES,
    debug: DebugOpt = False,
) -> None:
    limits = _Limits(max_elements, max_program_chars, max_stdin_bytes)
    with _failures(json_out, debug):
        from . import present

        with _step_progress(steps) as on_step:
            result = _analyse(
                "optimize", expr, values, file, inputs, wrt, dtype, seed, limits,
                optimizer=optimizer.value, steps=steps, lr=lr, momentum=momentum,
                clip_norm=clip_norm, norm_type=norm_type, clip_value=clip_value,
                zero_grad=zero_grad, on_step=on_step,
            )  # fmt: skip
        _emit(
            result, json_out,
            lambda console: present.print_optimization(
                result, console, precision=precision, full=full
            ),
        )  # fmt: skip


class _step_progress:
    """A rich progress bar on stderr while optimising, only when stderr is a terminal."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.progress: Any = None

    def __enter__(self) -> Callable[[int, float], None] | None:
        if not sys.stderr.isatty() or self.steps < 2:
            return None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.progress = Progress(
            TextColumn("optimizing"), BarColumn(), MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]}"), console=Console(stderr=True),
            transient=True,
        )  # fmt: skip
        task = self.progress.add_task("optimize", total=self.steps, loss="")
        self.progress.start()

        def on_step(step: int, loss: float) -> None:
            self.progress.update(task, completed=step, loss=f"{loss:.6g}")

        return on_step

    def __exit__(self, *exc: Any) -> None:
        if self.progress is not None:
            self.progress.stop()


FUNCTIONS_HELP = """List every function of the language with its signature and derivative rule.

The table is generated from the registry the evaluator uses, and the derivative column
from the engine's rule table, so it is always what gradcli computes.

\b
Examples:
  gradcli functions
  gradcli functions --json
"""


@app.command("functions", help=FUNCTIONS_HELP)
def functions_command(json_out: JsonOpt = False) -> None:
    from . import present
    from .io import dumps
    from .language import FUNCTIONS

    unique = list({id(f): f for f in FUNCTIONS.values()}.values())
    if json_out:
        rows = [
            {"name": f.name, "aliases": list(f.aliases), "signature": f.signature,
             "summary": f.summary, "derivative": f.derivative}
            for f in unique
        ]  # fmt: skip
        _print_line(dumps(rows))
        return
    present.print_functions(unique, present.make_console())


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


class _State:
    id: Any = None


class _failures:
    """Context manager that turns any failure into SPEC's error output and exit code."""

    def __init__(self, json_out: bool, debug: bool) -> None:
        self.json_out = json_out
        self.debug = debug
        self.state = _State()

    def __enter__(self) -> _State:
        return self.state

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        if isinstance(exc, BrokenPipeError):
            _quiet_broken_pipe()  # here, before click turns it into exit status 1
        if isinstance(exc, Exception) and not isinstance(exc, typer.Exit):
            _fail(exc, self.json_out, self.state.id, self.debug)


def _split_names(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [n.strip() for n in text.split(",") if n.strip()]


def _arrays_to_save(result: Any) -> dict[str, Any]:
    """Keys of --save: ``output``, ``grad_<name>`` for each input and binding with a grad."""
    arrays = {"output": result.value}
    for name, g in result.grads.items():
        if g is not None:
            arrays[f"grad_{name}"] = g
    for name, (_, g) in result.intermediates.items():
        if g is not None:
            arrays[f"grad_{name}"] = g
    return arrays


def _print_line(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _fail(exc: BaseException, json_out: bool, request_id: Any, debug: bool) -> NoReturn:
    from . import present
    from .api import as_gradcli_error
    from .io import dumps

    if debug:
        raise exc
    err = as_gradcli_error(exc)
    console = present.make_console(stderr=True)
    if json_out:
        _print_line(dumps({"id": request_id, "error": err.to_json()}))
        console.print(f"error ({err.kind}): {err.message}", markup=False, soft_wrap=True)
    else:
        present.print_error(err, console)
    raise typer.Exit(err.exit_code)


# --------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------


def _expressions_as_arguments(args: list[str], group: Any = None) -> list[str]:
    """Let an expression that begins with ``-`` (``"-x**2"``) be an argument, not an option.

    Options the command knows are kept (with their values); everything else is moved after
    ``--``, where click reads it as a positional argument.
    """
    i = next((k for k, a in enumerate(args) if not a.startswith("-")), None)
    if i is None:
        return args
    if group is None:
        group = typer.main.get_command(app)
    command = getattr(group, "commands", {}).get(args[i])
    if command is None:
        return args
    takes_value: dict[str, bool] = {"-h": False, "--help": False}
    for p in command.params:  # duck-typed: typer may bundle its own click
        if getattr(p, "param_type_name", "") == "option":
            for opt in (*p.opts, *p.secondary_opts):
                takes_value[opt] = not p.is_flag and not p.count
    options: list[str] = []
    positional: list[str] = []
    j = i + 1
    while j < len(args):
        a = args[j]
        if a == "--":
            positional += args[j + 1 :]
            break
        name = a.split("=", 1)[0] if a.startswith("--") else a
        if a.startswith("-") and name in takes_value:
            options.append(a)
            if takes_value[name] and "=" not in a and j + 1 < len(args):
                options.append(args[j + 1])
                j += 1
        else:
            positional.append(a)
        j += 1
    head = [*args[: i + 1], *options]
    return [*head, "--", *positional] if positional else head


def main(argv: list[str] | None = None) -> None:
    """The ``gradcli`` console script; ``main(argv)`` runs one command line in a process
    that goes on (and leaves the garbage collector as it found it)."""
    import gc
    import signal

    # click turns Ctrl-C into "Aborted!" with exit 1; SPEC wants 130 and no traceback.
    signal.signal(signal.SIGINT, _interrupted)
    # One command, then the process ends. Parse trees and graphs hold no reference
    # cycles, so reference counting frees them; the cyclic collector would only rescan
    # them, again and again as they grow (0.4 s of a 100,000-term program), and once more
    # at exit. `batch`, which runs for as long as its stream, turns it back on.
    collecting = gc.isenabled()
    gc.disable()
    try:
        app(args=sys.argv[1:] if argv is None else list(argv), prog_name="gradcli")
    except BrokenPipeError:
        _quiet_broken_pipe()
    finally:
        if argv is None:  # the console script: the process ends now
            gc.freeze()
        elif collecting:  # called in a process that goes on
            gc.enable()


def _click_error(exc: Any, json_out: bool) -> int:
    """A bad option or argument, reported like every other gradcli error (kind ``input``)."""
    if type(exc).__name__ == "NoArgsIsHelpError":
        exc.show()  # `gradcli eval` alone: the help text
        return int(exc.exit_code)
    from .errors import InputError

    message = exc.format_message()
    ctx = getattr(exc, "ctx", None)
    if ctx is not None:
        message += f" (see '{ctx.command_path} --help')"
    try:
        _fail(InputError(message), json_out, None, debug=False)
    except typer.Exit as done:
        return int(done.exit_code)


def _interrupted(signum: int, frame: Any) -> NoReturn:
    sys.stderr.write("interrupted\n")
    raise SystemExit(130)


def _quiet_broken_pipe() -> NoReturn:
    # The reader went away (e.g. `| head -n 1`): leave quietly, as `cat` does.
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(0)
