"""The manifest of the book's kernels (gpubook.verify.manifest): each build recorded per chapter,
merged into results/manifest/kernels.json, joined to the results in the verification matrix,
and compared with what the chapters of this session's book build really built."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

import gpubook
from gpubook import matrix
from gpubook.compile import build, hooks
from gpubook.run import record
from gpubook.verify import manifest

RUN = {"gpu": "NVIDIA H200", "arch": "sm_90a", "date": "2026-12-01", "torch": "2.11.0",
       "sanitizer": ["memcheck", "racecheck"]}
SIM = {"gpu": "CPU", "arch": "sm_100a", "date": "2026-12-02", "simulator": "tirx-harness 0.1",
       "tools": ["numbers", "synccheck", "racecheck"]}
HOPPER_WHY = "ptxas: Instruction 'wgmma.fence' not supported on .target 'sm_100a'"
BLACKWELL_WHY = "Blackwell-only PTX: tcgen05 (sm_100a)"


def kernel(name, fp, runs_on=("sm_100a", "sm_90a"), not_built=None):
    return SimpleNamespace(name=name, arch=runs_on[0], runs_on=tuple(runs_on), not_built=not_built or {},
                           fingerprint=fp)


@pytest.fixture
def chapter():
    before = record.current_chapter()
    yield record.set_chapter
    record.set_chapter(before)


def test_every_build_is_recorded_once_gpubook_is_imported():
    assert manifest.record in hooks._listeners and gpubook.build is build.build


def test_a_build_is_recorded_under_its_chapter_and_an_execution_starts_afresh(tmp_path, monkeypatch, chapter):
    monkeypatch.setenv(manifest.MANIFEST_ENV, str(tmp_path))
    (tmp_path / "01-a.jsonl").write_text('{"name": "stale"}\n')  # what an earlier execution left
    chapter("01-a")
    hooks.built(kernel("vadd", "f1"))
    hooks.built(kernel("vadd", "f1"))                       # built again: listed once
    hooks.built(kernel("vadd", "f2", ("sm_100a", "sm_90a", "sm_120a")))  # the local GPU's arch is not the book's
    chapter("06-b")
    hooks.built(kernel("tile_wgmma", "f3", ("sm_90a",), {"sm_100a": HOPPER_WHY}))
    got = manifest.recorded(tmp_path)
    assert list(got) == ["01-a", "06-b"]
    assert [(k["name"], k["fingerprint"], k["runs_on"]) for k in got["01-a"]] == [
        ("vadd", "f1", ["sm_100a", "sm_90a"]), ("vadd", "f2", ["sm_100a", "sm_90a"])]
    assert got["06-b"] == [{"name": "tile_wgmma", "arch": "sm_90a", "runs_on": ["sm_90a"],
                            "not_built": {"sm_100a": HOPPER_WHY}, "fingerprint": "f3"}]


def test_nothing_is_recorded_without_the_switch(tmp_path, monkeypatch, chapter):
    monkeypatch.delenv(manifest.MANIFEST_ENV, raising=False)
    chapter("01-a")
    hooks.built(kernel("vadd", "f1"))
    assert not list(tmp_path.iterdir())


def test_merge_replaces_the_chapters_executed_and_keeps_the_others(tmp_path):
    path = tmp_path / "kernels.json"
    old = {"format": 1, "chapters": {"01-execution-model": [{"name": "old", "fingerprint": "x"}],
                                     "03-meet-tirx": [{"name": "gemm_mma", "fingerprint": "y"}],
                                     "05-tma-mbarriers": [{"name": "gone", "fingerprint": "z"}]}}
    path.write_text(json.dumps(old))
    rec = tmp_path / "rec"
    rec.mkdir()
    entry = {"name": "ref_ids", "arch": "sm_100a", "runs_on": ["sm_100a"], "not_built": {}, "fingerprint": "r"}
    (rec / "C-tirx-reference.jsonl").write_text(json.dumps(entry) + "\n")
    (rec / "01-execution-model.jsonl").write_text(json.dumps(dict(entry, name="vadd")) + "\n")
    (rec / "unknown.jsonl").write_text(json.dumps(entry) + "\n")   # no chapter of the book
    data = manifest.merge(rec, executed=["05-tma-mbarriers"], path=path)  # 05 ran and built nothing
    assert list(data["chapters"]) == ["01-execution-model", "03-meet-tirx", "C-tirx-reference"]
    assert data["chapters"]["01-execution-model"][0]["name"] == "vadd"
    assert json.loads(path.read_text()) == data and manifest.load(path) == data["chapters"]
    assert path.read_text().count("\n") == 1 + 3 * 3 + 1  # one kernel a line


def test_book_order_puts_chapters_before_appendices():
    assert manifest.book_order(["A-x", "10H-b", "11B-c", "02-a", "10-d", "D-e"]) == [
        "02-a", "10-d", "10H-b", "11B-c", "A-x", "D-e"]


BUILT = {
    "01-execution-model": [
        {"name": "vadd", "arch": "sm_100a", "runs_on": ["sm_100a", "sm_90a"], "not_built": {}, "fingerprint": "small"},
        {"name": "vadd", "arch": "sm_100a", "runs_on": ["sm_100a", "sm_90a"], "not_built": {}, "fingerprint": "large"},
        {"name": "inspect_only", "arch": "sm_100a", "runs_on": ["sm_100a", "sm_90a"], "not_built": {}, "fingerprint": "i"}],
    "08-gemm-basics": [
        {"name": "gemm_v1", "arch": "sm_100a", "runs_on": ["sm_100a"], "not_built": {"sm_90a": BLACKWELL_WHY},
         "fingerprint": "g1"},
        {"name": "fa4", "arch": "sm_100a", "runs_on": ["sm_100a"], "not_built": {"sm_90a": BLACKWELL_WHY},
         "fingerprint": "f4"}],
    "10H-gemm-hopper": [
        {"name": "gemm_h1", "arch": "sm_90a", "runs_on": ["sm_90a"], "not_built": {"sm_100a": HOPPER_WHY},
         "fingerprint": "h1"}],
}


def case(chapter, name, kind, fp, **kw):
    base = {"case": f"{chapter}--{name}--{kind}", "chapter": chapter, "name": name, "kind": kind,
            "fingerprint": fp, "runs_on": ["sm_100a", "sm_90a"]}
    if kind == "check":
        base.update(status="passed", max_abs_error=0.0, sanitizer={"memcheck": "clean", "racecheck": "clean"})
    else:
        base.update(status="measured", ms=0.25, bandwidth=4e12, percent_of_peak=83.0)
    return dict(base, **kw)


def joined():
    runs = [{"run": RUN, "cases": [
        case("01-execution-model", "vadd", "check", "small"),
        case("01-execution-model", "vadd_4gb", "perf", "large"),           # timed under a case name of its own
        case("01-execution-model", "vadd", "check", "before"),             # an earlier script of vadd
        case("10H-gemm-hopper", "gemm_h1", "check", "h1", runs_on=["sm_90a"]),
    ]}]
    sims = [{"run": SIM, "cases": [dict(case("08-gemm-basics", "gemm_v1", "check", "g1"), status="simulated",
                                        tools={"synccheck": {"verdict": "clean"}, "racecheck": {"verdict": "clean"}})]}]
    return matrix.kernel_rows_from(BUILT, runs, sims), runs, sims


def test_records_join_the_build_whose_script_they_name():
    rows, _, _ = joined()
    by = {(r["build"]["fingerprint"], r["name"]): r for r in rows}
    assert len(rows) == 6 and [r["chapter"] for r in rows][:3] == ["01-execution-model"] * 3
    assert matrix.tier(by["small", "vadd"]) == "passed on H200 (sm_90)"
    assert by["small", "vadd"]["check"]["fingerprint"] == "small"          # not the earlier script's record
    assert matrix.tier(by["large", "vadd_4gb"]).startswith("timed on H200 (sm_90)")
    assert matrix.tier(by["i", "inspect_only"]) == "compiled for sm_100a and sm_90a — never run"
    assert matrix.tier(by["g1", "gemm_v1"]) == "simulated for sm_100a (NumSim) — never run on a GPU"
    assert matrix.tier(by["f4", "fa4"]) == "compiled for sm_100a — never run"
    assert matrix.tier(by["h1", "gemm_h1"]) == "passed on H200 (sm_90)"


def test_the_counts_cover_every_built_kernel():
    rows, _, _ = joined()
    n = matrix.counts(rows)
    assert n == {"kernels": 6, "failed": 0, "matched": 2, "as expected": 0, "timed": 1, "not judged": 0,
                 "never run": 3, "simulated": 1}
    listed = matrix.never_run_list(rows)
    assert [ln.split(": ", 1)[1] for ln in listed.splitlines()] == [
        "`inspect_only` (compiled for sm_100a and sm_90a — never run)",
        "`gemm_v1` (simulated for sm_100a (NumSim) — never run on a GPU)",
        "`fa4` (compiled for sm_100a — never run)"]


def test_each_kernel_shows_its_archs_and_every_tier(tmp_path):
    rows, _, _ = joined()
    text = matrix.chapter_tables(rows, tmp_path)
    lines = {ln.split(" | ")[0]: ln for ln in text.splitlines() if ln.startswith("| `")}
    assert "| `vadd` (script `small`) | sm_100a and sm_90a | **passed on H200 (sm_90)** · Hopper GPU: passed on H200, " \
           "2026-12-01, max error 0 (exact), memcheck and racecheck clean · Blackwell GPU: never run · CPU simulation: none |" \
           in lines["| `vadd` (script `small`)"]
    assert "| 250.0 µs (4.00 TB/s), 83% of peak |" in lines["| `vadd` (case `vadd_4gb`)"]
    gemm = lines["| `gemm_v1`"]
    assert f"| sm_100a; no sm_90a build: {BLACKWELL_WHY} |" in gemm and "Hopper GPU: no build" in gemm
    assert "CPU simulation: simulated, 2026-12-02, tirx-harness 0.1, max error 0 (exact), synccheck clean, racecheck clean" in gemm
    assert f"sm_90a; no sm_100a build: {HOPPER_WHY}" in lines["| `gemm_h1`"]
    assert "Blackwell GPU: no build" in lines["| `gemm_h1`"]
    assert all(ln.count(" | ") == 4 for ln in lines.values())


def test_records_of_scripts_no_chapter_builds_are_kept_apart(tmp_path):
    _, runs, sims = joined()
    (tmp_path / "r.json").write_text(json.dumps({"format": 2, **runs[0]}))
    (tmp_path / "s.json").write_text(json.dumps({"format": 2, **sims[0]}))
    path = tmp_path / "manifest" / "kernels.json"  # beside results files, never among them
    path.parent.mkdir()
    path.write_text(json.dumps({"format": 1, "chapters": BUILT}))
    (old,) = matrix.earlier_rows(tmp_path, path)
    assert (old["chapter"], old["name"], old["check"]["fingerprint"]) == ("01-execution-model", "vadd", "before")
    assert len(matrix.kernel_rows(tmp_path, path)) == 6


def test_a_kernel_broken_on_purpose_that_no_replay_launches_is_never_run():
    built = {"D-debugging-async": [{"name": "ring_plain", "arch": "sm_100a", "runs_on": ["sm_100a", "sm_90a"],
                                    "not_built": {}, "fingerprint": "u"}]}
    unsafe = case("D-debugging-async", "ring_plain", "check", "u", status="not judged", expect="unsafe",
                  max_abs_error=None, sanitizer=None)
    (row,) = matrix.kernel_rows_from(built, [{"run": RUN, "cases": [unsafe]}])
    assert matrix.outcome(row) == "never run" and not matrix.ran(row)
    assert matrix.tier(row).startswith("breaks a PTX ordering rule on purpose")
    assert "Hopper GPU: never run" in matrix.chapter_tables([row])


@pytest.mark.book
def test_the_committed_manifest_lists_what_the_chapters_build(built_book, book_manifest):
    """Every chapter this session's book build executed recorded exactly the kernels that
    results/manifest/kernels.json lists for it (a chapter that builds none is absent from it)."""
    if book_manifest is None:
        pytest.skip("no book was built in this session (GPUBOOK_HTML)")
    folder, executed = book_manifest
    recorded = manifest.recorded(folder)
    committed = manifest.load()
    assert "unknown" not in recorded, "a kernel was built before its chapter called gb.set_chapter"
    stale = [c for c in executed if recorded.get(c, []) != committed.get(c, [])]
    assert not stale, (f"results/manifest/kernels.json is out of date for {stale}: "
                       f"run `python -m gpubook manifest {folder}` to write what the chapters built")
