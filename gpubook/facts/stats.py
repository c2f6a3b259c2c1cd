"""Intervals for timings: the median of a kernel's samples and of the paired ratio of two kernels
timed in one interleaved loop, with 95 % bootstrap intervals, and the verdict a sentence may state.

A timing protocol run (gpubook.run.protocol) repeats one interleaved loop in several processes.
Iteration i of process p timed every kernel of the loop once, in a rotated order, so the samples
of two kernels pair up by (p, i): the ratio t_B / t_A of one pair is free of whatever the clock
did between iterations. The bootstrap resamples iterations within each process (a stratified
bootstrap), so that every process keeps its weight, and reports the percentile interval of the
median. Processes differ by more than iterations do (a GPU's clock state, the allocator's
placement), so a comparison also keeps each process's own median ratio, and a verdict of
"faster" needs both: the interval excludes 1 and every process saw A ahead.

The bootstrap runs in numpy where it is installed and in pure Python where not (a lean GPU host),
with the same numbers either way.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass, field
from typing import Sequence

CONFIDENCE = 0.95
BOOTSTRAP = 2000


@dataclass(frozen=True)
class Interval:
    """A median and its confidence interval, in the unit of the samples."""

    median: float
    lo: float
    hi: float
    n: int = 0  # samples behind it
    runs: int = 1  # independent processes behind it

    def scaled(self, factor: float) -> "Interval":
        """The same interval of factor / x (a time in ms turned into a rate): the bounds swap."""
        return Interval(factor / self.median, factor / self.hi, factor / self.lo, self.n, self.runs)

    def half_width(self) -> float:
        """The larger distance from the median to a bound, relative to the median."""
        return max(self.median - self.lo, self.hi - self.median) / self.median


def _strata(samples: Sequence[float], reps: Sequence[int] | None) -> list[list[float]]:
    """The samples split by process (`reps`: how many each process contributed, in order)."""
    if not reps:
        return [list(samples)]
    if sum(reps) != len(samples):
        raise ValueError(f"reps {list(reps)} do not add up to the {len(samples)} samples")
    out, at = [], 0
    for n in reps:
        out.append(list(samples[at:at + n]))
        at += n
    return [s for s in out if s]


def _bootstrap_median(strata: list[list[float]], boot: int, seed: int) -> tuple[float, float]:
    """The percentile interval of the median over `boot` stratified resamples: each resample
    draws len(s) of each stratum s with replacement, `random.Random(seed).choices` draw for draw."""
    try:
        meds = _resampled_medians_numpy(strata, boot, seed)
    except ImportError:
        meds = _resampled_medians(strata, boot, seed)
    meds.sort()
    tail = (1 - CONFIDENCE) / 2
    return meds[int(tail * (boot - 1))], meds[int((1 - tail) * (boot - 1))]


def _resampled_medians(strata: list[list[float]], boot: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [statistics.median([x for s in strata for x in rng.choices(s, k=len(s))])
            for _ in range(boot)]


def _resampled_medians_numpy(strata: list[list[float]], boot: int, seed: int) -> list[float]:
    """`_resampled_medians`, the same numbers in bulk: numpy's legacy generator, given the state
    of `random.Random(seed)`, yields the same doubles as its `random()` (both MT19937, 53 bits
    from two draws), `choices` takes element floor(u * n), and the median of an even count is
    the mean of the middle two, as `statistics.median` computes it."""
    import numpy as np

    state = random.Random(seed).getstate()[1]
    gen = np.random.RandomState()
    gen.set_state(("MT19937", np.array(state[:624], dtype=np.uint32), state[624]))
    sizes = [len(s) for s in strata]
    n = sum(sizes)
    u = gen.random_sample(boot * n).reshape(boot, n)      # draw order: resample, stratum, draw
    values = np.empty((boot, n))
    at = 0
    for s, k in zip(strata, sizes):
        values[:, at:at + k] = np.asarray(s, dtype=np.float64)[np.floor(u[:, at:at + k] * float(k)).astype(np.int64)]
        at += k
    values.sort(axis=1)
    mid = values[:, n // 2] if n % 2 else (values[:, n // 2 - 1] + values[:, n // 2]) / 2
    return mid.tolist()


def median_interval(samples: Sequence[float], reps: Sequence[int] | None = None,
                    boot: int = BOOTSTRAP, seed: int = 0) -> Interval:
    """The median of `samples` and its 95 % interval (bootstrap stratified by process)."""
    strata = _strata(samples, reps)
    pooled = [x for s in strata for x in s]
    if not pooled:
        raise ValueError("no samples")
    lo, hi = _bootstrap_median(strata, boot, seed) if len(pooled) > 1 else (pooled[0], pooled[0])
    return Interval(statistics.median(pooled), lo, hi, len(pooled), len(strata))


def _pct(x: float) -> str:
    """A percentage as prose gives it: one decimal below 10, none above."""
    return f"{x:.1f}" if x < 10 else f"{x:.0f}"


@dataclass(frozen=True)
class Comparison:
    """How many times faster A ran than B in the same loop: the median over iterations of
    t_B / t_A, its 95 % interval, and each process's own median."""

    ratio: Interval
    per_run: tuple[float, ...] = field(default_factory=tuple)

    @property
    def verdict(self) -> str:
        """'faster', 'slower' or 'parity'. Faster only when the interval lies above 1 and every
        process's median ratio does too; slower likewise below 1."""
        r, runs = self.ratio, self.per_run or (self.ratio.median,)
        if r.lo > 1 and all(x > 1 for x in runs):
            return "faster"
        if r.hi < 1 and all(x < 1 for x in runs):
            return "slower"
        return "parity"

    def percent(self) -> float:
        """The gap in per cent of B's time: +7 for 7 % faster, -7 for 7 % slower."""
        return 100 * (self.ratio.median - 1)

    def spread(self) -> float:
        """What the interval allows on either side of 1, in per cent: the '±x %' of parity."""
        return 100 * max(abs(self.ratio.lo - 1), abs(self.ratio.hi - 1))

    def phrase(self) -> str:
        """'7.1 % faster (5.2–9.0 %, 3 runs) than' / '… slower …' / 'at parity (±1.8 %, 3 runs)
        with', to glue between two names: the gap, then its 95 % interval."""
        r = self.ratio
        if self.verdict == "parity":
            return f"at parity (±{_pct(self.spread())} %, {r.runs} runs) with"
        lo, hi = sorted((abs(100 * (r.lo - 1)), abs(100 * (r.hi - 1))))
        word = "faster" if self.verdict == "faster" else "slower"
        return f"{_pct(abs(self.percent()))} % {word} ({_pct(lo)}–{_pct(hi)} %, {r.runs} runs) than"

    def times(self) -> str:
        """'1.07× (1.05–1.09)': the ratio with its interval."""
        r = self.ratio
        return f"{r.median:.2f}× ({r.lo:.2f}–{r.hi:.2f})"


def compare(a: Sequence[float], b: Sequence[float], reps: Sequence[int] | None = None,
            boot: int = BOOTSTRAP, seed: int = 0) -> Comparison:
    """A against B from paired times (a[i] and b[i] measured in the same iteration)."""
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} and {len(b)}")
    ratios = [tb / ta for ta, tb in zip(a, b)]
    strata = _strata(ratios, reps)
    return Comparison(median_interval(ratios, reps, boot, seed),
                      tuple(statistics.median(s) for s in strata))
