"""What a chapter may say of its timed kernels: rates with intervals, comparisons with verdicts,
and a table — all from one set of records, so that the sentence, the box and the table agree.

`Ladder(timed)` takes the chapter's Timings by name (what `gb.bench` returned). Two kernels are
compared only when they were timed in one interleaved loop (the same `ladder_run`, see
gpubook.run.protocol): their per-iteration times pair up, and gpubook.facts.stats gives the
median ratio, its 95 % interval and a verdict — "faster" only when the interval and every
process agree, otherwise "at parity". A baseline is named "baseline:<name>"; its samples are
the ones the loop timed once per iteration for every member.

Every phrase a chapter glues through `than`, `fastest` or `expect` is remembered as a claim, and
`audit(table)` checks each against the rows the chapter's table shows (same numbers, same
order): a chapter calls it after building its table, and the build fails on a disagreement.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..facts.stats import Comparison, Interval, compare, median_interval

NOT_MEASURED = "not measured yet"


class ClaimError(AssertionError):
    """A sentence of a chapter that its own table contradicts."""


@dataclass
class Claim:
    kind: str  # "faster", "slower", "parity" (a against b) or "fastest" (a among names)
    a: str
    b: str | tuple[str, ...]
    spread: float = 0.0  # for parity: the ± per cent the sentence allows


def _owned(name: str, kernel: str) -> str:
    """A bare 'baseline:<b>' compared with `kernel` is b as timed in kernel's loop."""
    return f"{name}@{kernel}" if name.startswith("baseline:") and "@" not in name else name


