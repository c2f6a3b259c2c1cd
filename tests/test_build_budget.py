"""The build's time budget (gpubook.book.budget): the record of each chapter's execution time,
the order the parallel readers take the pages in, the schedule that order gives on N cores,
`python -m gpubook build-budget`, and the Sphinx hook that writes the record (a tiny project of
three notebook pages, built with two readers)."""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from gpubook.__main__ import main as cli
from gpubook.book import budget
from gpubook.facts.paths import CHAPTERS

ROOT = Path(__file__).resolve().parents[1]


# -- the schedule -------------------------------------------------------------------------------
def test_the_longest_chapters_go_first_each_to_the_first_core_to_fall_free():
    plan = budget.schedule({"a": 200, "b": 150, "c": 100, "d": 90}, cores=2)
    assert plan.cores == [[("a", 0, 200), ("d", 200, 290)], [("b", 0, 150), ("c", 150, 250)]]
    assert plan.makespan == 290
    assert plan.last() == ["a", "d"]


def best_makespan(times: list[float], cores: int) -> float:
    return min(max(sum(t for t, c in zip(times, cs) if c == k) for k in range(cores))
               for cs in itertools.product(range(cores), repeat=len(times)))


@pytest.mark.parametrize("cores", [2, 3])
def test_the_schedule_is_within_grahams_bound_of_the_best(cores):
    rng = random.Random(cores)
    for _ in range(40):
        times = [rng.randint(1, 600) for _ in range(rng.randint(1, 7))]
        plan = budget.schedule({f"c{i}": t for i, t in enumerate(times)}, cores)
        assert sorted(n for lane in plan.cores for n, _, _ in lane) == sorted(f"c{i}" for i in range(len(times)))
        for lane in plan.cores:  # back to back on each core
            assert all(a[2] == b[1] for a, b in zip(lane, lane[1:]))
        assert plan.makespan <= (4 / 3 - 1 / (3 * cores)) * best_makespan(times, cores) + 1e-9


def test_a_schedule_that_fits():
    v = budget.judge({"ch/a": 200, "ch/b": 150, "ch/c": 100, "ch/d": 90}, ["ch/a", "ch/b", "ch/c", "ch/d"],
                     cores=2, budget=480, overhead=60)
    assert v.fits is True
    assert "makespan 290 s + overhead 60 s = 350 s <= 480 s" in v.lines
    assert v.lines[-1] == "verdict: fits, 130 s to spare"


def test_a_schedule_that_does_not_fit_names_the_last_core():
    v = budget.judge({"ch/a": 300, "ch/b": 300, "ch/c": 200}, ["ch/a", "ch/b", "ch/c"], cores=2, budget=480,
                     overhead=0)
    assert v.fits is False
    text = "\n".join(v.lines)
    assert "verdict: over the budget by 20 s" in text
    assert "the last core to finish runs: a, c" in text
    assert "alone" not in text and "even split" not in text  # 300 s fits alone, 400 s per core too


def test_a_single_chapter_over_what_the_budget_leaves_breaks_it_alone():
    v = budget.judge({"ch/big": 450, "ch/small": 10}, ["ch/big", "ch/small"], cores=2, budget=480, overhead=60)
    assert v.fits is False
    assert "  big (450 s) alone is longer than the 420 s the budget leaves for chapters" in v.lines


def test_too_much_work_for_any_split_says_how_much_must_go():
    v = budget.judge({f"ch/{i}": 200 for i in range(6)}, [], cores=2, budget=480, overhead=80)
    assert "  even an even split is 600 s per core: the chapters must lose 400 s in all" in v.lines


def test_a_chapter_without_a_record_leaves_the_verdict_open():
    v = budget.judge({"ch/a": 100}, ["ch/a", "ch/new"], cores=2, budget=480, overhead=0)
    assert v.fits is None
    assert "  no record: new (not counted)" in v.lines
    over = budget.judge({"ch/a": 500}, ["ch/a", "ch/new"], cores=2, budget=480, overhead=0)
    assert over.fits is False  # more chapters would not help


