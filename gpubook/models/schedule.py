"""Tile schedules on the CPU: which worker (SM) runs which tile, and when, under a scheduler.

The same model drives the chapter's simulations, its interactive demo (a JavaScript copy,
tested against this one) and the reading of traces that kernels record on a GPU. Times are
in units of tile cost; `available[w]` is when worker w can start (an SM still busy with other
work starts late). Ties go to the lower worker index, as the demo does.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any, Sequence

POLICIES = ("static", "dynamic", "clc")


@dataclass(frozen=True)
class Slot:
    """One tile run: which tile, on which worker, from when to when."""

    tile: int
    worker: int
    start: float
    end: float


def _available(workers: int, available: Sequence[float] | None) -> list[float]:
    avail = list(available) if available is not None else [0.0] * workers
    if len(avail) != workers:
        raise ValueError(f"{len(avail)} availability times for {workers} workers")
    return avail


def static(costs: Sequence[float], workers: int,
           available: Sequence[float] | None = None) -> list[Slot]:
    """Persistent, static: worker w runs tiles w, w + workers, w + 2 workers, ... back to back."""
    avail = _available(workers, available)
    slots = []
    for w in range(min(workers, len(costs))):
        t = avail[w]
        for tile in range(w, len(costs), workers):
            slots.append(Slot(tile, w, t, t + costs[tile]))
            t += costs[tile]
    return slots


def _greedy(costs: Sequence[float], queue: list[int], ready: list[tuple[float, int]]) -> list[Slot]:
    """Hand the queue out in order, each tile to the worker that is free first."""
    heapq.heapify(ready)
    slots = []
    for tile in queue:
        t, w = heapq.heappop(ready)
        slots.append(Slot(tile, w, t, t + costs[tile]))
        heapq.heappush(ready, (t + costs[tile], w))
    return slots


def dynamic(costs: Sequence[float], workers: int, available: Sequence[float] | None = None,
            order: Sequence[int] | None = None) -> list[Slot]:
    """Persistent, dynamic: worker w starts with order[w]; then a shared counter hands out the rest."""
    avail = _available(workers, available)
    order = list(order) if order is not None else list(range(len(costs)))
    first = min(workers, len(order))
    slots = [Slot(order[w], w, avail[w], avail[w] + costs[order[w]]) for w in range(first)]
    ready = [(s.end, s.worker) for s in slots]
    return slots + _greedy(costs, order[first:], ready)


def clc(costs: Sequence[float], workers: int, available: Sequence[float] | None = None,
        order: Sequence[int] | None = None) -> list[Slot]:
    """Cluster launch control: one CTA per tile; a free SM gets (or a running CTA steals) the next."""
    avail = _available(workers, available)
    order = list(order) if order is not None else list(range(len(costs)))
    return _greedy(costs, order, [(avail[w], w) for w in range(workers)])


def simulate(policy: str, costs: Sequence[float], workers: int,
             available: Sequence[float] | None = None,
             order: Sequence[int] | None = None) -> list[Slot]:
    """The schedule of `policy` ('static', 'dynamic' or 'clc'); `order` is ignored by 'static'."""
    if policy == "static":
        return static(costs, workers, available)
    if policy == "dynamic":
        return dynamic(costs, workers, available, order)
    if policy == "clc":
        return clc(costs, workers, available, order)
    raise ValueError(f"unknown policy {policy!r}; known: {', '.join(POLICIES)}")


def makespan(slots: Sequence[Slot]) -> float:
    """When the last tile ends (the schedule's start is time 0)."""
    return max((s.end for s in slots), default=0.0)


def tail(slots: Sequence[Slot]) -> float:
    """From the moment the first worker runs out of tiles to the moment the last one does."""
    last = {}
    for s in slots:
        last[s.worker] = max(last.get(s.worker, 0.0), s.end)
    return max(last.values()) - min(last.values()) if last else 0.0


def utilization(slots: Sequence[Slot], workers: int) -> float:
    """Busy time over workers x makespan."""
    span = makespan(slots)
    return sum(s.end - s.start for s in slots) / (workers * span) if span else 0.0


def check_exactly_once(slots: Sequence[Slot], tiles: int) -> None:
    """Raise unless every tile 0..tiles-1 appears exactly once."""
    seen = sorted(s.tile for s in slots)
    if seen != list(range(tiles)):
        missing = sorted(set(range(tiles)) - set(seen))
        extra = sorted(t for i, t in enumerate(seen) if i and seen[i - 1] == t)
        raise AssertionError(f"tiles not run exactly once: missing {missing[:8]}, repeated {extra[:8]}")


def from_trace(trace: Any, rows: Sequence[int] | None = None) -> tuple[list[Slot], dict[int, int]]:
    """Slots (times in µs from the first start) from a kernel's (tiles, 4) trace of
    (cta, smid, start ns, end ns); workers are renumbered 0.. in order of SM id.

    Returns the slots and the map from SM id to worker row.
    """
    t = trace.to("cpu").tolist()
    rows = list(range(len(t))) if rows is None else list(rows)
    t0 = min(t[i][2] for i in rows)
    sms = sorted({t[i][1] for i in rows})
    row_of = {sm: k for k, sm in enumerate(sms)}
    slots = [Slot(i, row_of[t[i][1]], (t[i][2] - t0) / 1e3, (t[i][3] - t0) / 1e3) for i in rows]
    return slots, row_of


def draw(ax: Any, slots: Sequence[Slot], costs: Sequence[float], title: str, unit: str,
         workers: int | None = None, cmap: str = "viridis") -> None:
    """A timeline on a matplotlib axis: one row per worker, one bar per tile, coloured by cost."""
    import matplotlib

    colours = matplotlib.colormaps[cmap]
    lo, hi = min(costs), max(costs)
    rows = workers if workers is not None else 1 + max(s.worker for s in slots)
    for s in slots:
        c = colours(0.15 + 0.7 * ((costs[s.tile] - lo) / (hi - lo) if hi > lo else 0.5))
        ax.barh(s.worker, s.end - s.start, left=s.start, height=0.9, color=c, linewidth=0)
    span = makespan(slots)
    ax.axvline(span, color="#b3261e", linewidth=1.2)
    last = {}
    for s in slots:
        last[s.worker] = max(last.get(s.worker, 0.0), s.end)
    first_idle = min(last.values())
    ax.axvspan(first_idle, span, color="#b3261e", alpha=0.10, linewidth=0)
    ax.set_xlim(0, span * 1.02)
    ax.set_ylim(rows - 0.5, -0.5)
    ax.set_title(title, fontsize=10, loc="left")
    ax.set_xlabel(unit)
    ax.set_facecolor("white")
