"""An event model of the FA4 kernels' schedules (chapter 11B): who waits for whom, and for how long.

No CPU can run a tcgen05 kernel, but its schedule follows from its barrier protocol and a few
durations. `simulate` plays the protocol of one kernel over a work tile of `n_kv` KV blocks and
returns every role's busy intervals in cycles; `plot` draws them as swimlanes, and
`sweep_softmax` (drawn by `plot_sweep`) gives the tensor core's utilization of both kernels as
the softmax grows.

The two-Q-tile kernel (a work tile is 256 query rows: Q tiles 0 and 1) has five roles:

- the MMA warp, one thread issuing in the order ``QK0(0), QK1(0)``, then for each block j
  ``PV0(j), [QK0(j+1)], PV1(j), [QK1(j+1)]``. It blocks at each wait, so nothing behind a wait
  is issued until it passes: ``QKi(j)`` waits for ``PVi(j-1)`` to complete (S_i holds P_i, which
  that MMA reads), ``PVi(j)`` for P_i(j) from softmax i and for O_i's correction of block j.
  The tensor core runs the issued MMAs one at a time in issue order.
- softmax warpgroups 0 and 1: block j of softmax i starts once ``QKi(j)`` has completed, hands
  α to the correction `alpha_frac` of the way through, and ends with P_i(j) in tensor memory.
- the correction warpgroup, serving (j, 0), (j, 1), (j+1, 0), ... in that order: step (j, i)
  waits for α of softmax i block j and (for j > 0) for ``PVi(j-1)`` to complete, then rescales
  O_i (`corr` cycles) or only checks and passes (`corr_skip` cycles); its end is ``o_ready``.
  After the last block, the epilogues of tile 0 then tile 1, each after its last ``PV``.

The one-Q-tile kernel of the chapter (128 rows) has the MMA warp issue ``QK(0), QK(1)``, then
per block ``PV(j), [QK(j+2)]`` where ``QK(j+2)`` reuses S_(j mod 2) and so waits for ``PV(j)``
to complete; its single softmax warpgroup computes block j (`softmax` cycles, α at
`alpha_frac`), then waits for ``PV(j-1)`` and corrects O itself before it hands P over.

Every wait on an MMA's completion (a `tcgen05.commit` arriving on an mbarrier that a thread
polls) costs `wake` cycles between the MMA's end and the waiter's next step; hand-overs between
threads are taken as immediate, TMA loads as always ready, and each role's durations as fixed
(the two softmax warpgroups share the SM's MUFU and FMA pipes; the model does not slow them
when they overlap). The first block never rescales:
O holds nothing yet (``PV(0)`` overwrites it). `rescale[i][j]` says whether block j of Q tile i
moves the row max by more than τ (the default: never).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple, Sequence

MMA_CYCLES = 2 * 128 ** 3 // 8192  # one 128x128x128 BF16 MMA at 8192 FLOP per clock: 512 cycles

TENSOR = "tensor core"
CORRECTION = "correction"
LANES_TWO = (TENSOR, "softmax 0", "softmax 1", CORRECTION)
LANES_ONE = (TENSOR, "softmax")


class Event(NamedTuple):
    """One busy interval of one role, in cycles."""

    role: str
    label: str
    start: float
    end: float


@dataclass
class Timeline:
    """The simulated schedule of one kernel: every role's busy intervals.

    `marks` holds instants that are not intervals (the α hand-overs, keyed like ``α0(2)``);
    `rescaled` the labels of the correction steps that rescaled O.
    """

    kernel: str                      # "two Q tiles" or "one Q tile"
    n_kv: int
    params: dict[str, Any]
    events: list[Event] = field(default_factory=list)
    marks: dict[str, float] = field(default_factory=dict)
    rescaled: set[str] = field(default_factory=set)

    def lane(self, role: str) -> list[Event]:
        """The events of one role, in time order."""
        return sorted((e for e in self.events if e.role == role), key=lambda e: e.start)

    def event(self, label: str) -> Event:
        """The event with this label (labels are unique within a timeline)."""
        for e in self.events:
            if e.label == label:
                return e
        raise KeyError(label)

    @property
    def lanes(self) -> tuple[str, ...]:
        return LANES_TWO if self.kernel == "two Q tiles" else LANES_ONE

    @property
    def mmas(self) -> list[Event]:
        return self.lane(TENSOR)

    @property
    def tensor_busy(self) -> float:
        """Cycles the tensor core spends running MMAs."""
        return sum(e.end - e.start for e in self.mmas)

    @property
    def makespan(self) -> float:
        """From time 0 (the first QK issued) to the end of the last epilogue."""
        return max(e.end for e in self.events)

    @property
    def utilization(self) -> float:
        """Tensor-core busy cycles over the span from the first MMA's start to the last one's end."""
        m = self.mmas
        return self.tensor_busy / (m[-1].end - m[0].start)


class _Role:
    """A role that runs its steps in program order: a step is ready when its waits have passed
    and its predecessor was ready; it starts when it is ready and its predecessor has ended
    (for the MMA warp: ready = issued, start = when the tensor core takes it)."""

    def __init__(self, name: str):
        self.name, self.steps, self.next = name, [], 0
        self.ready, self.free = 0.0, 0.0

    def add(self, label: str, dur: float, waits: Sequence[tuple[str, float]] = (),
            marks: dict[str, float] | None = None) -> None:
        self.steps.append((label, dur, tuple(waits), marks or {}))


def _run(roles: Sequence[_Role]) -> tuple[list[Event], dict[str, float]]:
    """Advance every role whose next step's waits are all known, until every step has run."""
    done: dict[str, float] = {}                   # label (or mark) -> its time
    events = []
    while any(r.next < len(r.steps) for r in roles):
        progress = False
        for r in roles:
            while r.next < len(r.steps):
                label, dur, waits, marks = r.steps[r.next]
                if any(w not in done for w, _ in waits):
                    break
                r.ready = max([r.ready] + [done[w] + d for w, d in waits])
                start = max(r.ready, r.free)
                r.free = start + dur
                done[label] = r.free
                for m, off in marks.items():
                    done[m] = start + off
                events.append(Event(r.name, label, start, r.free))
                r.next += 1
                progress = True
        if not progress:                          # a protocol that waits in a circle
            stuck = {r.name: r.steps[r.next][0] for r in roles if r.next < len(r.steps)}
            raise RuntimeError(f"deadlock: {stuck}")
    return events, done


