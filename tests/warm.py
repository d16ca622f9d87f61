"""A warm start for the tests' ``python -m gradcli`` processes: one server process imports
gradcli's command line once, then forks a child for each command line the tests run.

A fresh interpreter spends ~0.3 s of CPU starting and importing NumPy, typer, rich and
lark (and, with ``PYTHONDONTWRITEBYTECODE``, compiling gradcli) before a command does
anything, and the tests run several hundred command lines; a warm child takes ~0.05 s.
A forked child skips that and is otherwise the process a test wants: its own pid,
its standard streams real pipes (or the caller's stdin), its environment, working
directory and ``sys.argv`` those of ``python -m gradcli ARGS``, and ``gradcli.__main__``
run as ``__main__`` by :mod:`runpy` as ``-m`` runs it, so that exit codes, ``SystemExit``,
uncaught exceptions (a traceback on stderr) and the flush of stdout at exit are the
interpreter's own. Its status is the child's wait status, as :mod:`subprocess` reports it.

What a warm child cannot show, a test must still run for real (``harness.process`` does so
where :func:`needs_a_cold_start` says, or everywhere with ``GRADCLI_COLD_START=1``): the
start-up itself (import time, Ctrl-C before the command line is imported), and the
process-wide settings that must come before NumPy starts (``arguments.one_heap``, taken
by a command line that may evaluate on Dask). Tests of signals, closed or full streams,
terminals, shells and the console script start their own processes, as before.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent
_HEADER = struct.Struct("!I")


def needs_a_cold_start(args: tuple[str, ...]) -> bool:
    """Whether ``gradcli ARGS`` must start as a fresh interpreter: asked for by
    ``GRADCLI_COLD_START=1``, or a command line that may evaluate on Dask, whose process
    sets its allocator and BLAS threads before NumPy is imported (``arguments.one_heap``)
    and starts Dask's threads or processes (the same look at the words as
    ``arguments.may_use_dask``), or ``batch --jobs``, whose workers are processes."""
    if os.environ.get("GRADCLI_COLD_START"):
        return True
    return any(
        "dask" in a or ".zarr" in a or ".npy" in a or a.startswith(("--jobs", "--scheduler"))
        for a in args
    )


# --------------------------------------------------------------------------------------
# The server: python -c "import warm; warm.main(FD)"
# --------------------------------------------------------------------------------------


def _send(sock: socket.socket, obj: Any, fds: list[int] | None = None) -> None:
    data = json.dumps(obj).encode("utf-8")
    packet = _HEADER.pack(len(data)) + data
    if fds:
        socket.send_fds(sock, [packet], fds)
    else:
        sock.sendall(packet)


def _recv_exact(sock: socket.socket, n: int, fds: list[int]) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk, got, _, _ = socket.recv_fds(sock, n - len(data), 8)
        fds.extend(got)
        if not chunk:
            return None
        data += chunk
    return data


def _recv(sock: socket.socket) -> tuple[Any, list[int]] | None:
    fds: list[int] = []
    header = _recv_exact(sock, _HEADER.size, fds)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    data = _recv_exact(sock, size, fds)
    if data is None:
        return None
    return json.loads(data), fds


#: command lines whose imports the server makes: each command, a table, JSON, an error, help
_PROBES = [
    ["eval", "a*b+b", "a=[3,4]", "b=[5,6]"],
    ["eval", "h = a*b; sum(h)", "a=[3,4]", "b=[5,6]", "--json", "--clip-norm", "1"],
    ["eval", "x +* 1", "x=1"],
    ["eval", "-", "--json"],
    ["eval", "x", "x=[1, nan]", "--dtype", "float32"],
    ["jacobian", "x*2", "x=[1,2]"],
    ["jacobian", "x*2", "x=[1,2]", "--json"],
    ["hessian", "sum(x**3)", "x=[1,2]"],
    ["check", "sum(x*x)", "x=1"],
    ["check", "sum(x*x)", "x=1", "--json"],
    ["graph", "sum(x*x)", "x=1"],
    ["graph", "sum(x*x)", "x=1", "--dot"],
    ["optimize", "x**2", "x=1", "--steps", "3"],
    ["optimize", "x**2", "x=1", "--steps", "3", "--json"],
    ["jvp", "x*2", "x=[1,2]", "--tangent", "x=[1,0]"],
    ["functions"],
    ["functions", "tanh"],
    ["batch"],
    ["eval", "--help"],
    ["--help"],
]
#: packages a command line imports only when it runs on Dask or a terminal
_NOT_PRELOADED = ("dask", "distributed", "zarr", "readline", "tornado", "gradcli.lazy")


def _imports_of_the_probes() -> list[str]:
    """The modules a process has imported after running each of :data:`_PROBES` (in a
    forked child, its streams /dev/null), in the order it imported them."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            from gradcli.cli import main as gradcli

            for argv in _PROBES:
                with contextlib.suppress(BaseException):  # only the imports are wanted
                    gradcli(argv)
            with open(write, "w", encoding="utf-8") as f:
                f.write("\n".join(sys.modules))
        finally:
            os._exit(0)
    os.close(write)
    with open(read, encoding="utf-8") as f:
        names = f.read().split("\n")
    os.waitpid(pid, 0)
    return names


