"""The book build's time budget: each chapter's recorded execution time, the order the parallel
readers take the pages in, and the schedule that order gives on N cores.

The build (`gpubook.book.sphinxext`) records, in ``chapters/_build_times.json``, the seconds
myst-nb reports for each chapter it executed from scratch: in a build whose kernels were all
compiled afresh (no kernel build cache, or an empty one, or one only written to), since a
chapter that reads its kernels from a warm cache runs in a fraction of a clean build's time. A
chapter served from the execution cache keeps its old time. A build that executed every page
also records what the rest of the build took (``overhead``: Sphinx's start-up, conf.py,
merging the readers' environments, writing the HTML, copying the static files, the search
index) and how long its parallel reading lasted (``reading``).

The parallel readers take the pages one at a time in `reading_order`: pages of no record first
(an unknown time is treated as possibly the longest), largest source first, then the recorded
chapters longest first — the largest-first rule, which on N cores never finishes later than
4/3 of the best split. `schedule` plays that order out: each page goes to the first reader to
fall free. `python -m gpubook build-budget` compares its end, plus the overhead, with the
budget.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from sphinx.util.parallel import ParallelTasks

from ..compile.build import CACHE_ENV, CACHE_MODE_ENV

RECORD = "chapters/_build_times.json"  # relative to the book's source folder
BUDGET_S = 480.0  # a clean build on two cores, in seconds
CORES = 2


@dataclass
class BuildTimes:
    """What ``chapters/_build_times.json`` holds: seconds by page name, and what the last build
    that executed every page measured outside the chapters (None until one did)."""

    chapters: dict[str, int] = field(default_factory=dict)
    overhead: int | None = None  # seconds of the build outside its parallel reading
    reading: int | None = None  # seconds of that build's parallel reading
    jobs: int | None = None  # reading processes of that build

    def dumps(self) -> str:
        """The file's text: sorted keys, whole seconds, so an unchanged record is the same text."""
        data: dict[str, object] = {"chapters": {k: int(v) for k, v in sorted(self.chapters.items())}}
        if self.overhead is not None:
            data["full_build"] = {"jobs": self.jobs, "overhead": self.overhead, "reading": self.reading}
        return json.dumps(data, indent=1, sort_keys=True) + "\n"


def load(path: Path) -> BuildTimes | None:
    """The record at `path`, or None when there is none."""
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    full = data.get("full_build") or {}
    return BuildTimes({str(k): int(v) for k, v in data.get("chapters", {}).items()},
                      full.get("overhead"), full.get("reading"), full.get("jobs"))


def updated(old: BuildTimes | None, executed: Mapping[str, float], pages: Iterable[str],
            full: tuple[float, float, int] | None = None) -> BuildTimes:
    """`old` with the times of the pages executed now (rounded to whole seconds), the pages no
    longer in the book (`pages`) dropped, and `full` = (overhead, reading, jobs) when this build
    executed every page."""
    keep = set(pages)
    times = {k: v for k, v in (old.chapters if old else {}).items() if k in keep}
    times.update({k: int(round(v)) for k, v in executed.items()})
    new = BuildTimes(times)
    if full is not None:
        new.overhead, new.reading, new.jobs = int(round(full[0])), int(round(full[1])), int(full[2])
    elif old is not None:
        new.overhead, new.reading, new.jobs = old.overhead, old.reading, old.jobs
    return new


def write(path: Path, times: BuildTimes) -> bool:
    """Write the record unless the file already says the same; True when it was written."""
    text = times.dumps()
    if path.is_file() and path.read_text() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return True


def source_size(srcdir: Path) -> Callable[[str], int]:
    """Bytes of a page's source file (0 when it has none)."""

    def size(docname: str) -> int:
        for suffix in (".md", ".rst", ".ipynb"):
            f = srcdir / f"{docname}{suffix}"
            if f.is_file():
                return f.stat().st_size
        return 0

    return size