def test_no_overhead_recorded_is_said():
    v = budget.judge({"ch/a": 100}, ["ch/a"], overhead=None)
    assert "overhead outside the chapters not recorded, 0 s counted" in v.lines[0]


# -- the reading order --------------------------------------------------------------------------
def test_pages_of_no_record_come_first_by_size_then_the_recorded_longest_first():
    sizes = {"index": 10, "new-big": 900, "new-small": 50, "a": 1, "b": 99999, "c": 5}
    order = budget.reading_order(["a", "b", "c", "index", "new-big", "new-small"],
                                 {"a": 300, "b": 20, "c": 300}, sizes.__getitem__)
    assert order == ["new-big", "new-small", "index", "a", "c", "b"]


def test_with_no_record_the_order_is_by_source_size(tmp_path):
    (tmp_path / "ch").mkdir()
    (tmp_path / "ch" / "x.md").write_text("x" * 10)
    (tmp_path / "ch" / "y.md").write_text("y" * 30)
    (tmp_path / "z.ipynb").write_text("z" * 20)
    assert budget.reading_order(["ch/x", "ch/y", "z", "gone"], {}, budget.source_size(tmp_path)) == \
        ["ch/y", "z", "ch/x", "gone"]


def test_pages_are_handed_out_one_at_a_time_in_order():
    assert budget.one_page_per_task(["c", "a", "b"], 2) == [["c"], ["a"], ["b"]]


def _started(name: str, log: str) -> None:
    with open(log, "a") as f:
        f.write(name + "\n")
    time.sleep(0.05)


def test_the_readers_start_their_tasks_in_the_order_given(tmp_path):
    log = tmp_path / "started"
    tasks = budget.InOrderTasks(1)
    names = ["p5", "p4", "p3", "p2", "p1"]
    for name in names:
        tasks.add_task(lambda n: _started(n, str(log)), name)
    tasks.join()
    assert log.read_text().split() == names


# -- the record ---------------------------------------------------------------------------------
def test_the_record_keeps_cached_chapters_and_drops_removed_ones(tmp_path):
    old = budget.BuildTimes({"ch/a": 100, "ch/b": 200, "ch/gone": 50}, overhead=40, reading=300, jobs=2)
    new = budget.updated(old, {"ch/b": 212.6, "ch/c": 9.4}, ["ch/a", "ch/b", "ch/c"])
    assert new.chapters == {"ch/a": 100, "ch/b": 213, "ch/c": 9}
    assert (new.overhead, new.reading, new.jobs) == (40, 300, 2)  # not a full build: kept
    full = budget.updated(new, {"ch/a": 90.2}, ["ch/a", "ch/b", "ch/c"], full=(31.4, 250.6, 2))
    assert (full.overhead, full.reading, full.jobs) == (31, 251, 2)


def test_an_unchanged_record_is_not_written_again(tmp_path):
    path = tmp_path / "times.json"
    times = budget.BuildTimes({"ch/b": 2, "ch/a": 1}, overhead=3, reading=4, jobs=2)
    assert budget.write(path, times)
    text = path.read_text()
    assert list(json.loads(text)["chapters"]) == ["ch/a", "ch/b"]
    assert not budget.write(path, budget.updated(budget.load(path), {"ch/a": 1.3}, ["ch/a", "ch/b"]))
    assert path.read_text() == text
    assert budget.load(tmp_path / "none.json") is None


