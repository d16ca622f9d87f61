"""Statistics over repeated measurements and the in-process timer (standard library only)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Stats:
    """Samples of one measurement (seconds, or MiB for memory) and their summary."""

    samples: tuple[float, ...]
    unit: str = "s"
    calls_per_round: int = 1

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def q1(self) -> float:
        return self._quartiles()[0]

    @property
    def q3(self) -> float:
        return self._quartiles()[2]

    @property
    def lo(self) -> float:
        return min(self.samples)

    @property
    def hi(self) -> float:
        return max(self.samples)

    def _quartiles(self) -> list[float]:
        if len(self.samples) < 2:
            return [self.samples[0]] * 3
        return statistics.quantiles(self.samples, n=4, method="inclusive")

    def to_json(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "median": self.median,
            "q1": self.q1,
            "q3": self.q3,
            "min": self.lo,
            "max": self.hi,
            "rounds": len(self.samples),
            "calls_per_round": self.calls_per_round,
            "samples": list(self.samples),
        }


@dataclass(frozen=True)
class TimerConfig:
    """How long to warm up, how long one round lasts, how many rounds, and a time budget."""

    warmup: float = 0.3  # seconds of calls before measuring (at least one call)
    round_time: float = 0.25  # each round repeats the call until about this long
    rounds: int = 7  # median over this many rounds
    budget: float = 20.0  # fewer rounds (not fewer than min_rounds) when a call is this slow
    min_rounds: int = 3


def calibrate(fn: Callable[[], Any], config: TimerConfig) -> tuple[int, int]:
    """Warm ``fn`` up; return (calls per round, rounds) for about ``round_time`` a round."""
    calls = 0
    start = time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= config.warmup and (calls >= 2 or elapsed >= 0.5):
            break
    single = elapsed / calls
    number = max(1, round(config.round_time / single)) if single > 0 else 1000
    rounds = config.rounds
    if single * number * rounds > config.budget:
        rounds = max(config.min_rounds, int(config.budget / (single * number)))
    return number, rounds


def run_round(fn: Callable[[], Any], number: int, per: float = 1.0) -> float:
    """The mean time of one call over ``number`` calls, divided by ``per``."""
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number / per


def measure_interleaved(
    fns: dict[str, Callable[[], Any]], config: TimerConfig, per: float = 1.0
) -> dict[str, Stats]:
    """Time several functions: warm each up, then alternate their rounds, so that a burst
    of other work on the machine hits all of them alike. Each sample is the mean time of
    one call over a round, divided by ``per`` (e.g. the operations in one call)."""
    plans = {key: calibrate(fn, config) for key, fn in fns.items()}
    samples: dict[str, list[float]] = {key: [] for key in fns}
    for r in range(max(rounds for _, rounds in plans.values())):
        for key, fn in fns.items():
            number, rounds = plans[key]
            if r < rounds:
                samples[key].append(run_round(fn, number, per))
    return {key: Stats(tuple(samples[key]), "s", plans[key][0]) for key in fns}


def measure(fn: Callable[[], Any], config: TimerConfig, per: float = 1.0) -> Stats:
    """Time one function (see :func:`measure_interleaved`)."""
    return measure_interleaved({"fn": fn}, config, per)["fn"]


def format_time(seconds: float) -> str:
    a = abs(seconds)
    if a < 1e-6:
        return f"{seconds * 1e9:.0f} ns"
    if a < 1e-3:
        return f"{seconds * 1e6:.3g} µs"
    if a < 1:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"


def format_value(value: float, unit: str) -> str:
    if unit == "s":
        return format_time(value)
    return f"{value:.1f} {unit}"
