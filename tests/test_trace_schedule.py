"""Traces (gpubook.trace): exported as cases, replayed into the results file, read back by the
chapter; and the scheduling model (gpubook.schedule) that the chapter and its demo share."""

from __future__ import annotations

import itertools
import json
import random

import pytest
import torch

import gpubook as gb
from gpubook import export, replay, results, runtime, schedule
from gpubook.compile import toolchain

import kernels


# -- the scheduling model ------------------------------------------------------------------------
def test_static_schedule_is_round_robin_back_to_back():
    costs = [3, 1, 4, 1, 5, 9, 2, 6]
    slots = schedule.static(costs, 3, available=[0, 2, 0])
    assert sorted((s.tile, s.worker) for s in slots) == [(t, t % 3) for t in range(8)]
    on1 = sorted((s.start, s.end, s.tile) for s in slots if s.worker == 1)
    assert on1 == [(2, 3, 1), (3, 8, 4), (8, 14, 7)]       # starts late, then no gaps
    assert schedule.makespan(slots) == 14
    assert schedule.tail(slots) == 14 - min(3 + 1 + 9, 4 + 2)
    busy = sum(costs) / (3 * 14)
    assert schedule.utilization(slots, 3) == pytest.approx(busy)


def test_dynamic_hands_out_to_the_first_free_worker():
    costs = [5, 1, 1, 1, 1, 1]
    slots = schedule.dynamic(costs, 2)
    assert [(s.tile, s.worker, s.start) for s in sorted(slots, key=lambda s: s.tile)] == [
        (0, 0, 0), (1, 1, 0), (2, 1, 1), (3, 1, 2), (4, 1, 3), (5, 1, 4)]
    assert schedule.makespan(slots) == 5 and schedule.tail(slots) == 0


def test_dynamic_and_clc_differ_only_when_sms_start_late():
    rng = random.Random(3)
    for _ in range(50):
        costs = [rng.randint(1, 9) for _ in range(rng.randint(3, 40))]
        n = rng.randint(1, 8)
        key = lambda slots: sorted((s.tile, s.worker, s.start) for s in slots)  # noqa: E731
        assert key(schedule.dynamic(costs, n)) == key(schedule.clc(costs, n))
    # late SMs: the counter's CTAs keep their first tile; the hardware launches the next waiting one
    late = [4, 0]
    assert schedule.makespan(schedule.dynamic([3, 3, 1, 1], 2, late)) == 7
    assert schedule.makespan(schedule.clc([3, 3, 1, 1], 2, late)) == 6


def test_every_policy_runs_every_tile_once():
    rng = random.Random(11)
    for _ in range(200):
        costs = [rng.randint(1, 20) for _ in range(rng.randint(1, 60))]
        n = rng.randint(1, 9)
        avail = [rng.choice([0, 0, 5]) for _ in range(n)]
        for policy in schedule.POLICIES:
            schedule.check_exactly_once(schedule.simulate(policy, costs, n, avail), len(costs))
    with pytest.raises(AssertionError, match="repeated"):
        schedule.check_exactly_once([schedule.Slot(0, 0, 0, 1), schedule.Slot(0, 1, 0, 1)], 1)
    with pytest.raises(ValueError, match="unknown policy"):
        schedule.simulate("round-robin", [1], 1)


def test_graham_bounds_hold_against_the_optimum():
    """List scheduling is within 2 - 1/m of the best schedule; largest-first within 4/3 - 1/(3m)."""
    rng = random.Random(5)
    for _ in range(60):
        costs = [rng.randint(1, 12) for _ in range(rng.randint(2, 8))]
        m = rng.randint(2, 3)
        best = min(max(sum(c for c, w in zip(costs, assign) if w == k) for k in range(m))
                   for assign in itertools.product(range(m), repeat=len(costs)))
        order = sorted(range(len(costs)), key=lambda t: (-costs[t], t))
        assert schedule.makespan(schedule.dynamic(costs, m)) <= (2 - 1 / m) * best + 1e-9
        assert schedule.makespan(schedule.dynamic(costs, m, order=order)) <= (4 / 3 - 1 / (3 * m)) * best + 1e-9
        assert schedule.makespan(schedule.static(costs, m)) >= best


def test_slots_from_a_recorded_trace():
    # (cta, smid, start ns, end ns) for 4 tiles on SMs 7 and 3
    t = torch.tensor([[0, 7, 1000, 3000], [1, 3, 1500, 2500], [1, 3, 2600, 5600], [0, 7, 3100, 4100]])
    slots, row_of = schedule.from_trace(t)
    assert row_of == {3: 0, 7: 1}
    assert [(s.tile, s.worker, s.start, s.end) for s in slots] == [
        (0, 1, 0.0, 2.0), (1, 0, 0.5, 1.5), (2, 0, 1.6, 4.6), (3, 1, 2.1, 3.1)]
    assert schedule.makespan(slots) == pytest.approx(4.6) and schedule.tail(slots) == pytest.approx(1.5)