def _rescale_table(rescale: Sequence[Sequence[bool]] | None, tiles: int, n_kv: int) -> list[list[bool]]:
    if rescale is None:
        return [[False] * n_kv for _ in range(tiles)]
    table = [[bool(x) for x in row] for row in rescale]
    if len(table) != tiles or any(len(row) != n_kv for row in table):
        raise ValueError(f"rescale must be {tiles} lists of {n_kv} booleans")
    return table


def simulate(n_kv: int, two_q_tiles: bool = True, mma: float = MMA_CYCLES, softmax: float = 1000,
             alpha_frac: float = 0.3, corr: float = 300, corr_skip: float = 40, epi: float = 600,
             wake: float = 100, rescale: Sequence[Sequence[bool]] | None = None,
             pv_wait: bool = True) -> Timeline:
    """The schedule of one work tile of `n_kv` KV blocks, in cycles (module docstring: the rules).

    `rescale[i][j]`: whether block j of Q tile i must rescale O (one list for the one-tile
    kernel, two for the two-tile kernel; entries for j = 0 are ignored). `pv_wait=False`
    drops the MMA warp's wait for the P V that reads the columns a Q K^T overwrites (FA4's
    published order, which leans on the tensor core executing the two in issue order).
    """
    if n_kv < 1:
        raise ValueError("n_kv must be at least 1")
    if not 0.0 <= alpha_frac <= 1.0:
        raise ValueError("alpha_frac must lie in [0, 1]")
    if min(mma, softmax, corr, corr_skip, epi, wake) < 0:
        raise ValueError("durations must not be negative")
    params = dict(mma=mma, softmax=softmax, alpha_frac=alpha_frac, corr=corr, corr_skip=corr_skip,
                  epi=epi, wake=wake, pv_wait=pv_wait)
    if two_q_tiles:
        return _two_tiles(n_kv, _rescale_table(rescale, 2, n_kv), params)
    return _one_tile(n_kv, _rescale_table(rescale, 1, n_kv), params)


def _two_tiles(n: int, rescale: list[list[bool]], p: dict[str, Any]) -> Timeline:
    tc, corr = _Role(TENSOR), _Role(CORRECTION)
    soft = [_Role("softmax 0"), _Role("softmax 1")]
    wake = p["wake"]

    def qk(i: int, j: int) -> None:
        tc.add(f"QK{i}({j})", p["mma"], [(f"PV{i}({j - 1})", wake)] if j and p["pv_wait"] else [])

    qk(0, 0)
    qk(1, 0)
    for j in range(n):
        for i in (0, 1):
            tc.add(f"PV{i}({j})", p["mma"], [(f"softmax{i}({j})", 0.0), (f"corr{i}({j})", 0.0)])
            if j + 1 < n:
                qk(i, j + 1)
    timeline = Timeline("two Q tiles", n, p)
    for j in range(n):
        for i in (0, 1):
            soft[i].add(f"softmax{i}({j})", p["softmax"], [(f"QK{i}({j})", wake)],
                        marks={f"α{i}({j})": p["alpha_frac"] * p["softmax"]})
            needs = j > 0 and rescale[i][j]
            corr.add(f"corr{i}({j})", p["corr"] if needs else p["corr_skip"],
                     [(f"α{i}({j})", 0.0)] + ([(f"PV{i}({j - 1})", wake)] if j else []))
            if needs:
                timeline.rescaled.add(f"corr{i}({j})")
    for i in (0, 1):
        corr.add(f"epi{i}", p["epi"], [(f"PV{i}({n - 1})", wake)])
    timeline.events, done = _run([tc, *soft, corr])
    timeline.marks = {k: v for k, v in done.items() if k.startswith("α")}
    return timeline


