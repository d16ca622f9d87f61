"""``gradcli repl``: an interactive session that keeps inputs between lines (docs/repl.md).

A line binds a name (``a = [3, 4]``; ``c = a*b + b``), evaluates an expression, or runs a
``:command``. An expression is :func:`gradcli.api.evaluate` on one program (the bindings
it needs, then the line), printed by :mod:`gradcli.present` as ``eval`` prints it; its
gradients are added into the inputs' accumulated ``.grad``, as torch's ``backward()``
does. On a terminal: readline's editing, history and completion (when the standard library
has readline). NumPy, the engine and rich are imported inside the functions.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, TextIO

from . import options, streams
from .i18n import msg, tr, translate

if TYPE_CHECKING:
    from .api import Result

PROMPT = "gradcli> "
#: most lines the history file keeps
HISTORY_LENGTH = 1000

#: ``:command`` → what it does (``:help`` prints this)
COMMANDS = {
    ":grad": msg(":grad [NAME...]    the accumulated .grad of inputs (all of them by default)"),
    ":zero": msg(":zero [NAME...]    set the accumulated .grad to zeros, as x.grad.zero_()"),
    ":clip": msg(":clip MAX [P]      clip_grad_norm_ on the accumulated .grad (P-norm, default 2)"),
    ":explain": msg(":explain [EXPR]    the backward pass step by step (default: the last line)"),
    ":graph": msg(":graph [EXPR]      the computation graph (default: the last line)"),
    ":save": msg(":save FILE         the last result, as eval --save: .npz, .json or .npy"),
    ":vars": msg(":vars              the names and their values"),
    ":help": msg(":help              this list"),
    ":quit": msg(":quit              leave (also :q, :exit, Ctrl-D)"),
}
ALIASES = {":q": ":quit", ":exit": ":quit", ":h": ":help", ":?": ":help"}

HELP = msg("""\
NAME = VALUE       an input: JSON ([3, 4]), @FILE, or a constant expression (randn(3))
NAME = EXPR        a binding of earlier names (c = a*b + b), part of the graph of the
                   lines that use it; it is evaluated with the names' current values
EXPR               evaluate and backward(): eval's table, and the gradients added to
                   the inputs' accumulated .grad (torch's accumulation)