def _preload() -> None:
    """Import what the command lines import, so that a child starts where a command line
    begins its own work: gradcli's modules are imported lazily, by the command that
    needs them, and with ``PYTHONDONTWRITEBYTECODE`` each process compiles them anew."""
    import importlib

    import gradcli.cli  # noqa: F401

    for name in _imports_of_the_probes():
        if name in sys.modules or name.startswith(_NOT_PRELOADED) or "dask" in name:
            continue
        with contextlib.suppress(Exception):  # one that imports only as part of another
            importlib.import_module(name)


def _serve(sock: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """Answer requests until the tests hang up (then exit): run a command line in a forked
    child, or fork a server of its own for another connection (a test that runs command
    lines from several threads). In a child, return its request and its standard streams."""
    _preload()
    while True:
        got = _recv(sock)
        if got is None:  # the tests hung up: wait for the servers forked for them, then go
            with contextlib.suppress(ChildProcessError):
                while True:
                    os.wait()
            os._exit(0)
        request, fds = got
        pid = os.fork()
        if pid == 0:
            sock.close()
            if request.get("connection"):  # a server for the connection given
                sock = socket.socket(fileno=fds[0])
                continue
            return request, fds
        for fd in fds:
            os.close(fd)
        if request.get("connection"):
            continue
        _send(sock, {"pid": pid})
        _, status = os.waitpid(pid, 0)
        _send(sock, {"status": status})


def main(fd: int) -> None:
    """The server's body; in each child, becomes ``python -m gradcli ARGS``."""
    import runpy

    sys.path[0] = os.getcwd()  # not '': the modules it imports keep their place
    sock = socket.socket(fileno=fd)
    request, fds = _serve(sock)
    for target, fd in zip(request["targets"], fds, strict=True):
        os.dup2(fd, target)
        os.close(fd)
    if 0 not in request["targets"]:  # the caller's stdin is closed: so is the child's
        os.close(0)
        sys.stdin = sys.__stdin__ = None  # type: ignore[assignment]  (as the interpreter)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    # -m puts the working directory first on the path, and the tests' folder is not on it
    sys.path[:] = [os.getcwd(), *(p for p in sys.path[1:] if p != str(TESTS))]
    # stdout is line-buffered on a terminal only, as the interpreter makes it at start-up
    if not sys.stdout.write_through:
        sys.stdout.reconfigure(line_buffering=os.isatty(1))
    sys.argv = ["-m", *request["args"]]
    runpy._run_module_as_main("gradcli", alter_argv=True)  # type: ignore[attr-defined]


# --------------------------------------------------------------------------------------
# The tests' side
# --------------------------------------------------------------------------------------


class _Server:
    """The server process, which forks a server for each connection asked of it."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        ours, theirs = _socketpair()
        path = os.pathsep.join(p for p in (str(TESTS), env.get("PYTHONPATH")) if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", f"import warm; warm.main({theirs.fileno()})"],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=cwd,
            env={**env, "PYTHONPATH": path},
        )
        theirs.close()
        self.control = ours
        self.idle: list[_Connection] = []

    def connect(self) -> _Connection:
        """A connection of its own, served by a fork of the server."""
        ours, theirs = _socketpair()
        _send(self.control, {"connection": True}, [theirs.fileno()])
        theirs.close()
        return _Connection(ours)

    def close(self) -> None:
        """Hang up every connection, then the server, and wait for it (it waits for the
        servers it forked), so that no process is left behind."""
        for connection in self.idle:
            connection.sock.close()
        self.control.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class _Connection:
    """One command line at a time."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def run(
        self,
        args: tuple[str, ...],
        stdin: bytes | int | None,
        env: dict[str, str],
        cwd: Path,
        timeout: float,
        started: Callable[[int], None] | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        out_r, out_w = _pipe()
        err_r, err_w = _pipe()
        if stdin == subprocess.DEVNULL:
            in_r, in_w = _high(os.open(os.devnull, os.O_RDONLY)), -1
        elif isinstance(stdin, bytes):
            in_r, in_w = _pipe()
        else:  # the caller's own, if it has one
            in_r, in_w = (0, -1) if _is_open(0) else (-1, -1)
        targets = [0, 1, 2] if in_r != -1 else [1, 2]
        request = {"args": list(args), "env": env, "cwd": str(cwd), "targets": targets}
        _send(self.sock, request, [fd for fd in (in_r, out_w, err_w) if fd != -1])
        for fd in (out_w, err_w) + ((in_r,) if in_r > 0 else ()):
            os.close(fd)
        pid = self._reply("pid")
        if started is not None:
            started(pid)
        streams: dict[int, bytes] = {}

        def read(fd: int) -> None:
            with open(fd, "rb") as f:
                streams[fd] = f.read()

        def write() -> None:
            assert isinstance(stdin, bytes)
            with open(in_w, "wb") as f:
                try:
                    f.write(stdin)
                    f.flush()
                except BrokenPipeError:  # the command stopped reading: as subprocess does
                    pass

        threads = [threading.Thread(target=read, args=(fd,)) for fd in (out_r, err_r)]
        if isinstance(stdin, bytes):
            threads.append(threading.Thread(target=write))
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout)
            if t.is_alive():
                os.kill(pid, 9)
                for t in threads:
                    t.join()
                self._reply("status")
                raise subprocess.TimeoutExpired(["gradcli", *args], timeout)
        code = os.waitstatus_to_exitcode(self._reply("status"))
        return subprocess.CompletedProcess(["gradcli", *args], code, streams[out_r], streams[err_r])

    def _reply(self, key: str) -> int:
        got = _recv(self.sock)
        if got is None:
            raise RuntimeError("the warm gradcli server went away")
        return int(got[0][key])