def _one_tile(n: int, rescale: list[list[bool]], p: dict[str, Any]) -> Timeline:
    tc, soft = _Role(TENSOR), _Role("softmax")
    wake = p["wake"]
    tc.add("QK(0)", p["mma"])
    if n > 1:
        tc.add("QK(1)", p["mma"])
    timeline = Timeline("one Q tile", n, p)
    for j in range(n):
        tc.add(f"PV({j})", p["mma"], [(f"corr({j})", 0.0)])
        if j + 2 < n:
            tc.add(f"QK({j + 2})", p["mma"], [(f"PV({j})", wake)] if p["pv_wait"] else [])
        soft.add(f"softmax({j})", p["softmax"], [(f"QK({j})", wake)],
                 marks={f"α({j})": p["alpha_frac"] * p["softmax"]})
        # the softmax corrects O itself, after P is computed and before it hands P over
        needs = j > 0 and rescale[0][j]
        soft.add(f"corr({j})", p["corr"] if needs else p["corr_skip"],
                 [(f"PV({j - 1})", wake)] if j else [])
        if needs:
            timeline.rescaled.add(f"corr({j})")
    soft.add("epi", p["epi"], [(f"PV({n - 1})", wake)])
    timeline.events, done = _run([tc, soft])
    timeline.marks = {k: v for k, v in done.items() if k.startswith("α")}
    return timeline


class SweepPoint(NamedTuple):
    softmax: float
    one_tile: float    # tensor-core utilization of the one-Q-tile kernel
    two_tiles: float   # ... and of the two-Q-tile kernel


def sweep_softmax(softmax: Sequence[float], n_kv: int = 16,
                  rescale: Sequence[Sequence[bool]] | None = None, **params: Any) -> list[SweepPoint]:
    """The tensor core's utilization of both kernels for each softmax duration; `params` are the
    other durations of `simulate`, `rescale` the two-tile table (the one-tile kernel takes its
    first row)."""
    one = None if rescale is None else list(rescale)[:1]
    return [SweepPoint(s, simulate(n_kv, False, softmax=s, rescale=one, **params).utilization,
                       simulate(n_kv, True, softmax=s, rescale=rescale, **params).utilization)
            for s in softmax]


_TILE_COLORS = {0: ("sky", "blue"), 1: ("orange", "vermillion")}   # (QK, PV) of each Q tile


def _style(e: Event, tl: Timeline) -> tuple[str, str, float, str, str]:
    """(kind, face colour, alpha, hatch, text) of an event's bar."""
    from .plots import PALETTE

    name = e.label.split("(")[0]
    j = e.label[len(name) + 1:-1] if "(" in e.label else ""
    tile = int(name[-1]) if name[-1].isdigit() else 0
    qk, pv = _TILE_COLORS[tile]
    if name.startswith("QK"):
        return f"QK, Q tile {tile}", PALETTE[qk], 1.0, "", j
    if name.startswith("PV"):
        return f"PV, Q tile {tile}", PALETTE[pv], 1.0, "", j
    if name.startswith("softmax"):
        return f"softmax, Q tile {tile}", PALETTE[pv], 0.35, "", j
    if name.startswith("corr"):
        if e.label in tl.rescaled:
            return "correction: rescale O", PALETTE["green"], 1.0, "////", ""
        return "correction: no rescale", PALETTE["green"], 1.0, "", ""
    return "epilogue", PALETTE["purple"], 1.0, "", "epi"