def reading_order(docnames: Iterable[str], times: Mapping[str, float], size: Callable[[str], int]) -> list[str]:
    """Pages of no recorded time first, largest source first; then the rest longest first (ties
    by name)."""
    docnames = list(docnames)
    unknown = sorted((d for d in docnames if d not in times), key=lambda d: (-size(d), d))
    known = sorted((d for d in docnames if d in times), key=lambda d: (-times[d], d))
    return unknown + known


def one_page_per_task(arguments: Any, nproc: int, maxbatch: int = 10) -> list[list[str]]:
    """Sphinx's parallel chunks (`sphinx.builders.make_chunks`), one page each, in the order
    given: Sphinx's own hand each process a run of consecutive names, so the pages that execute
    longest, which sort together, would share one process while the other idles."""
    return [[d] for d in arguments]


class _Oldest(dict):  # type: ignore[type-arg]
    def popitem(self) -> tuple[Any, Any]:
        key = next(iter(self))
        return key, self.pop(key)


class InOrderTasks(ParallelTasks):
    """Sphinx's ParallelTasks, starting its waiting tasks oldest first. Sphinx's own starts the
    newest (`dict.popitem`): past the first N, the pages would run in reverse order, the
    smallest first and the third largest last."""

    def __init__(self, nproc: int) -> None:
        super().__init__(nproc)
        self._precvs_waiting = _Oldest()


def kernels_afresh(environ: Mapping[str, str]) -> bool:
    """Whether a build compiles every kernel: no kernel build cache, one only written to, or one
    empty when the build begins (a warm cache would shorten a chapter's time)."""
    folder, mode = environ.get(CACHE_ENV), environ.get(CACHE_MODE_ENV, "")
    return not folder or mode == "write" or not any(Path(folder).glob("*.pickle"))


def process_start() -> float:
    """When this process started (Sphinx's start-up and conf.py count in a build's overhead);
    now, where psutil is missing."""
    try:
        import psutil

        return float(psutil.Process().create_time())
    except Exception:  # noqa: BLE001 - the overhead then starts when the builder does
        return time.time()


def succeeded(reports: Mapping[str, Mapping[str, Any] | None]) -> dict[str, float]:
    """Seconds by page of myst-nb's execution reports (``exec_data``) that succeeded and carry
    a time."""
    return {d: float(x["runtime"]) for d, x in reports.items()
            if x and x.get("succeeded") and x.get("runtime") is not None}


def made_since(records: Iterable[tuple[str, datetime]], since: datetime) -> set[str]:
    """The notebooks (URIs) whose newest execution-cache record (URI, created: UTC without a
    zone, as jupyter-cache keeps it) was made at or after `since`."""
    newest: dict[str, datetime] = {}
    for uri, created in records:
        newest[uri] = max(newest.get(uri, created), created)
    return {uri for uri, created in newest.items() if created >= since}


@dataclass
class Schedule:
    """Each core's pages as (name, start, end) in seconds, in the order they ran."""

    cores: list[list[tuple[str, float, float]]]

    @property
    def makespan(self) -> float:
        return max((c[-1][2] for c in self.cores if c), default=0.0)

    def last(self) -> list[str]:
        """The pages of the core that finishes last."""
        core = max(self.cores, key=lambda c: c[-1][2] if c else 0.0)
        return [name for name, _, _ in core]


def schedule(times: Mapping[str, float], cores: int = CORES) -> Schedule:
    """The pages of `times` taken longest first, each by the first of `cores` readers to fall
    free (the lowest-numbered on a tie), as the build's readers take them."""
    if cores < 1:
        raise ValueError(f"cores must be at least 1, not {cores}")
    lanes: list[list[tuple[str, float, float]]] = [[] for _ in range(cores)]
    free = [0.0] * cores
    for name in reading_order(times, times, lambda d: 0):
        i = min(range(cores), key=lambda j: (free[j], j))
        lanes[i].append((name, free[i], free[i] + times[name]))
        free[i] += times[name]
    return Schedule(lanes)