def _high(fd: int) -> int:
    """``fd`` moved above the standard streams: where the tests' process has a standard
    stream closed, a descriptor of ours must not take its place."""
    if fd > 2:
        return fd
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.close(fd)
    return high


def _pipe() -> tuple[int, int]:
    read, write = os.pipe()
    return _high(read), _high(write)


def _socketpair() -> tuple[socket.socket, socket.socket]:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pair = []
    for sock in (a, b):
        fd = sock.detach()
        pair.append(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=_high(fd)))
    return pair[0], pair[1]


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


#: the servers, by the environment that a process reads as the interpreter starts
_SERVERS: dict[tuple[tuple[str, str], ...], _Server] = {}
_LOCK = threading.Lock()


#: the locale variables the interpreter reads as it starts (its LC_CTYPE: the encodings,
#: the C locale's coercion); the language of messages (LANGUAGE, LC_MESSAGES) is read by
#: each command
_START_UP_LOCALE = ("LC_ALL", "LC_CTYPE", "LANG")


def _start_up(env: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """What of ``env`` the interpreter reads as it starts (the module path, the streams'
    encoding and buffering, the locale): a child of a server started with other values
    would not be the process asked for, so each gets a server of its own."""
    read = sorted((k, v) for k, v in env.items() if k.startswith("PYTHON") or k in _START_UP_LOCALE)
    return tuple(read)


def run(
    args: tuple[str | bytes, ...],
    stdin: bytes | int | None,
    env: dict[str, str],
    cwd: Path,
    timeout: float,
    started: Callable[[int], None] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """``python -m gradcli ARGS`` as a child of the warm server for ``env``'s start-up
    variables (started at the first such call), on a connection of this thread's own while
    it runs. ``stdin``: bytes through a pipe, ``subprocess.DEVNULL``, or ``None`` for the
    caller's own; ``started`` is given the child's pid; an argument that is not text is
    given as ``os.fsdecode`` of its bytes, as the interpreter decodes it."""
    args = tuple(os.fsdecode(a) for a in args)
    key = _start_up(env)
    with _LOCK:
        server = _SERVERS.get(key)
        if server is None:
            base = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")}
            server = _SERVERS[key] = _Server(base, TESTS.parent)
            atexit.register(server.close)
        connection = server.idle.pop() if server.idle else server.connect()
    try:
        return connection.run(args, stdin, env, cwd, timeout, started)
    finally:
        with _LOCK:
            server.idle.append(connection)