def test_only_a_build_that_compiles_every_kernel_is_timed(tmp_path):
    env = {"GPUBOOK_KERNEL_CACHE": str(tmp_path), "GPUBOOK_KERNEL_CACHE_MODE": "update"}
    assert budget.kernels_afresh({})
    assert budget.kernels_afresh(env)  # empty
    (tmp_path / "k.pickle").write_bytes(b"")
    assert not budget.kernels_afresh(env)
    assert not budget.kernels_afresh(dict(env, GPUBOOK_KERNEL_CACHE_MODE="read"))
    assert budget.kernels_afresh(dict(env, GPUBOOK_KERNEL_CACHE_MODE="write"))


def test_what_counts_as_executed_now():
    reports = {"a": {"succeeded": True, "runtime": 3.5}, "b": {"succeeded": False, "runtime": 2.0},
               "c": {"succeeded": True, "runtime": None}, "d": None}
    assert budget.succeeded(reports) == {"a": 3.5}
    start = datetime(2026, 1, 1, 12)
    records = [("x", start - timedelta(hours=1)), ("x", start + timedelta(seconds=5)),
               ("y", start - timedelta(seconds=1)), ("z", start)]
    assert budget.made_since(records, start) == {"x", "z"}


# -- the command --------------------------------------------------------------------------------
def write_record(path: Path, seconds: dict[str, int], overhead: int | None = None) -> None:
    budget.write(path, budget.BuildTimes(seconds, overhead, None if overhead is None else 600, 2))


def test_the_command_exits_by_the_verdict_and_report_mode_always_passes(tmp_path, capsys):
    chapters = tmp_path / "chapters"
    chapters.mkdir()
    for name in ("01-a", "02-b", "A-c"):
        (chapters / f"{name}.md").write_text("")
    (chapters / "_demos.md").write_text("")  # not a chapter
    record = tmp_path / "times.json"
    write_record(record, {"chapters/01-a": 200, "chapters/02-b": 150, "chapters/A-c": 100}, overhead=60)
    assert budget.main(record, chapters) == 0
    out = capsys.readouterr().out
    assert "verdict: fits" in out and "60 s outside reading, 600 s reading" in out
    assert budget.main(record, chapters, budget=200) == 1
    assert budget.main(record, chapters, budget=200, report=True) == 0
    assert "verdict: over the budget by 110 s" in capsys.readouterr().out
    assert budget.main(record, chapters, cores=1, overhead=0) == 0  # 450 s on one core
    write_record(record, {"chapters/01-a": 200, "chapters/02-b": 150})
    assert budget.main(record, chapters) == 2
    assert "no record: A-c" in capsys.readouterr().out
    assert budget.main(tmp_path / "absent.json", chapters) == 2
    assert budget.main(tmp_path / "absent.json", chapters, report=True) == 0
    assert "build budget: no record" in capsys.readouterr().out


def test_python_m_gpubook_build_budget(tmp_path, capsys):
    record = tmp_path / "times.json"
    write_record(record, {f"chapters/{p.stem}": 10 for p in CHAPTERS.glob("[0-9A-Z]*.md")}, overhead=20)
    assert cli(["build-budget", "--record", str(record)]) == 0
    assert cli(["build-budget", "--record", str(record), "--budget", "50"]) == 1
    assert cli(["build-budget", "--record", str(record), "--budget", "50", "--report"]) == 0
    assert cli(["build-budget", "--record", str(record), "--cores", "1", "--overhead", "0",
                "--budget", "1000"]) == 0
    assert "verdict: over the budget" in capsys.readouterr().out


# -- the Sphinx hook, on a tiny project -----------------------------------------------------------
PAGE = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  name: python3
  display_name: Python 3
---
# Page {name}