@dataclass
class Verdict:
    fits: bool | None  # None: a chapter has no recorded time and the rest fit
    lines: list[str]


def judge(times: Mapping[str, float], expected: Iterable[str], cores: int = CORES, budget: float = BUDGET_S,
          overhead: float | None = None) -> Verdict:
    """Whether the recorded chapters, read largest first on `cores` cores, plus `overhead`, fit
    `budget`; the lines say why, naming what breaks it. `expected`: the chapters the book has
    (one with no time is named; the verdict is then open unless the rest already break it)."""
    missing = sorted(set(expected) - set(times))
    known = {k: float(v) for k, v in times.items()}
    plan = schedule(known, cores)
    extra = 0.0 if overhead is None else float(overhead)
    total = plan.makespan + extra
    said = "not recorded, 0 s counted" if overhead is None else f"{extra:.0f} s"
    lines = [f"build budget: {len(known)} chapters on {cores} cores, budget {budget:.0f} s, "
             f"overhead outside the chapters {said}"]
    for i, lane in enumerate(plan.cores, 1):
        runs = ", ".join(f"{_short(n)} {end - start:.0f}" for n, start, end in lane)
        lines.append(f"  core {i} ({lane[-1][2] if lane else 0:.0f} s): {runs or '-'}")
    lines.append(f"makespan {plan.makespan:.0f} s + overhead {extra:.0f} s = {total:.0f} s "
                 f"{'<=' if total <= budget else '>'} {budget:.0f} s")
    for name in missing:
        lines.append(f"  no record: {_short(name)} (not counted)")
    if total <= budget:
        if missing:
            lines.append("verdict: open: the recorded chapters fit, but not every chapter has a time")
            return Verdict(None, lines)
        lines.append(f"verdict: fits, {budget - total:.0f} s to spare")
        return Verdict(True, lines)
    room = budget - extra
    lines.append(f"verdict: over the budget by {total - budget:.0f} s")
    for name, t in sorted(known.items(), key=lambda kv: (-kv[1], kv[0])):
        if t > room:
            lines.append(f"  {_short(name)} ({t:.0f} s) alone is longer than the {max(room, 0):.0f} s "
                         "the budget leaves for chapters")
    need = sum(known.values()) / cores
    if need > room:
        lines.append(f"  even an even split is {need:.0f} s per core: the chapters must lose "
                     f"{sum(known.values()) - cores * room:.0f} s in all")
    lines.append("  the last core to finish runs: " + ", ".join(_short(n) for n in plan.last()))
    return Verdict(False, lines)


def _short(docname: str) -> str:
    return docname.rpartition("/")[2]


def main(record: Path, chapters: Path, cores: int = CORES, budget: float = BUDGET_S,
         overhead: float | None = None, report: bool = False) -> int:
    """`python -m gpubook build-budget`: print the schedule and the verdict. Exit 1 when over the
    budget, 2 when no record exists or a chapter has none (and the rest fit), 0 when it fits;
    `report`: always 0. `overhead` None takes the record's, measured by the last build that
    executed every page."""
    times = load(record)
    if times is None:
        print(f"build budget: no record ({record} is written by a book build that executes chapters)")
        return 0 if report else 2
    expected = [f"{chapters.name}/{p.stem}" for p in sorted(chapters.glob("[0-9A-Z]*.md"))]
    verdict = judge(times.chapters, expected, cores, budget, times.overhead if overhead is None else overhead)
    if overhead is None and times.overhead is not None:
        verdict.lines.insert(1, f"  (overhead and reading as measured by the last build that executed every "
                                f"page with {times.jobs} processes: {times.overhead} s outside reading, "
                                f"{times.reading} s reading)")
    print("\n".join(verdict.lines))
    if report:
        return 0
    return {True: 0, False: 1, None: 2}[verdict.fits]