# -- traces ------------------------------------------------------------------------------------------
@pytest.fixture
def traced(tmp_path, monkeypatch):
    """vadd exported as a trace case that keeps its output."""
    monkeypatch.setenv("GPUBOOK_EXPORT_DIR", str(tmp_path / "out"))
    monkeypatch.setattr(toolchain, "local_arch", lambda: None)
    export.set_chapter("99-test")
    vadd = gb.build(kernels.vadd, name="vadd")
    n = kernels.N
    args = [gb.seeded((n,), seed=1), gb.seeded((n,), seed=2), torch.full((n,), 7.0)]
    tr = gb.trace(vadd, args, outputs=(-1,), repeat=3)
    yield tmp_path, vadd, args, tr
    export.set_chapter("unknown")


def test_trace_without_a_gpu_says_so_and_exports_a_case(traced):
    tmp_path, vadd, args, tr = traced
    assert tr.status == "not recorded" and not tr.available and tr.reason == "no GPU on this machine"
    assert repr(tr).startswith("NOT RECORDED vadd here: no GPU on this machine")
    d = tmp_path / "out" / "cases" / "99-test--vadd--trace"
    meta = json.loads((d / "case.json").read_text())
    assert meta["kind"] == "trace" and meta["outputs"] == [2] and meta["repeat"] == 3
    assert meta["fingerprint"] == vadd.fingerprint
    saved = torch.load(d / "tensors.pt")["args"]
    assert all(torch.equal(a, b) for a, b in zip(saved, args))   # outputs' initial contents too


def test_replay_of_a_trace_keeps_the_last_launch_and_restores_inputs(traced, monkeypatch):
    tmp_path, vadd, args, _ = traced
    seen = []

    def body(x, y, out):
        seen.append(float(out[0]))        # restored to its saved value before every launch
        out.copy_(x + y)
        x.add_(1.0)                      # a kernel that changes its input must not see it changed

    class Event:
        def __init__(self, enable_timing=True):
            pass

        def record(self):
            pass

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return 0.25

    monkeypatch.setattr(toolchain, "local_arch", lambda: "sm_90a")
    monkeypatch.setattr(runtime, "DEVICE", "cpu")
    monkeypatch.setattr(runtime, "load", lambda so, name, params, arch: runtime.Launcher(body, name, params, arch))
    monkeypatch.setattr(torch.cuda, "Event", Event)
    rec = replay.run_case(tmp_path / "out" / "cases" / "99-test--vadd--trace")
    assert rec["status"] == "measured" and rec["kind"] == "trace" and rec["ms"] == 0.25
    assert seen == [7.0, 7.0, 7.0] and rec["repeat"] == 3
    kept = rec["trace"]["out"]
    assert kept["shape"] == [kernels.N] and kept["dtype"] == "float32"
    assert kept["data"] == (args[0] + args[1]).tolist()
    assert replay.exit_code([rec]) == 0 and "MEASURED" in replay._line(rec)

    # the chapter reads the replay's record back, for this exact kernel script only
    doc = {"format": 1, "run": {"gpu": "NVIDIA H200", "arch": "sm_90a", "date": "2026-01-02", "torch": "x",
                                "sanitizer": []}, "cases": [rec]}
    (tmp_path / "res").mkdir()
    (tmp_path / "res" / "run.json").write_text(json.dumps(doc))
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path / "res")
    monkeypatch.setattr(toolchain, "local_arch", lambda: None)
    export.set_chapter("99-test")
    tr = gb.trace(vadd, args, outputs=(-1,), repeat=3)
    assert tr.available and tr.status == "not recorded" and tr.ms == 0.25
    torch.testing.assert_close(tr["out"], args[0] + args[1], rtol=0, atol=0)
    assert "by the replay of 2026-01-02" in tr.source and repr(tr).startswith("TRACE vadd: out (4096,)")
    rec["fingerprint"] = "0" * 16
    (tmp_path / "res" / "run.json").write_text(json.dumps(doc))
    assert not gb.trace(vadd, args, outputs=(-1,)).available


def test_a_trace_keeps_small_tensors_only(traced):
    tr_mod = __import__("sys").modules["gpubook.run.trace"]
    with pytest.raises(ValueError, match="at most"):
        tr_mod._to_json(torch.zeros(tr_mod.MAX_VALUES + 1))
