"""The measurement protocol: intervals and verdicts (gpubook.facts.stats), a ladder timed in one
loop and repeated in processes (gpubook.run.protocol, the replay), and the claims a chapter may
glue (gpubook.book.timings), with the audit that refuses a claim its table contradicts."""

import json
import random
import subprocess

import pytest

import gpubook as gb
from gpubook.book.timings import ClaimError, Ladder
from gpubook.compile import toolchain
from gpubook.facts import stats
from gpubook.run import bench, protocol, runtime
from gpubook.verify import export, replay

import kernels


def _noisy(ms, n, spread, seed):
    rng = random.Random(seed)
    return [ms * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


# -- intervals and verdicts -------------------------------------------------------------------

def test_an_interval_holds_its_median_and_narrows_with_more_samples():
    few = stats.median_interval(_noisy(1.0, 20, 0.1, 1))
    many = stats.median_interval(_noisy(1.0, 600, 0.1, 1))
    for r in (few, many):
        assert r.lo <= r.median <= r.hi
    assert many.hi - many.lo < few.hi - few.lo
    assert stats.median_interval([2.0] * 5) == stats.Interval(2.0, 2.0, 2.0, 5, 1)
    rate = stats.Interval(2.0, 1.0, 4.0).scaled(8.0)          # a time turned into a rate
    assert (rate.median, rate.lo, rate.hi) == (4.0, 2.0, 8.0)


def test_the_bulk_bootstrap_draws_the_same_resamples_as_random_choices():
    """numpy's path and the pure-Python one give the same medians, draw for draw: the intervals
    a chapter prints do not depend on whether numpy is installed."""
    for seed in range(12):
        rng = random.Random(seed)
        reps = [rng.randint(1, 40) for _ in range(rng.randint(1, 4))]
        xs = [rng.lognormvariate(0, 0.3) for _ in range(sum(reps))]
        if seed % 3 == 0:
            xs = [round(x, 2) for x in xs]              # ties, and equal middle pairs
        strata = stats._strata(xs, reps)
        assert stats._resampled_medians_numpy(strata, 300, seed) == stats._resampled_medians(strata, 300, seed)


def test_reps_must_add_up_to_the_samples():
    with pytest.raises(ValueError, match="do not add up"):
        stats.median_interval([1.0, 2.0, 3.0], reps=[2, 2])
    with pytest.raises(ValueError, match="differ in length"):
        stats.compare([1.0], [1.0, 2.0])


def test_a_clear_gap_is_faster_and_noise_alone_is_parity():
    b = _noisy(1.0, 150, 0.05, 2)
    a = [x / 1.10 for x in _noisy(1.0, 150, 0.01, 3)]     # 10 % faster, paired with b
    c = stats.compare(a, b, reps=[50, 50, 50])
    assert c.verdict == "faster" and c.ratio.lo > 1 and abs(c.percent() - 10) < 1
    assert " % faster (" in c.phrase() and c.phrase().endswith("3 runs) than")
    assert stats.compare(b, a, reps=[50, 50, 50]).verdict == "slower"
    same = stats.compare(_noisy(1.0, 150, 0.05, 4), _noisy(1.0, 150, 0.05, 5), reps=[50, 50, 50])
    assert same.verdict == "parity" and same.phrase().startswith("at parity (±")


def test_faster_needs_every_process_to_agree():
    # two processes see A 6 % ahead, the third sees it 2 % behind: the pooled interval may exclude
    # 1, but a verdict that one process contradicts is parity
    b = [1.0] * 150
    a = [1 / 1.06] * 100 + [1 / 0.98] * 50
    c = stats.compare(a, b, reps=[50, 50, 50])
    assert c.ratio.lo > 1 and min(c.per_run) < 1 and c.verdict == "parity"


# -- a ladder in one loop, in several processes -----------------------------------------------

@pytest.fixture
def ladder_export(tmp_path, monkeypatch):
    """Two kernels of one ladder and one kernel of its own, exported as on a machine without a GPU."""
    monkeypatch.setenv("GPUBOOK_EXPORT_DIR", str(tmp_path / "out"))
    monkeypatch.delenv("GPUBOOK_STRICT", raising=False)
    monkeypatch.setattr(toolchain, "local_arch", lambda: None)
    export.set_chapter("99-test")
    n = kernels.N
    for name, ladder in (("step1", "full"), ("step2", "full"), ("alone", None)):
        k = gb.build(kernels.vadd, name=name)
        gb.bench(k, bytes=3 * n * 4, baseline="add", tolerance="exact", ladder=ladder, repeat=4, warmup=1)
    yield tmp_path / "out"
    export.set_chapter("unknown")


def _fake_gpu(monkeypatch, bodies):
    monkeypatch.setattr(toolchain, "local_arch", lambda: "sm_90a")
    monkeypatch.setattr(runtime, "local_gpu_name", lambda: "NVIDIA H200")
    monkeypatch.setattr(runtime, "DEVICE", "cpu")
    monkeypatch.setattr(runtime, "synchronize", lambda: None)
    monkeypatch.setattr(runtime, "load", lambda so, name, params, arch: runtime.Launcher(bodies[name], name, params, arch))


def test_a_ladder_is_timed_in_one_loop_with_each_baseline_once(ladder_export, monkeypatch):
    add = lambda x, y, o: o.copy_(x + y)  # noqa: E731
    _fake_gpu(monkeypatch, {"step1": add, "step2": add, "alone": add})
    loops = []

    def fake(fns, warmup, repeat, flush, flush_bytes=0, sample=None, report=None):
        loops.append(list(fns))
        report.update(spin_us=50.0, host_bound={n: 0 for n in fns})
        return {n: [0.001 * (i + 1)] * repeat for i, n in enumerate(fns)}

    monkeypatch.setattr(bench, "time_interleaved", fake)
    cases = ladder_export / "cases"
    timed = sorted(p for p in cases.iterdir() if p.name.endswith("--perf"))
    groups = replay.ladders(timed)
    assert sorted(sorted(c.name.split("--")[1] for c in g) for g in groups) == [["alone"], ["step1", "step2"]]
    members = [(runtime.load("", replay.load_case(c)["name"], replay.load_case(c)["param_objs"], "sm_90a"),
                replay.load_case(c)) for c in groups[[len(g) for g in groups].index(2)]]
    recs = protocol.measure_ladder(members)
    assert loops == [["step1", "step2", "baseline:add"]]       # one loop, the baseline once
    assert recs["step1"]["samples"] == [0.001] * 4 and recs["step2"]["samples"] == [0.002] * 4
    assert recs["step1"]["baselines_samples"] == recs["step2"]["baselines_samples"] == {"add": [0.003] * 4}
    assert recs["step1"]["output_check"]["passed"] and recs["step1"]["spin_us"] == 50.0


def test_a_member_whose_output_is_wrong_fails_and_the_others_are_still_timed(ladder_export, monkeypatch):
    def wrong(x, y, o):
        o.copy_(x + y)
        o[3] += 1

    _fake_gpu(monkeypatch, {"step1": lambda x, y, o: o.copy_(x + y), "step2": wrong})
    monkeypatch.setattr(bench, "time_interleaved",
                        lambda fns, *a, report=None, **k: (report.update(spin_us=None, host_bound={}),
                                                           {n: [1.0] * 4 for n in fns})[1])
    cases = ladder_export / "cases"
    members = [(runtime.load("", n, replay.load_case(cases / f"99-test--{n}--perf")["param_objs"], "sm_90a"),
                replay.load_case(cases / f"99-test--{n}--perf")) for n in ("step1", "step2")]
    recs = protocol.measure_ladder(members)
    assert recs["step2"]["status"] == "failed" and recs["step2"]["output_check"]["mismatches"] == 1
    assert recs["step1"]["status"] == "measured"


def test_kernels_of_one_ladder_share_their_timing_setup():
    a = {"name": "a", "ladder": "full", "repeat": 50}
    b = {"name": "b", "ladder": "full", "repeat": 20}
    with pytest.raises(ValueError, match="b differs from a in its repeats"):
        protocol.members_agree([a, b])
    assert protocol.baselines_of([{"baselines": ["sdpa", "add"]}, {"baseline": "add"}, {"baseline": "copy"}]) == ["sdpa", "add", "copy"]


def test_the_replay_repeats_each_ladder_in_processes_and_pools_aligned_samples(ladder_export, monkeypatch, tmp_path):
    add = lambda x, y, o: o.copy_(x + y)  # noqa: E731
    _fake_gpu(monkeypatch, {"step1": add, "step2": add, "alone": add})
    rep = iter(range(100))

    def fake(fns, warmup, repeat, flush, flush_bytes=0, sample=None, report=None):
        r = next(rep)
        report.update(spin_us=50.0, host_bound={n: 0 for n in fns})
        return {n: [0.001 * (i + 1) + 1e-6 * r] * repeat for i, n in enumerate(fns)}

    monkeypatch.setattr(bench, "time_interleaved", fake)

    def child(cmd, **kw):  # a child process, run here on the fake GPU
        out = cmd[cmd.index("--json") + 1]
        replay.main_ladder(cmd[cmd.index("--json") + 2:], out)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(replay.subprocess, "run", child)
    cases = ladder_export / "cases"
    group = [cases / "99-test--step1--perf", cases / "99-test--step2--perf"]
    run = {"gpu": "NVIDIA H200", "date": "2026-12-06", "arch": "sm_90a"}
    (tmp_path / "work").mkdir()
    r1, r2 = replay.time_ladder(group, tmp_path / "work", 60, 3, run)
    assert r1["status"] == r2["status"] == "measured"
    assert r1["reps"] == r2["reps"] == [4, 4, 4] and len(r1["samples"]) == 12
    assert r1["ladder_run"] == r2["ladder_run"] and r1["ladder_members"] == ["step1", "step2"]
    assert r1["baselines_samples"] == r2["baselines_samples"]
    t1, t2 = (gb.Timing.from_record(dict(r, run=run)) for r in (r1, r2))
    lad = Ladder({"step1": t1, "step2": t2})
    assert lad.compare("step1", "step2").verdict == "faster"
    assert lad.compare("step2", "baseline:add").ratio.median == pytest.approx(0.003 / 0.002, rel=1e-2)
    json.dumps(r1)


# -- what a chapter may say, and the audit -----------------------------------------------------

def _timing(name, ms, run="r1", n=60, spread=0.02, seed=0):
    samples = _noisy(ms, n, spread, seed)
    base = _noisy(1.0, n, spread, seed + 100)
    return gb.Timing(name, "measured", gpu="NVIDIA H100 80GB HBM3", ms=ms, flops=1e12, samples=samples,
                     reps=[n // 3] * 3, ladder="full", ladder_run=run,
                     baselines={"cudnn": 1.0}, baselines_samples={"cudnn": base})


def test_claims_follow_the_measurement_and_the_audit_refuses_a_contradicting_table():
    lad = Ladder({"a": _timing("a", 0.8, seed=1), "b": _timing("b", 1.0, seed=2),
                  "c": _timing("c", 1.0, seed=3), "old": _timing("old", 0.5, run="r0", seed=4)})
    assert "faster" in lad.than("a", "b") and lad.than("b", "c").startswith("at parity")
    assert lad.than("a", "old").startswith("not compared")   # another loop: no ratio of ratios
    assert lad.fastest(["a", "b", "c"]) == "a"
    assert lad.fmt_rate("a").endswith(")") and "TFLOP/s" in lad.fmt_rate("a")
    assert lad.times("x", "b") == "not measured yet" and lad.rate("x") is None
    rows = [lad.row(n, against=("baseline:cudnn",)) for n in ("a", "b", "c")]
    assert lad.audit(rows) == 3
    swapped = [dict(rows[0], rate=rows[1]["rate"]), dict(rows[1], rate=rows[0]["rate"]), rows[2]]
    with pytest.raises(ClaimError, match="called faster"):
        lad.audit(swapped)
    with pytest.raises(ClaimError, match="does not show"):
        lad.audit(rows[:2])


def test_a_chapter_with_no_record_yet_gets_words_not_an_error():
    lad = Ladder({"a": None, "b": gb.Timing("b", "not measured", reason="no GPU")})
    assert lad.fmt_rate("a") == "not measured yet" and lad.fastest(["a", "b"]) is None
    assert lad.than("a", "b").startswith("not compared") and lad.audit([]) == 0


def test_kernels_of_other_shapes_in_one_loop_get_inputs_and_baselines_of_their_own(monkeypatch):
    from gpubook.compile.signature import Param

    monkeypatch.setattr(runtime, "DEVICE", "cpu")
    monkeypatch.setattr(runtime, "synchronize", lambda: None)
    add = lambda x, y, o: o.copy_(x + y)  # noqa: E731
    members = []
    for name, n in (("small", 64), ("large", 128), ("large2", 128)):
        params = [Param("x", (n,), "float32"), Param("y", (n,), "float32"), Param("out", (n,), "float32")]
        meta = {"name": name, "ladder": "mixed", "baseline": "add", "tolerance": {"exact": True},
                "params": [{"shape": [n], "dtype": "float32"}] * 3, "repeat": 2, "warmup": 1}
        members.append((runtime.Launcher(add, name, params, "sm_90a"), meta))
    seen = []

    def fake(fns, warmup, repeat, flush, flush_bytes=0, sample=None, report=None):
        seen.append(list(fns))
        return {n: [float(i)] * repeat for i, n in enumerate(fns)}

    monkeypatch.setattr(bench, "time_interleaved", fake)
    recs = protocol.measure_ladder(members)
    assert seen == [["small", "baseline:add#0", "large", "large2", "baseline:add#1"]]
    assert recs["small"]["baselines_samples"] == {"add": [1.0, 1.0]}
    assert recs["large"]["baselines_samples"] == recs["large2"]["baselines_samples"] == {"add": [4.0, 4.0]}


def test_a_parity_claim_is_refused_by_a_table_that_shows_a_larger_gap():
    lad = Ladder({"b": _timing("b", 1.0, seed=2), "c": _timing("c", 1.0, seed=3)})
    assert lad.than("b", "c").startswith("at parity")
    rows = [lad.row("b"), lad.row("c")]
    assert lad.audit(rows) == 1
    wider = stats.Interval(rows[0]["rate"].median * 1.05, rows[0]["rate"].lo * 1.05, rows[0]["rate"].hi * 1.05)
    with pytest.raises(ClaimError, match="called at parity"):
        lad.audit([dict(rows[0], rate=wider), rows[1]])


def test_a_kernel_timed_here_compares_with_its_own_baselines_but_not_with_another_kernel():
    """A notebook on a GPU times each kernel in a loop of its own with its baselines: the pair
    of a kernel and its baseline is one loop, two kernels are not."""
    a, b = _timing("a", 0.8, run=None, seed=1), _timing("b", 1.0, run=None, seed=2)
    lad = Ladder({"a": a, "b": b})
    assert lad.compare("a", "baseline:cudnn") is not None
    assert lad.compare("a", "b") is None and lad.than("a", "b").startswith("not compared")