class Ladder:
    """The chapter's timed kernels by name (Timing objects, or None for a kernel with no record)."""

    def __init__(self, timed: Mapping[str, Any] | None = None, unit: str = "TFLOP/s", scale: float = 1e12) -> None:
        self.records: dict[str, Any] = {}
        for n, t in (timed or {}).items():
            self.add(n, t)
        self.unit, self.scale = unit, scale
        self.claims: list[Claim] = []

    def add(self, name: str, timing: Any) -> Any:
        """Keep a kernel's timing (made here, or the replay's record of it: `Timing.best()`)."""
        self.records[name] = timing.best() if hasattr(timing, "best") else timing
        return timing

    # -- samples -------------------------------------------------------------------------
    def _samples(self, name: str, near: str | None = None) -> tuple[list[float], list[int], Any] | None:
        """(samples in ms, reps, the record holding them) of a kernel or of a baseline:
        'baseline:<b>@<kernel>' is b as timed in that kernel's loop; a bare 'baseline:<b>' is b
        in the loop of `near` (the kernel it is compared with), else in the first loop that
        timed it."""
        if name.startswith("baseline:"):
            b, _, owner = name.split(":", 1)[1].partition("@")
            order = [owner] if owner else ([near] if near else []) + list(self.records)
            for n in order:
                t = self.records.get(n)
                if t is not None and t.baselines_samples.get(b):
                    return t.baselines_samples[b], t.reps, t
            return None
        t = self.records.get(name)
        if t is None or not t.samples:
            return None
        return t.samples, t.reps, t

    def work(self, name: str) -> float | None:
        """The FLOPs (or bytes) of one call: the same for every kernel of a ladder."""
        owner = name.partition("@")[2] if name.startswith("baseline:") else name
        for t in [self.records.get(owner)] + list(self.records.values()):
            if t is not None and (t.flops or t.bytes):
                return t.flops or t.bytes
        return None

    def time(self, name: str) -> Interval | None:
        got = self._samples(name)
        return median_interval(got[0], got[1] or None) if got else None

    def rate(self, name: str) -> Interval | None:
        """The rate (per second, in the ladder's unit times `scale`) with its interval."""
        t, w = self.time(name), self.work(name)
        return t.scaled(w * 1e3) if t is not None and w else None

    def run_of(self, name: str) -> str | None:
        got = self._samples(name)
        return got[2].ladder_run if got else None

    def gpu(self) -> str | None:
        """The GPU the ladder's records ran on (the first that names one)."""
        return next((t.gpu for t in self.records.values() if t is not None and t.gpu), None)

    # -- comparisons ---------------------------------------------------------------------
    def compare(self, a: str, b: str) -> Comparison | None:
        """A against B, or None unless both were timed in the same loop."""
        sa, sb = self._samples(a, near=b), self._samples(b, near=a)
        if not (sa and sb):
            return None
        # one loop: a kernel and a baseline of its own record, or two records of one ladder run
        if sa[2] is not sb[2] and (sa[2].ladder_run is None or sa[2].ladder_run != sb[2].ladder_run):
            return None
        if len(sa[0]) != len(sb[0]):
            return None
        return compare(sa[0], sb[0], sa[1] or None)

    def than(self, a: str, b: str) -> str:
        """'7 % faster (5–9 %, 3 runs) than' / 'at parity (±2 %, 3 runs) with', remembered as a
        claim; or why there is no comparison."""
        c = self.compare(a, b)
        if c is None:
            return "not compared yet (not timed in one loop) with"
        self.claims.append(Claim(c.verdict, a, _owned(b, a), c.spread()))
        return c.phrase()

    def times(self, a: str, b: str) -> str:
        """'1.07× (1.05–1.09)', A's speed over B's, or 'not measured yet'."""
        c = self.compare(a, b)
        return c.times() if c is not None else NOT_MEASURED

    def expect(self, a: str, verdict: str, b: str) -> bool:
        """Whether A is `verdict` ('faster', 'slower', 'parity') against B, for prose that only
        holds then; a claim when it does (audited like the others), False when not measured."""
        c = self.compare(a, b)
        if c is None or c.verdict != verdict:
            return False
        self.claims.append(Claim(verdict, a, _owned(b, a), c.spread()))
        return True

    def fastest(self, names: Sequence[str]) -> str | None:
        """The kernel of highest median rate among `names` that have one (a claim)."""
        rated = [(r.median, n) for n in names if (r := self.rate(n)) is not None]
        if not rated:
            return None
        best = max(rated)[1]
        self.claims.append(Claim("fastest", best, tuple(n for _, n in rated)))
        return best

    def fmt_rate(self, name: str, digits: int = 0) -> str:
        """'627 TFLOP/s (620–633)' or 'not measured yet'."""
        r = self.rate(name)
        if r is None:
            return NOT_MEASURED
        s = self.scale
        return (f"{r.median / s:.{digits}f} {self.unit} "
                f"({r.lo / s:.{digits}f}–{r.hi / s:.{digits}f})")

    # -- the table and its audit ---------------------------------------------------------
    def row(self, name: str, against: Sequence[str] = ()) -> dict[str, Any] | None:
        """What a table shows of one kernel: its rate interval and its ratio to each of `against`."""
        r = self.rate(name)
        if r is None:
            return None
        return {"name": name, "rate": r, "vs": {b: self.compare(name, b) for b in against}}

    def audit(self, table: Sequence[dict[str, Any] | None]) -> int:
        """Check every claim against the rows of a table (from `row`): a kernel claimed faster
        than another must show the higher median rate, one claimed at parity (±x %) must not show
        medians further apart than x % (and half a per cent of rounding), and the kernel called fastest must have
        the highest rate of the rows it was chosen among. Returns how many claims it checked;
        raises ClaimError on the first that the table contradicts, or that names a kernel
        missing from the table."""
        rows = {r["name"]: r for r in table if r is not None}
        for c in self.claims:
            names = (c.a,) + ((c.b,) if isinstance(c.b, str) else tuple(c.b))
            missing = [n for n in names if n not in rows and not n.startswith("baseline:")]
            if missing:
                raise ClaimError(f"a claim names {', '.join(missing)}, which the table does not show")
            rate = {n: (rows[n]["rate"] if n in rows else self.rate(n)) for n in names}
            if c.kind == "fastest":
                top = max(names, key=lambda n: rate[n].median)
                if top != c.a:
                    raise ClaimError(f"{c.a} is called the fastest, but the table shows {top} ahead")
                continue
            ra, rb = rate[c.a], rate[c.b]
            if c.kind == "faster" and not ra.median > rb.median:
                raise ClaimError(f"{c.a} is called faster than {c.b}, but the table shows "
                                 f"{ra.median / self.scale:.0f} against {rb.median / self.scale:.0f} {self.unit}")
            if c.kind == "slower" and not ra.median < rb.median:
                raise ClaimError(f"{c.a} is called slower than {c.b}, but the table shows "
                                 f"{ra.median / self.scale:.0f} against {rb.median / self.scale:.0f} {self.unit}")
            gap = 100 * abs(ra.median / rb.median - 1)
            if c.kind == "parity" and gap > c.spread + 0.5:   # half a per cent: the table's rounding
                raise ClaimError(f"{c.a} is called at parity (±{c.spread:.1f} %) with {c.b}, but the table "
                                 f"shows a gap of {gap:.1f} %")
        return len(self.claims)
