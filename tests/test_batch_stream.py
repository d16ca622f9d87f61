"""``batch``'s stream (docs/commands.md, "batch"): lines cut out of chunks as ``readline``
cuts them, whatever the chunks, an over-long line skipped unread."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradcli import batch
from gradcli.batch import read_lines


def _by_readline(stream: Any, max_line_bytes: int) -> Iterator[tuple[int, bytes | None, int]]:
    """The oracle: lines as ``readline`` gives them, an over-long one read through."""
    number = 0
    while line := stream.readline():
        number += 1
        content = len(line) - line.endswith(b"\n")
        yield number, None if content > max_line_bytes else line, len(line)


class _Trickle(io.RawIOBase):
    """A pipe whose writer sends a few bytes at a time."""

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        self.data, self.sizes, self.at = data, sizes, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = min(len(buffer), self.sizes[self.at % len(self.sizes)], len(self.data) - self.at)
        buffer[:n] = self.data[self.at : self.at + n]
        self.at += n
        return n


_LINES = st.lists(st.tuples(st.integers(0, 40), st.sampled_from([b"\n", b"\r\n", b""])), max_size=8)


@settings(max_examples=300, deadline=None)
@given(
    _LINES,
    st.integers(1, 24),
    st.sampled_from([1, 2, 3, 7, 64, 1 << 16]),
    st.lists(st.integers(1, 50), min_size=1, max_size=4),
)
def test_lines_are_cut_as_readline_cuts_them(
    lines: list[tuple[int, bytes]], longest: int, chunk: int, sizes: list[int]
) -> None:
    data = b"".join(b"x" * n + end for n, end in lines)
    expected = list(_by_readline(io.BytesIO(data), longest))
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(batch, "READ_CHUNK", chunk)
        assert list(read_lines(io.BytesIO(data), longest)) == expected
        trickle = io.BufferedReader(_Trickle(data, sizes), 16)
        assert list(read_lines(trickle, longest)) == expected
    finally:
        mp.undo()


def test_before_read_is_called_only_when_every_line_read_is_given() -> None:
    """Before each read of the stream, and only then: nothing read is left unanswered
    when the stream may make the reader wait."""
    data = b"a\nbb\n" + b"c" * 10 + b"\nd"
    seen: list[Any] = []
    lines = read_lines(io.BufferedReader(_Trickle(data, [3]), 16), 4, lambda: seen.append("read"))
    for number, raw, _ in lines:
        seen.append((number, raw))
    assert seen == [
        "read", (1, b"a\n"), "read", (2, b"bb\n"), "read", "read", "read", "read",
        (3, None), "read", (4, b"d"),
    ]  # fmt: skip


# ---- responses held while the stream has lines to answer ---------------------------------

TUTORIAL = '{{"id": {i}, "expr": "sum(a*b+b)", "inputs": {{"a": [{i}, 4], "b": [5, 6]}}}}'


class _Watched(io.RawIOBase):
    """A stream that sends the given pieces, one a read, and notes each read in ``events``."""

    def __init__(self, pieces: list[bytes], events: list[Any]) -> None:
        self.pieces, self.events = list(pieces), events

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self.events.append("read")
        if not self.pieces:
            return 0
        piece = self.pieces.pop(0)
        buffer[: len(piece)] = piece
        return len(piece)


def test_held_responses_are_written_before_the_stream_is_read_again() -> None:
    """What a coprocess needs: every line read is answered and written before the command
    waits for more; the lines of one read are written together, one write for them all."""
    pieces = [
        "".join(TUTORIAL.format(i=i) + "\n" for i in range(3)).encode(),
        (TUTORIAL.format(i=3) + "\n" + TUTORIAL.format(i=4)[:10]).encode(),
        (TUTORIAL.format(i=4)[10:] + "\nnot json\n").encode(),
    ]
    events: list[Any] = []
    failed = batch.run_batch(
        io.BufferedReader(_Watched(pieces, events), 1 << 16),
        lambda text: events.append([json.loads(line).get("id") for line in text.split("\n")]),
        hold=True,
    )
    assert failed == 1
    assert events == ["read", [0, 1, 2], "read", [3], "read", [4, None], "read"]


def test_held_text_is_the_text_written_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [TUTORIAL.format(i=i) for i in range(40)] + ["{", '{"expr": "sum(zeros(5000))"}']
    lines += [json.dumps({"id": 9, "expr": "sum(x)", "inputs": {"x": [1.5] * 7000}})]
    lines += [TUTORIAL.format(i=i) for i in range(40, 60)]
    data = ("\n".join(lines) + "\n").encode()
    one: list[str] = []
    held: list[str] = []
    assert batch.run_batch(io.BytesIO(data), one.append, accumulate=True) == 2
    monkeypatch.setattr(batch, "HOLD_CHARS", 4000)
    assert batch.run_batch(io.BytesIO(data), held.append, accumulate=True, hold=True) == 2
    assert "\n".join(held) == "\n".join(one)
    assert len(one) == len(lines) + 1
    assert 2 < len(held) < 20
    for text in held:  # together up to HOLD_CHARS (and one more), a large one on its own
        assert "\n" not in text or len(text) < 4000 + 400


def test_held_responses_are_written_when_they_are_old(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(range(0, 10**6, 1))  # each look at the clock: a second later
    monkeypatch.setattr(batch, "_monotonic", lambda: next(clock) / 40)
    written: list[str] = []
    data = "".join(TUTORIAL.format(i=i) + "\n" for i in range(6)).encode()
    batch.run_batch(io.BytesIO(data), written.append, hold=True)
    assert [text.count("\n") + 1 for text in written] == [2, 2, 2]