def plot(*timelines: Timeline, title: bool = True) -> Any:
    """Swimlanes of one or more simulated schedules, one panel each on a shared cycle axis:
    every role a lane, every busy interval a bar (MMAs and softmax blocks numbered by KV block),
    the tensor core's idle gaps shaded, α hand-overs ticked, a legend below."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    from .plots import PAGE_WIDTH_IN, PALETTE, SIZES, new_figure

    if not timelines:
        raise ValueError("plot needs at least one timeline")
    heights = [0.45 * len(t.lanes) + 0.55 for t in timelines]
    fig = new_figure(PAGE_WIDTH_IN, sum(heights) + 1.4)
    axes = fig.subplots(len(timelines), 1, sharex=True, squeeze=False,
                        gridspec_kw={"height_ratios": heights})[:, 0]
    span = max(t.makespan for t in timelines)
    legend: dict[str, Any] = {}
    for ax, tl in zip(axes, timelines):
        ax.set_facecolor("white")
        row = {lane: k for k, lane in enumerate(tl.lanes)}
        mmas = tl.mmas
        for a, b in zip(mmas, mmas[1:]):
            if b.start > a.end:
                ax.barh(row[TENSOR], b.start - a.end, left=a.end, height=0.7, color="#dddddd",
                        lw=0, zorder=1)
                legend["tensor core idle"] = Patch(fc="#dddddd", label="tensor core idle")
        for e in tl.events:
            kind, colour, alpha, hatch, text = _style(e, tl)
            ax.barh(row[e.role], e.end - e.start, left=e.start, height=0.7, color=colour, alpha=alpha,
                    hatch=hatch, edgecolor="white", lw=0.8 if e.role == TENSOR or hatch else 0, zorder=2,
                    gid=f"{tl.kernel}:{e.label}")
            legend.setdefault(kind, Patch(fc=colour, alpha=alpha, hatch=hatch, ec="white", label=kind))
            if text:
                dark = colour in (PALETTE["blue"],) and alpha == 1.0
                ax.text((e.start + e.end) / 2, row[e.role], text, ha="center", va="center",
                        fontsize=SIZES["note"], color="white" if dark else "black", zorder=3)
        for label, t in tl.marks.items():
            lane = "softmax" if tl.kernel == "one Q tile" else f"softmax {label[1]}"
            ax.plot([t, t], [row[lane] - 0.35, row[lane] + 0.35], color=PALETTE["black"], lw=1.2, zorder=3)
            legend["α handed over"] = Line2D([], [], color=PALETTE["black"], lw=1.2, label="α handed over")
        ax.set_yticks(range(len(tl.lanes)), list(tl.lanes), fontsize=SIZES["label"])
        ax.set_ylim(len(tl.lanes) - 0.5, -0.5)
        ax.tick_params(axis="y", length=0)
        ax.tick_params(axis="x", labelsize=SIZES["tick"])
        ax.grid(True, axis="x", color="#dddddd", lw=0.6)
        ax.set_axisbelow(True)
        for side in ("top", "right", "left"):
            ax.spines[side].set_visible(False)
        if title:
            rows = 256 if tl.kernel == "two Q tiles" else 128
            ax.set_title(f"{tl.kernel} ({rows} query rows), {tl.n_kv} KV blocks: tensor core busy "
                         f"{tl.utilization:.0%} of its span", fontsize=SIZES["label"], loc="left")
    axes[-1].set_xlim(0, span * 1.01)
    axes[-1].set_xlabel("cycles", fontsize=SIZES["label"])
    order = [k for k in ("QK, Q tile 0", "PV, Q tile 0", "softmax, Q tile 0", "correction: no rescale",
                         "QK, Q tile 1", "PV, Q tile 1", "softmax, Q tile 1", "correction: rescale O",
                         "epilogue", "α handed over", "tensor core idle") if k in legend]
    rows = -(-len(order) // 3)
    fig.legend([legend[k] for k in order], order, loc="lower center", ncol=3, fontsize=SIZES["legend"],
               frameon=False)
    fig.tight_layout(rect=(0, (0.2 * rows + 0.1) / fig.get_figheight(), 1, 1))
    return fig


def plot_sweep(points: Sequence[SweepPoint], n_kv: int | None = None) -> Any:
    """The tensor core's utilization of both kernels against the softmax's cycles per block."""
    from .plots import PAGE_WIDTH_IN, PALETTE, SIZES, new_figure

    fig = new_figure(PAGE_WIDTH_IN, 3.2)
    ax = fig.add_subplot()
    ax.set_facecolor("white")
    xs = [p.softmax for p in points]
    ax.plot(xs, [100 * p.one_tile for p in points], "o-", color=PALETTE["sky"], lw=2, ms=4,
            label="one Q tile, correction in the softmax", gid="sweep-one")
    ax.plot(xs, [100 * p.two_tiles for p in points], "s-", color=PALETTE["vermillion"], lw=2, ms=4,
            label="two Q tiles, correction warpgroup", gid="sweep-two")
    ax.set_xlabel("softmax cycles per KV block" + (f" ({n_kv} KV blocks)" if n_kv else ""),
                  fontsize=SIZES["label"])
    ax.set_ylabel("tensor core busy (%)", fontsize=SIZES["label"])
    ax.set_ylim(0, 100)
    ax.set_xlim(min(xs), max(xs))
    ax.tick_params(labelsize=SIZES["tick"])
    ax.grid(True, color="#dddddd", lw=0.6)
    ax.legend(loc="lower left", fontsize=SIZES["legend"], facecolor="white", framealpha=1.0)
    fig.tight_layout()
    return fig