""")

#: ``NAME = ...`` (not ``==``), when NAME is an identifier (as Python reads one: ``মান``)
_BINDING = re.compile(r"\s*([^=]*?)\s*=(?!=)(.*)\Z", re.DOTALL)


def _binding(text: str) -> re.Match[str] | None:
    m = _BINDING.match(text)
    return m if m and m.group(1).isidentifier() else None


class Session:
    """The state of a session: inputs (name → array), bindings (name → right side), the
    inputs' accumulated gradients and the last result."""

    def __init__(
        self,
        *,
        precision: int = 4,
        full: bool = False,
        dtype: str = "float64",
        seed: int = 0,
        quiet: bool = False,
        max_elements: int = options.DEFAULT_MAX_ELEMENTS,
        max_program_chars: int = options.DEFAULT_MAX_PROGRAM_CHARS,
    ) -> None:
        self.precision, self.full, self.dtype, self.seed = precision, full, dtype, seed
        self.quiet = quiet
        self.limits: dict[str, Any] = {"max_elements": max_elements}
        self.limits["max_program_chars"] = max_program_chars
        self.values: dict[str, Any] = {}
        self.bindings: dict[str, str] = {}
        self.grads: dict[str, Any] = {}
        self.last: tuple[str, dict[str, Any], Result] | None = None
        self.failed = 0
        self.done = False

    def handle(self, line: str) -> bool:
        """Run one line; an error is printed as ``eval`` prints it. True when it worked."""
        from . import present
        from .api import as_gradcli_error

        try:
            self._line(line)
            sys.stdout.flush()  # before the next line's errors, when both go to one file
            return True
        except streams.OutputError:
            raise  # stdout is gone: the session ends (cli, streams.output_failed)
        except Exception as exc:
            self.failed += 1
            present.print_error(as_gradcli_error(exc), present.make_console(stderr=True))
            return False

    def run_lines(self, lines: Iterable[str]) -> int:
        """Every line in turn, until ``:quit``; 0 when every line worked, else 1."""
        for line in lines:
            self.handle(line)
            if self.done:
                break
        return 1 if self.failed else 0

    def _line(self, line: str) -> None:
        from .language import check_program_length

        text = line.strip()
        check_program_length(text, self.limits["max_program_chars"])
        if text.startswith(":"):
            word, *rest = text.split(None, 1)
            self._command(ALIASES.get(word, word), "".join(rest).strip())
            return
        m = _binding(text)
        if m and m.group(2).lstrip().startswith("@"):  # a file's name may hold # or ;
            statements = [text]
        else:  # the language has no strings: # starts a comment, ; ends a statement
            statements = [s.strip() for s in text.split("#", 1)[0].split(";")]
        for statement in filter(None, statements):
            m = _binding(statement)
            if m is None:
                self._evaluate_line(statement)
            else:
                self._bind(m.group(1), m.group(2).strip(), statement)

    def _bind(self, name: str, rhs: str, statement: str) -> None:
        from .errors import InputError, NamingError
        from .io import parse_cli_value
        from .language import FUNCTIONS, compile_program, normalize_name

        name = normalize_name(name)
        if name in FUNCTIONS:  # the language's own message
            raise NamingError(msg("cannot bind `{name}`: it is the name of a function", name=name))
        if rhs == "@-" or rhs.startswith("@-:"):
            raise InputError(
                msg("{name}: the session reads its lines from standard input", name=name)
            )
        elements = self.limits["max_elements"]
        value = parse_cli_value(rhs, name=name, dtype=self.dtype, max_elements=elements)
        if value is None:
            compile_program(f"{statement}\n{name}")  # a syntax error, in the line's own words
            reads = self._reads(rhs)
            if not reads:
                from .api import constant_value

                value = constant_value(rhs, dtype=self.dtype, seed=self.seed, **self.limits)
            elif name in self._reach(reads):  # x = x - 1, or through a binding: a value
                value = self._evaluate(*self._program(rhs)).value
            else:  # a binding: checked now, evaluated afresh in every line that uses it
                self._evaluate(*self._program(rhs))
        for kept in (self.values, self.bindings, self.grads):  # .grad: None, as torch's
            kept.pop(name, None)
        if value is None:
            self.bindings[name] = rhs
        else:
            self.values[name] = value

    def _evaluate_line(self, expr: str) -> None:
        from . import present
        from .reporting import _report

        text, inputs = self._program(expr)
        result = self._evaluate(text, inputs)
        added = {}
        for name, g in result.grads.items():  # backward() accumulates into .grad
            if g is not None:
                old = self.grads.get(name)
                added[name] = g.copy() if old is None else old + g
        self.grads.update(added)
        self.last = (text, inputs, result)
        _report(result, quiet=self.quiet, table=True)
        console = present.make_console()
        present.print_result(result, console, precision=self.precision, full=self.full)

    def _reads(self, text: str) -> set[str]:
        """The names ``text`` reads that it does not bind: the program's free names, and a
        session name spelled as a constant (``e``), which the program's own would hide."""
        from .language import CONSTANTS, KEYWORD_VALUES, compile_program

        names = set(compile_program(text).free_names())
        for n in (*CONSTANTS, *KEYWORD_VALUES):
            if (n in self.values or n in self.bindings) and re.search(
                rf"(?<![\w.]){re.escape(n)}(?!\w)", text
            ):
                names.add(n)
        return names

    def _needed(self, names: Iterable[str]) -> list[str]:
        """The bindings ``names`` reach, each after the ones it reads (no recursion)."""
        order: list[str] = []
        done: set[str] = set()
        stack = [(n, False) for n in sorted(names, reverse=True)]
        while stack:
            n, expanded = stack.pop()
            if n in done or n not in self.bindings:
                continue
            if expanded:
                done.add(n)
                order.append(n)
                continue
            stack.append((n, True))
            stack.extend((d, False) for d in sorted(self._reads(self.bindings[n]), reverse=True))
        return order

    def _reach(self, names: set[str]) -> set[str]:
        """Every name ``names`` read, directly or through the bindings they reach."""
        needed = self._needed(names)
        return names.union(needed, *(self._reads(self.bindings[n]) for n in needed))

    def _program(self, expr: str) -> tuple[str, dict[str, Any]]:
        """The program of a line: the bindings it needs, then ``expr``; and its inputs."""
        reads = self._reads(expr)  # a syntax error shows the line as typed
        needed = self._needed(reads)
        text = "\n".join([*(f"{n} = {self.bindings[n]}" for n in needed), expr])
        used = self._reads(text) if needed else reads
        return text, {n: v for n, v in self.values.items() if n in used}

    def _evaluate(self, text: str, inputs: dict[str, Any]) -> Result:
        from .api import evaluate

        return evaluate(text, inputs, dtype=self.dtype, seed=self.seed, **self.limits)

    def _command(self, word: str, rest: str) -> None:
        from .errors import InputError
        from .language import suggest

        if word not in COMMANDS:
            known = [*COMMANDS, *ALIASES]
            raise InputError(
                msg(
                    "unknown command `{word}`{suggest}; :help lists them",
                    word=word,
                    suggest=suggest(word, known),
                )
            )
        if rest and word in (":vars", ":help", ":quit"):
            raise InputError(msg("{word} takes no argument", word=word))
        getattr(self, "_do_" + word[1:])(rest)

    def _do_help(self, rest: str) -> None:
        _say(translate(HELP) + "\n".join(map(translate, COMMANDS.values())))

    def _do_quit(self, rest: str) -> None:
        self.done = True

    def _do_vars(self, rest: str) -> None:
        if not self.values and not self.bindings:
            _say(tr("no names yet: bind one with NAME = VALUE"))
        for name, value in self.values.items():
            _say(f"{name}  {tuple(int(n) for n in value.shape)}  {self._array(value)}")
        for name, rhs in self.bindings.items():
            _say(f"{name} = {rhs}")

    def _names(self, rest: str) -> list[str]:
        """The inputs ``:grad`` and ``:zero`` act on: those named, else all."""
        from .errors import NamingError
        from .language import normalize_name, suggest

        names = [normalize_name(n) for n in rest.replace(",", " ").split()]
        for n in names:
            if n in self.bindings:
                raise NamingError(
                    msg(
                        "`{n}` is a binding, not an input: it keeps no .grad between lines (its "
                        "gradient is in the table of each line that uses it)",
                        n=n,
                    )
                )
            if n not in self.values:
                raise NamingError(
                    msg("unknown input `{n}`{suggest}", n=n, suggest=suggest(n, self.values))
                )
        return names or list(self.values)

    def _do_grad(self, rest: str) -> None:
        names = self._names(rest)
        if not names:
            _say(tr("no inputs yet: bind one with NAME = VALUE"))
        for name in names:
            grad = self.grads.get(name)
            if grad is None:
                _say(tr("{name}.grad = None (no backward() has reached {name} yet)", name=name))
            else:
                _say(f"{name}.grad = {self._array(grad, indent=len(name) + 8)}")

    def _do_zero(self, rest: str) -> None:
        names = [n for n in self._names(rest) if n in self.grads]
        for name in names:
            self.grads[name][...] = 0  # in place, as zero_()
        _say(
            tr("zeroed {grads}", grads=", ".join(f"{n}.grad" for n in names))
            if names
            else tr("no .grad to zero: no backward() has reached these inputs")
        )

    def _do_clip(self, rest: str) -> None:
        from . import autograd
        from .api import _clip_note, check_clipping
        from .errors import InputError

        words = rest.split()
        if len(words) not in (1, 2):
            raise InputError(
                msg(":clip takes MAX and an optional norm type P (:clip 1, :clip 1 inf)")
            )
        try:
            max_norm = float(words[0])
        except ValueError:
            raise InputError(
                msg(":clip: MAX must be a number, not {words!r}", words=words[0][:40])
            ) from None
        max_norm, _, p = check_clipping(max_norm, None, words[1] if len(words) > 1 else 2.0)
        grads = list(self.grads.values())
        if not grads:
            raise InputError(msg(":clip: no .grad to clip: evaluate an expression first"))
        total, scale = autograd.clip_by_norm(grads, max_norm, p)
        clip = {"max_norm": max_norm, "norm_type": p, "total_norm": total, "scale": scale}
        said = ", ".join(f"{n}.grad" for n in self.grads)
        _say(tr("clip_grad_norm_ on {grads}: {note}", grads=said, note=_clip_note(clip)))

    def _do_explain(self, rest: str, command: str = "explain") -> None:
        """``gradcli explain`` (or ``graph``) on EXPR, or on the last line's program."""
        from . import analysis, present, present_analysis
        from .errors import InputError
        from .reporting import _report

        if not rest and self.last is None:
            raise InputError(
                msg(":{command}: give an expression, or evaluate one first", command=command)
            )
        text, inputs = self._program(rest) if rest else self.last[:2]  # type: ignore[index]
        shown = getattr(analysis, command)(text, inputs, dtype=self.dtype, seed=self.seed,
                                           **self.limits)  # fmt: skip
        _report(shown, quiet=self.quiet, table=True)
        console, digits = present.make_console(), {"precision": self.precision}
        if command == "graph":
            present_analysis.print_graph(shown, console, **digits)
        else:
            present_analysis.print_explain(shown, console, **digits, full=self.full)

    def _do_graph(self, rest: str) -> None:
        self._do_explain(rest, "graph")

    def _do_save(self, rest: str) -> None:
        from .errors import InputError
        from .io import arrays_to_save, check_save_path, save_result

        if not rest:
            raise InputError(msg(":save needs a file name: :save grads.npz (.npz, .json or .npy)"))
        path = os.path.expanduser(rest)
        check_save_path(path)
        if self.last is None:
            raise InputError(msg(":save: no result yet: evaluate an expression first"))
        result = self.last[2]
        save_result(path, lambda: result.to_json(lists=False), arrays_to_save(result))
        _say(tr("saved {path}", path=path))

    def _array(self, a: Any, indent: int = 0) -> str:
        from .layout import format_array

        text = format_array(a, precision=self.precision, full=self.full)
        if indent:
            return text.replace("\n", "\n" + " " * indent)
        return " ".join(line.strip() for line in text.splitlines())

    def candidates(self, line: str, text: str) -> list[str]:
        """Tab completion: what may replace ``text``, the word before the cursor, when
        ``line`` is the line up to the cursor."""
        from .language import CONSTANTS, FUNCTIONS

        head = line.lstrip()
        pool: Iterable[str]
        if head.startswith(":"):
            word, space, arg = head.partition(" ")
            if not space:
                return sorted(c for c in COMMANDS if c.startswith(text))
            word = ALIASES.get(word, word)
            if word == ":save":
                return _paths(arg.lstrip(), text)
            if word in (":grad", ":zero"):
                pool = self.values
            elif word in (":explain", ":graph"):
                pool = [*self.values, *self.bindings, *FUNCTIONS, *CONSTANTS]
            else:
                return []
        else:
            pool = [*self.values, *self.bindings, *FUNCTIONS, *CONSTANTS]
        return sorted({n for n in pool if n.startswith(text)})