```{{code-cell}} ipython3
import time
with open({log!r}, "a") as f:
    f.write("{name} %f\\n" % time.time())
time.sleep({sleep})
```
"""
CONF = """extensions = ["myst_nb", "gpubook.book.sphinxext"]
nb_execution_mode = "cache"
nb_execution_cache_path = {cache!r}
gpubook_build_times = "times.json"
exclude_patterns = ["_build"]
nb_kernel_rgx_aliases = {{".*": "python3"}}
"""


def sphinx(src: Path, *flags: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUBOOK_KERNEL_CACHE")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-j", "2", *flags, "-b", "html", str(src),
                           str(src / "_build")], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


def test_the_build_records_what_it_executed_and_reads_longest_first(tmp_path):
    src, log = tmp_path / "src", tmp_path / "started"
    src.mkdir()
    (src / "conf.py").write_text(CONF.format(cache=str(tmp_path / "cache")))
    (src / "index.md").write_text("# Tiny\n\n```{toctree}\np1\np2\np3\n```\n")
    for name in ("p1", "p2", "p3"):
        (src / f"{name}.md").write_text(PAGE.format(name=name, log=str(log), sleep=0))
    record = src / "times.json"
    # made-up times: p1 longest, p2 shortest; p2 must start after p3 (Sphinx alone starts it first)
    write_record(record, {"p1": 30, "p2": 10, "p3": 20})
    sphinx(src)
    started = dict(line.split() for line in log.read_text().splitlines())
    assert float(started["p3"]) < float(started["p2"])
    measured = budget.load(record)
    assert set(measured.chapters) == {"p1", "p2", "p3"} and max(measured.chapters.values()) < 10
    assert measured.overhead is not None and measured.jobs == 2  # every page executed: a full build
    text = record.read_text()
    # every page read again, each served from the execution cache: nothing to record
    out = sphinx(src, "-E")
    assert "Using cached notebook" in out and record.read_text() == text
    # a cached page keeps its time; the one edited runs again and gets its own
    write_record(record, {"p1": 30, "p2": 10, "p3": 20}, overhead=5)
    (src / "p2.md").write_text(PAGE.format(name="p2", log=str(log), sleep=0.5))
    sphinx(src)
    again = budget.load(record)
    assert again.chapters["p1"] == 30 and again.chapters["p3"] == 20 and again.chapters["p2"] < 10
    assert again.overhead == 5  # not a full build


def test_a_preview_of_some_pages_leaves_the_record_alone(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(CONF.format(cache=str(tmp_path / "cache")) + "gpubook_preview = True\n")
    (src / "index.md").write_text("# Tiny\n\n```{toctree}\np1\n```\n")
    (src / "p1.md").write_text(PAGE.format(name="p1", log=str(tmp_path / "started"), sleep=0))
    record = src / "times.json"
    write_record(record, {"p1": 30, "p2": 10})
    text = record.read_text()
    out = sphinx(src)
    assert (tmp_path / "started").exists() and "not recorded (a preview" in out
    assert record.read_text() == text


def _book_conf(**env: str) -> dict:
    """conf.py's exclude_patterns and preview flag, read in a process of their own (conf.py sets
    environment variables) that executes nothing (GPUBOOK_EXECUTION=force: no cache is touched)."""
    code = ("import json, runpy; c = runpy.run_path('conf.py'); "
            "print(json.dumps([c['exclude_patterns'], c.get('gpubook_preview')]))")
    base = {k: v for k, v in os.environ.items() if not k.startswith("GPUBOOK_")}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env=base | {"GPUBOOK_EXECUTION": "force"} | env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    patterns, preview = json.loads(proc.stdout.splitlines()[-1])
    return {"left_out": {p for p in patterns if p.startswith("chapters/") and p.endswith(".md")},
            "preview": preview}


def test_the_book_previews_the_pages_named_and_leaves_the_other_chapters_out():
    chapters = sorted(p.stem for p in (ROOT / "chapters").glob("*.md"))
    keep = ["11H-flash-attention-hopper", "02-roofline"]
    conf = _book_conf(GPUBOOK_PAGES=",".join(f"chapters/{c}" for c in keep))
    assert conf["left_out"] == {f"chapters/{c}.md" for c in chapters if c not in keep}
    assert conf["preview"] is True
    assert _book_conf() == {"left_out": set(), "preview": None}
