"""The command line: options in, calls to ``api.evaluate`` and ``present`` out."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Any, NoReturn

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

app = typer.Typer(
    help=HELP,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class DType(str, Enum):
    float64 = "float64"
    float32 = "float32"


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gradcli {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version and exit."
    ),
) -> None:
    """gradcli: values and gradients of tensor expressions."""


@app.command("eval", help=EVAL_HELP, no_args_is_help=True)
def eval_command(
    expr: str = typer.Argument(
        None, show_default=False, help='The program, e.g. "a*b+b"; "-" reads a JSON request.'
    ),
    values: list[str] = typer.Argument(
        None,
        metavar="[NAME=VALUE]...",
        show_default=False,
        help="Inputs: JSON ([3,4]), @file (.npy .json .csv .txt) or a constant expression.",
    ),
    file: Path = typer.Option(None, "-f", "--file", help="Read the program from FILE."),
    inputs: str = typer.Option(
        None, "--inputs", metavar="FILE|-", help="A JSON object of name -> value."
    ),
    wrt: str = typer.Option(
        None, "--wrt", metavar="a,b", help="Inputs that require grad (default: all)."
    ),
    grad_output: str = typer.Option(
        None, "--grad-output", metavar="VALUE", help="Upstream gradient of a non-scalar output."
    ),
    clip_norm: float = typer.Option(
        None, "--clip-norm", metavar="MAX", help="Scale gradients as clip_grad_norm_."
    ),
    norm_type: str = typer.Option("2", "--norm-type", metavar="P", help="Norm for --clip-norm."),
    clip_value: float = typer.Option(
        None, "--clip-value", metavar="V", help="Clamp gradients into [-V, V]."
    ),
    dtype: DType = typer.Option(DType.float64, "--dtype", help="Floating-point type."),
    seed: int = typer.Option(0, "--seed", help="Seed of rand/randn."),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable JSON output."),
    precision: int = typer.Option(4, "--precision", min=0, max=17, help="Digits shown."),
    full: bool = typer.Option(False, "--full", help="Show every element, no summary."),
    save: Path = typer.Option(None, "--save", metavar="FILE.npz", help="Write the arrays."),
    max_elements: int = typer.Option(
        10**8, "--max-elements", min=1, help="Largest number of elements of one tensor."
    ),
    debug: bool = typer.Option(False, "--debug", help="Show Python tracebacks."),
) -> None:
    from . import present

    err_console = present.make_console(stderr=True)
    request_id: Any = None
    try:
        from .api import evaluate
        from .io import dumps, parse_json_text, save_npz

        if expr == "-" and file is None:
            request = parse_json_text(_read_stdin(), what="request")
            kwargs = _request_kwargs(request)
            request_id = kwargs.pop("id", None)
        else:
            args = list(values or [])
            if file is not None:
                if expr is not None:
                    args.insert(0, expr)
                expr = _read_program(file)
            elif expr is None:
                raise _usage("missing EXPR (or -f FILE)")
            kwargs = {
                "expr": expr,
                "inputs": _gather_inputs(args, inputs, dtype.value, seed, max_elements),
                "wrt": _split_names(wrt),
                "grad_output": None
                if grad_output is None
                else _cli_value(grad_output, "grad_output", dtype.value, seed, max_elements),
                "clip_norm": clip_norm,
                "norm_type": norm_type,
                "clip_value": clip_value,
                "dtype": dtype.value,
                "seed": seed,
            }
        result = evaluate(**kwargs, max_elements=max_elements, id=request_id)
        present.print_warnings(result.warnings, err_console)
        if json_out:
            _print_line(dumps(result.to_json()))
        else:
            present.print_result(result, present.make_console(), precision=precision, full=full)
        if save is not None:
            save_npz(str(save), _arrays_to_save(result))
    except Exception as exc:  # every failure ends here: one line, the right exit code
        _fail(exc, json_out, request_id, debug, err_console)


@app.command("functions")
def functions_command(
    json_out: bool = typer.Option(False, "--json", help="Machine-readable JSON output."),
) -> None:
    """List every function of the language with its signature and derivative rule."""
    from . import present
    from .io import dumps
    from .language import FUNCTIONS

    unique = {id(f): f for f in FUNCTIONS.values()}.values()
    if json_out:
        rows = [
            {"name": f.name, "aliases": list(f.aliases), "signature": f.signature,
             "summary": f.summary, "derivative": f.derivative}
            for f in unique
        ]  # fmt: skip
        _print_line(dumps(rows))
        return
    present.print_functions(list(unique), present.make_console())


# --------------------------------------------------------------------------------------


def _usage(message: str) -> Exception:
    from .errors import InputError

    return InputError(message)


def _read_stdin() -> str:
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _usage(f"standard input is not UTF-8 text (byte {e.start})") from None


def _read_program(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise _usage(f"{path}: not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise _usage(f"cannot read the program file {path}: {e.strerror or e}") from None


_REQUEST_FIELDS = (
    "expr", "inputs", "wrt", "grad_output", "clip_norm", "norm_type", "clip_value", "id",
    "seed", "dtype",
)  # fmt: skip


def _request_kwargs(request: Any) -> dict[str, Any]:
    """A JSON request (SPEC §2) as keyword arguments of ``evaluate``."""
    from .errors import InputError
    from .language import suggest

    if not isinstance(request, dict):
        raise InputError('a request must be a JSON object with at least "expr" and "inputs"')
    unknown = [k for k in request if k not in _REQUEST_FIELDS]
    if unknown:
        hints = "".join(suggest(k, _REQUEST_FIELDS) for k in unknown)
        raise InputError(f"unknown request field {', '.join(map(repr, unknown))}{hints}")
    if "expr" not in request or not isinstance(request["expr"], str):
        raise InputError('a request needs "expr", a string')
    if not isinstance(request.get("inputs", {}), dict):
        raise InputError('"inputs" must be an object of name -> value')
    kwargs = {k: v for k, v in request.items() if v is not None or k == "id"}
    if "wrt" in kwargs and (
        not isinstance(kwargs["wrt"], list) or not all(isinstance(n, str) for n in kwargs["wrt"])
    ):
        raise InputError('"wrt" must be a list of input names')
    seed = kwargs.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError('"seed" must be a whole number >= 0')
    return kwargs


def _split_names(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [n.strip() for n in text.split(",") if n.strip()]


def _cli_value(text: str, name: str, dtype: str, seed: int, max_elements: int) -> Any:
    """A VALUE of the command line: JSON, @file, or a constant expression."""
    from . import engine as E
    from .errors import GradcliError, InputError
    from .io import parse_cli_value
    from .language import compile_program

    value = parse_cli_value(text, name=name, dtype=dtype, max_elements=max_elements)
    if value is not None:
        return value
    try:
        program = compile_program(text)
        missing = sorted(program.free_names())
        if missing:
            raise InputError(f"it uses `{missing[0]}`, which has no value")
        with E.element_limit(max_elements), E.floating_errors():
            return program.run({}, dtype=dtype, seed=seed).output.data
    except GradcliError as e:
        raise InputError(
            f"bad value for {name}: {text[:60]!r} is not JSON, an @file or a constant "
            f"expression ({e.message})"
        ) from None


def _gather_inputs(
    args: list[str], inputs_file: str | None, dtype: str, seed: int, max_elements: int
) -> dict[str, Any]:
    from .errors import InputError
    from .io import parse_json_text, read_inputs_object

    values: dict[str, Any] = {}
    if inputs_file is not None:
        if inputs_file == "-":
            text = _read_stdin()
        else:
            try:
                text = Path(inputs_file).read_text("utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise InputError(f"cannot read --inputs file {inputs_file}: {e}") from None
        obj = parse_json_text(text, what=f"--inputs {inputs_file}")
        values.update(read_inputs_object(obj, dtype=dtype, max_elements=max_elements))
    for arg in args:
        name, sep, text = arg.partition("=")
        name = name.strip()
        if not sep or not name:
            raise InputError(f"expected NAME=VALUE, got {arg[:60]!r}")
        if not name.isidentifier():
            raise InputError(f"{name[:40]!r} is not a valid input name (an identifier)")
        if name in values:
            raise InputError(f"the input `{name}` is given twice")
        values[name] = _cli_value(text, name, dtype, seed, max_elements)
    return values


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


def _fail(
    exc: BaseException, json_out: bool, request_id: Any, debug: bool, console: Any
) -> NoReturn:
    from . import present
    from .errors import GradcliError, InvalidValueError

    if debug:
        raise exc
    if isinstance(exc, GradcliError):
        err = exc
    elif isinstance(exc, RecursionError):
        err = InvalidValueError("the program is nested too deeply to evaluate")
    elif isinstance(exc, MemoryError):
        from .errors import LimitError

        err = LimitError("out of memory: the computation is too large")
    else:
        err = InvalidValueError(
            f"internal error: {type(exc).__name__}: {exc} (run with --debug for details)"
        )
    if json_out:
        from .io import dumps

        _print_line(dumps({"id": request_id, "error": err.to_json()}))
        console.print(f"error ({err.kind}): {err.message}", markup=False, highlight=False)
    else:
        present.print_error(err, console)
    raise typer.Exit(err.exit_code)


# --------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------


def _expressions_as_arguments(args: list[str]) -> list[str]:
    """Let an expression that begins with ``-`` (``"-x**2"``) be an argument, not an option.

    Options the command knows are kept (with their values); everything else is moved after
    ``--``, where click reads it as a positional argument.
    """
    i = next((k for k, a in enumerate(args) if not a.startswith("-")), None)
    if i is None:
        return args
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
    return (
        [*args[: i + 1], *options, "--", *positional] if positional else [*args[: i + 1], *options]
    )


def main(argv: list[str] | None = None) -> None:
    """The ``gradcli`` console script."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        app(args=_expressions_as_arguments(args), prog_name="gradcli")
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    except BrokenPipeError:
        # The reader went away (e.g. `| head -n 1`): leave quietly, as `cat` does.
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(0)