def _paths(arg: str, text: str) -> list[str]:
    """Files whose path starts with ``arg``, as the rest of ``text`` (its last part)."""
    import glob

    cut = len(arg) - len(text)
    found = glob.glob(glob.escape(arg) + "*")
    return sorted(p[cut:] + ("/" if os.path.isdir(p) else "") for p in found if cut >= 0)


def _say(text: str) -> None:
    """A line of the session's own on stdout (control characters escaped)."""
    from . import present

    present.make_console().print(text, markup=False, highlight=False, soft_wrap=True)


def history_path() -> str:
    """``$XDG_STATE_HOME/gradcli/history``, else ``~/.local/state/gradcli/history`` (a
    relative ``XDG_STATE_HOME`` is ignored, as the XDG specification says)."""
    state = os.environ.get("XDG_STATE_HOME", "")
    if not os.path.isabs(state):
        state = os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "gradcli", "history")


class Editing:
    """readline for a session on a terminal: line editing, the history file, completion.
    Without readline (or with a history file that cannot be read or written) the session
    runs all the same."""

    def __init__(self, session: Session, path: str) -> None:
        self.session = session
        self.path = path
        self.readline: Any = None
        self.matches: list[str] = []

    def start(self) -> None:
        try:
            import readline
        except ImportError:
            return
        self.readline = readline
        readline.set_history_length(HISTORY_LENGTH)
        with contextlib.suppress(OSError, ValueError):
            readline.read_history_file(self.path)
        readline.set_completer(self.complete)
        readline.set_completer_delims(readline.get_completer_delims().replace(":", ""))
        if "libedit" in (readline.__doc__ or ""):  # macOS's readline is libedit's
            readline.parse_and_bind("bind ^I rl_complete")
        else:
            readline.parse_and_bind("tab: complete")

    def complete(self, text: str, state: int) -> str | None:
        if state == 0:
            line = self.readline.get_line_buffer()[: self.readline.get_endidx()]
            self.matches = self.session.candidates(line, text)
        return self.matches[state] if state < len(self.matches) else None

    def stop(self) -> str | None:
        """Write the history file (in readline's own format) through a temporary file and
        a rename, so that it is never left half written; the reason when it cannot be."""
        import tempfile

        if self.readline is None:
            return None
        self.readline.set_completer(None)
        try:
            os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
            fd, temporary = tempfile.mkstemp(prefix=".history.", dir=os.path.dirname(self.path))
            os.close(fd)  # mode 0600
            try:
                self.readline.write_history_file(temporary)
                os.replace(temporary, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
        except OSError as e:
            return msg(
                "the history was not saved to {path}: {problem}",
                path=self.path,
                problem=e.strerror or e,
            )
        return None


def _is_terminal(stream: Any) -> bool:
    try:
        return stream is not None and bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False


def on_a_terminal() -> bool:
    """Whether stdin and stdout are both a terminal: ``gradcli`` alone starts a session."""
    return _is_terminal(sys.stdin) and _is_terminal(sys.stdout)


def run(
    lines: Iterable[str], out: TextIO | None = None, err: TextIO | None = None, **settings: Any
) -> int:
    """A session over ``lines`` (no prompts), its output written to ``out`` and ``err``
    (default: stdout, stderr). Returns the exit status: 0, or 1 when a line failed."""
    with contextlib.ExitStack() as stack:
        if out is not None:
            stack.enter_context(contextlib.redirect_stdout(out))
        if err is not None:
            stack.enter_context(contextlib.redirect_stderr(err))
        return Session(**settings).run_lines(lines)


def main(**settings: Any) -> int:
    """``gradcli repl``: interactive when stdin is a terminal, else the lines of stdin."""
    import gc

    gc.enable()  # a session runs for as long as its user: cycles must be freed
    session = Session(**settings)
    if _is_terminal(sys.stdin):
        return interactive(session)
    return session.run_lines(_stdin_lines(session.limits["max_program_chars"]))


def _stdin_lines(limit: int) -> Iterator[str]:
    """stdin's lines, as UTF-8 (a bad byte becomes U+FFFD). A line is read up to a bound
    (the rest is skipped): longer than ``limit`` characters, the limit refuses it anyway."""
    stream = getattr(sys.stdin, "buffer", sys.stdin)
    cap = 4 * limit + 8  # bytes: a character is at most 4
    while stream is not None:
        try:
            raw = stream.readline(cap)
            rest = raw
            while len(rest) == cap and rest[-1:] not in ("\n", b"\n"):  # too long: skip
                rest = stream.readline(cap)
        except (OSError, ValueError):  # closed
            return
        if not raw:
            return
        line = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        yield line


def interactive(session: Session) -> int:
    """The session on a terminal: a prompt, readline, Ctrl-C cancels the line (or the
    evaluation under way), Ctrl-D or :quit leaves with status 0."""
    import signal

    from . import __version__

    editing = Editing(session, history_path())
    editing.start()
    # the prompt goes where the user looks: stdout, or stderr when stdout is a file
    prompt = PROMPT if _is_terminal(sys.stdout) else ""
    try:
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:  # not the main thread
        previous = None
    sys.stderr.write(
        tr(
            "gradcli {version}: inputs are kept between lines. :help lists the commands; "
            "Ctrl-D leaves.",
            version=__version__,
        )
        + "\n"
    )
    try:
        while not session.done:
            try:
                if not prompt:
                    sys.stderr.write(PROMPT)
                    sys.stderr.flush()
                line = input(prompt)
            except KeyboardInterrupt:  # the line is cancelled; the session goes on
                sys.stdout.write("\n")
                continue
            except EOFError:
                sys.stdout.write("\n")
                break
            try:
                session.handle(line)
            except KeyboardInterrupt:
                sys.stderr.write(tr("interrupted") + "\n")
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        problem = editing.stop()
        if problem and not session.quiet:
            sys.stderr.write(f"{tr('warning')}: {translate(problem)}\n")
    return 0
