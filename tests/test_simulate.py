"""The simulated tier: NumSim's verdicts judged like a GPU check, kept apart from GPU runs.

The unit tests need no simulator. The tests marked `sim` run tirx-harness in its own
interpreter (`.venv-sim`, from requirements-sim.txt, or $GPUBOOK_SIM_PYTHON) and are skipped
with the reason where none exists:
- a small Blackwell GEMM tile (tests/sim_kernels.py) is simulated correct and with planted
  protocol bugs, each of which must fail;
- a rotating sample of the book's own Blackwell checks, exported by this session's book build,
  is simulated again and must reproduce its committed record exactly.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from pathlib import Path

import pytest
import torch

import gpubook as gb
from gpubook import export, matrix, results, simulate
from gpubook.verify import sim_records
from gpubook.verify.check import REQUIRE_SIMULATED_ENV, CheckResult, NotSimulatedError, _simulation

ROOT = Path(__file__).resolve().parents[1]


def _tools(numbers="clean", synccheck="clean", racecheck="clean"):
    out = {}
    for tool, v in (("numbers", numbers), ("synccheck", synccheck), ("racecheck", racecheck)):
        if v is None:
            continue
        e = {"verdict": v, "findings": 0 if v == "clean" else 1, "seconds": 1.0, "kept": []}
        if v == "unable":
            e["error"] = "UnsupportedTIRxError: opaque CUDA helper bodies are not part of TIRx semantics"
        elif v != "clean":
            e["kept"] = [{"kind": "deadlock", "message": "wait on loaded (phase 0) can never complete"}]
        out[tool] = e
    return out


META = {"tolerances": [[0.0, 1e-3]], "outputs": [2]}
EXPECTED = [torch.ones(4, 4)]


def test_a_simulation_passes_only_when_every_tool_agrees():
    rec = simulate.judge(META, _tools(), EXPECTED, {"D": torch.ones(4, 4).numpy()})
    assert rec["status"] == "simulated" and rec["max_abs_error"] == 0
    assert rec["tools"]["numbers"]["verdict"] == "match"
    off = torch.ones(4, 4)
    off[1, 2] = 1.01
    rec = simulate.judge(META, _tools(), EXPECTED, {"D": off.numpy()})
    assert rec["status"] == "failed" and "1 of 16 elements differ" in rec["message"]
    nan = torch.ones(4, 4)
    nan[3, 3] = float("nan")  # a poisoned element nobody wrote
    assert simulate.judge(META, _tools(), EXPECTED, {"D": nan.numpy()})["status"] == "failed"
    rec = simulate.judge(META, _tools(synccheck="error"), EXPECTED, {"D": torch.ones(4, 4).numpy()})
    assert rec["status"] == "failed" and "synccheck: deadlock" in rec["message"]
    rec = simulate.judge(META, _tools(numbers="unable"), EXPECTED, None)
    assert rec["status"] == "error" and "opaque CUDA helper" in rec["message"]
    rec = simulate.judge(META, _tools(racecheck="incomplete"), EXPECTED, {"D": torch.ones(4, 4).numpy()})
    assert rec["status"] == "error", "an incomplete analysis certifies nothing"
    assert simulate.judge(META, _tools(), EXPECTED, None)["status"] == "error"


def test_a_kernel_that_must_fail_is_caught_or_missed():
    meta = dict(META, expect="trap")
    assert simulate.judge(meta, _tools(synccheck="error"), EXPECTED, None)["status"] == "caught"
    rec = simulate.judge(meta, _tools(), EXPECTED, {"D": torch.ones(4, 4).numpy()})
    assert rec["status"] == "missed" and not simulate.good(rec)
    unsafe = simulate.judge(dict(META, expect="unsafe"), _tools(), EXPECTED, {"D": torch.ones(4, 4).numpy()})
    assert unsafe["status"] == "missed" and simulate.good(unsafe) and "blind spot" in unsafe["message"]


def _results_dir(tmp_path: Path, fingerprint="abc", status="simulated") -> Path:
    d = tmp_path / "results"
    d.mkdir(parents=True)
    gpu = {"format": 2, "run": {"gpu": "NVIDIA H200", "arch": "sm_90a", "date": "2026-11-30",
                                "sanitizer": []},
           "cases": [{"case": "ch--k--check", "chapter": "ch", "name": "k", "kind": "check",
                      "fingerprint": "zzz", "runs_on": ["sm_90a", "sm_100a"], "status": "passed",
                      "max_abs_error": 0.0}]}
    sim = {"format": 2, "run": {"gpu": simulate.SIM_GPU, "arch": "sm_100a", "date": "2026-12-01",
                                "simulator": "tirx-harness 0.1.2.post2", "tools": list(simulate.TOOLS),
                                "sanitizer": []},
           "cases": [{"case": "ch--bw--check", "chapter": "ch", "name": "bw", "kind": "check",
                      "fingerprint": fingerprint, "runs_on": ["sm_100a"], "status": status,
                      "max_abs_error": 1.5e-4, "tolerances": [[0.0, 1e-3]],
                      "tools": {"numbers": {"verdict": "match"}, "synccheck": {"verdict": "clean"},
                                "racecheck": {"verdict": "clean"}}}]}
    (d / "2026-11-30-h200.json").write_text(json.dumps(gpu))
    (d / "2026-12-01-numsim.json").write_text(json.dumps(sim))
    return d


def test_simulations_never_count_as_gpu_runs(tmp_path):
    d = _results_dir(tmp_path)
    assert [r["run"]["gpu"] for r in results.load_runs(d)] == ["NVIDIA H200"]
    assert [r["run"]["gpu"] for r in results.load_runs(d, simulated=True)] == [simulate.SIM_GPU]
    assert results.newest("bw", "check", directory=d) is None
    assert results.newest_simulation("bw", "ch", "abc", directory=d)["status"] == "simulated"
    assert results.newest_simulation("bw", "ch", "other", directory=d) is None
    rows = {r["name"]: r for r in matrix.rows(d)}
    assert rows["bw"]["passed_on"] == {} and rows["bw"]["simulated"]["status"] == "simulated"
    assert matrix.tier(rows["bw"]) == "simulated for sm_100a (NumSim) — never run on a GPU"
    assert rows["bw"] in matrix.never_run(list(rows.values()))
    table = matrix.chapter_tables(list(rows.values()))
    line = next(ln for ln in table.splitlines() if "`bw`" in ln)
    assert line.count("|") == 6, line  # kernel | compiled for | verified | time | stress: no stray bar
    assert ("**simulated for sm_100a (NumSim) — never run on a GPU** · Hopper GPU: no build · "
            "Blackwell GPU: never run · CPU simulation: simulated, 2026-12-01, tirx-harness "
            "0.1.2.post2, max abs error 0.00015 (allowance atol 0.001 + rtol 0·abs(ref)), synccheck clean, "
            "racecheck clean") in line


class _Kernel:
    """What check._simulation reads of a kernel."""

    def __init__(self, fingerprint, runs_on=("sm_100a",)):
        self.fingerprint, self.runs_on = fingerprint, runs_on


def test_the_not_run_line_cites_the_simulation_of_the_same_script(tmp_path, monkeypatch):
    d = _results_dir(tmp_path)
    monkeypatch.setattr(results, "RESULTS_DIR", d)
    before = export.current_chapter()
    export.set_chapter("ch")
    try:
        sim = _simulation(_Kernel("abc"), "bw", None)
        r = CheckResult("bw", "not run", reason="no GPU (compiled for sm_100a)",
                              facts="128 registers", simulated=sim)
        lines = r.lines()   # the simulation leads, then what this machine could not do
        assert lines[0] == ("SIMULATED bw on the CPU (NumSim, tirx-harness 0.1.2.post2, 2026-12-01) — never "
                            "run on a GPU: matches PyTorch, max abs error 0.00015 (allowance atol 0.001 + "
                            "rtol 0·|ref|); synccheck clean; racecheck clean")
        assert lines[1] == "not run here: no GPU (compiled for sm_100a)"
        assert "PASS" not in repr(r) and "NOT RUN" not in repr(r)
        sim["max_error_over_allowed"] = 0.15        # a record that keeps the fraction prints it instead
        assert "matches PyTorch, max error 15% of the allowance;" in CheckResult(
            "bw", "not run", reason="no GPU", facts="", simulated=sim).lines()[0]
        assert _simulation(_Kernel("changed"), "bw", None) is None
        assert _simulation(_Kernel("abc", ("sm_100a", "sm_90a")), "bw", None) is None
    finally:
        export.set_chapter(before)


def test_a_stale_fingerprint_fails_when_simulation_is_required(tmp_path, monkeypatch):
    d = _results_dir(tmp_path)
    monkeypatch.setattr(results, "RESULTS_DIR", d)
    monkeypatch.setenv(REQUIRE_SIMULATED_ENV, "1")
    before = export.current_chapter()
    export.set_chapter("ch")
    try:
        assert _simulation(_Kernel("abc"), "bw", None)["status"] == "simulated"
        with pytest.raises(NotSimulatedError, match="has no good simulation: none is recorded"):
            _simulation(_Kernel("edited"), "bw", None)
        # a declared reason stands in for a simulation, and is printed
        assert _simulation(_Kernel("edited"), "bw", "NumSim cannot run X") is None
        assert _simulation(_Kernel("p", ("sm_90a", "sm_100a")), "portable", None) is None
    finally:
        export.set_chapter(before)
    d2 = _results_dir(tmp_path / "b", status="failed")
    monkeypatch.setattr(results, "RESULTS_DIR", d2)
    export.set_chapter("ch")
    try:
        with pytest.raises(NotSimulatedError, match="the newest is failed"):
            _simulation(_Kernel("abc"), "bw", None)
    finally:
        export.set_chapter(before)


def test_export_only_writes_the_selected_cases(tmp_path, monkeypatch):
    monkeypatch.setenv(export.EXPORT_ENV, str(tmp_path))
    monkeypatch.setenv(export.EXPORT_ONLY_ENV, r"^ch--(a|b)--check$")
    before = export.current_chapter()
    export.set_chapter("ch")
    try:
        assert export.exporting("check", "a") and export.exporting("check", "b")
        assert not export.exporting("check", "c") and not export.exporting("perf", "a")
    finally:
        export.set_chapter(before)


# -- with the simulator ------------------------------------------------------------------------

needs_sim = pytest.mark.skipif(simulate.simulator_version() is None,
                               reason="no simulator interpreter: make .venv-sim from requirements-sim.txt "
                                      "(Python 3.12+) or set GPUBOOK_SIM_PYTHON")


@contextlib.contextmanager
def _simtest_export(tmp_path, monkeypatch, name):
    """Checks inside export into tmp_path, as chapter "simtest"; yields the case folder of `name`."""
    monkeypatch.setenv(export.EXPORT_ENV, str(tmp_path))
    before = export.current_chapter()
    export.set_chapter("simtest")
    try:
        yield tmp_path / "cases" / f"simtest--{name}--check"
    finally:
        export.set_chapter(before)


def _export_tma_gemm(tmp_path, monkeypatch, bug):
    import sim_kernels as sk

    with _simtest_export(tmp_path, monkeypatch, f"tma_gemm_{bug or 'ok'}") as case:
        k = gb.build(sk.make_tma_gemm(bug), name=f"tma_gemm_{bug or 'ok'}", expect_tx_mismatch=bug == "half_tx")
        A = gb.seeded((sk.M, sk.K), "float16", seed=1)
        B = gb.seeded((sk.N, sk.K), "float16", seed=2)
        r = gb.check(k, [A, B, torch.empty(sk.M, sk.N)], ref=lambda A, B, D: A.float() @ B.float().T,
                     rtol=0, atol=1e-3)
        assert not r.passed
    return case


@pytest.mark.sim
@needs_sim
@pytest.mark.parametrize("bug", [None, "half_tx", "parity"])
def test_a_planted_protocol_bug_fails_simulation(tmp_path, monkeypatch, bug):
    case = _export_tma_gemm(tmp_path, monkeypatch, bug)
    # the correct kernel must match and be clean; a broken one must fail the protocol check
    tools = ("numbers", "synccheck") if bug is None else ("synccheck",)
    rec = simulate.simulate_case(case, tools=tools, timeout=1500)
    if bug is None:
        assert rec["status"] == "simulated", rec
        assert rec["tools"]["numbers"]["verdict"] == "match"
        assert rec["tools"]["synccheck"]["verdict"] == "clean"
    else:
        assert rec["status"] in ("failed", "error"), rec
        assert not simulate.good(rec)
        assert rec["tools"]["synccheck"]["verdict"] != "clean", rec


def sk_tiles() -> int:
    import sim_kernels as sk

    return sk.CLC_TILES


def test_a_simulation_of_some_clusters_records_and_says_it_was_partial():
    """`resident=N` simulates the launch's first N clusters: the record keeps N of M, and the
    verdict line and appendix A say "simulated N of M clusters"."""
    meta = {"resident": 132, "facts": {"launch": ["grid 608 · block 128"]}}
    assert simulate.launch_clusters(meta) == 608
    assert simulate.coverage(meta) == {"partial": True, "clusters": 132, "of": 608}
    two = {"resident": 8, "facts": {"launch": ["grid 180×1×1 · block 256 · cluster 2×1×1"]}}
    assert simulate.coverage(two) == {"partial": True, "clusters": 8, "of": 90}
    assert simulate.coverage({"resident": 90, **{k: v for k, v in two.items() if k != "resident"}})["partial"] is False
    run = {"date": "2026-12-04", "simulator": "tirx-harness 0.1.2.post2"}
    rec = {"status": "simulated", "run": run, "max_abs_error": 0.0, "resident": 132,
           "coverage": simulate.coverage(meta),
           "tools": {"numbers": {"verdict": "match"}, "synccheck": {"verdict": "clean"},
                     "racecheck": {"verdict": "clean"}}}
    line = CheckResult("k", "not run", reason="no GPU", facts="", simulated=rec).lines()[0]
    assert "simulated 132 of 608 clusters (the other 476 never start" in line
    # a record written before the count was kept: from the checkers' scope
    old = dict(rec, coverage=None, tools=dict(rec["tools"], synccheck={
        "verdict": "clean", "scope": "528 of 2432 warps: the 132 resident clusters"}))
    assert "simulated 132 of 608 clusters" in CheckResult("k", "not run", reason="no GPU", facts="",
                                                          simulated=old).lines()[0]
    row = {"failed": [], "check": None, "passed_on": {}, "perf": None, "runs_on": ["sm_100a"],
           "by_arch": {}, "simulated": dict(rec, run=run)}
    assert matrix.tier(row) == "simulated for sm_100a (NumSim, 132 of 608 clusters) — never run on a GPU"
    assert "simulated 132 of 608 clusters" in matrix.simulation(row)


def _export_clc_tiles(tmp_path, monkeypatch, bug, resident):
    import sim_kernels as sk

    name = f"clc_tiles_{bug or 'ok'}_{resident or 'all'}"
    with _simtest_export(tmp_path, monkeypatch, name) as case:
        k = gb.build(sk.make_clc_tiles(bug), name=name)
        expected = torch.arange(sk.CLC_TILES * 32, dtype=torch.int32).view(sk.CLC_TILES, 32)
        gb.check(k, [torch.empty(sk.CLC_TILES, 32, dtype=torch.int32)], ref=lambda out: expected,
                 resident=resident)
    assert json.loads((case / "case.json").read_text()).get("resident") == resident
    return case


@pytest.mark.sim
@needs_sim
@pytest.mark.parametrize("bug, resident, status", [
    (None, 2, "simulated"),        # two CTAs resident take the other six tiles through CLC
    ("one_tile", None, "simulated"),   # the blind spot: every CTA resident, no cancel succeeds
    ("one_tile", 2, "failed"),     # the same bug with two resident: six tiles never written
])
def test_fewer_resident_clusters_exercise_the_stealing_path(tmp_path, monkeypatch, bug, resident, status):
    case = _export_clc_tiles(tmp_path, monkeypatch, bug, resident)
    tools = ("numbers", "synccheck") if bug is None else ("numbers",)
    rec = simulate.simulate_case(case, tools=tools, timeout=1500)
    assert rec["status"] == status, rec
    assert rec.get("resident") == resident
    if status == "failed":
        assert rec["tools"]["numbers"]["verdict"] == "mismatch"
    if bug is None:   # the checker ran over the resident CTAs alone, and says so
        assert rec["tools"]["synccheck"]["verdict"] == "clean"
        assert "2 resident clusters" in rec["tools"]["synccheck"]["scope"]
    if resident is not None:   # the record keeps that only part of the launch was simulated
        assert rec["coverage"] == {"partial": True, "clusters": 2, "of": sk_tiles()}
    else:
        assert "coverage" not in rec


def _export_mx_gemm(tmp_path, monkeypatch, bug):
    import sim_kernels as sk

    from gpubook.models import lowprec as lp

    name = f"mx_gemm_{bug or 'ok'}"
    g = torch.Generator().manual_seed(5)
    # A's blocks of 32 span seven binades, so that every K block has a scale of its own
    spread = torch.exp2(torch.randint(-3, 4, (sk.MX_M, sk.MX_K // 32), generator=g).float())
    qa, sa = lp.mx_quantize(torch.randn(sk.MX_M, sk.MX_K, generator=g) * spread.repeat_interleave(32, 1))
    qb, sb = lp.mx_quantize(torch.randn(sk.MX_N, sk.MX_K, generator=g))
    want = (lp.mx_dequantize(qa, sa).double() @ lp.mx_dequantize(qb, sb).double().T).float()
    args = [qa.to(torch.float8_e4m3fn), qb.to(torch.float8_e4m3fn), lp.ue8m0_codes(sa).view(torch.float8_e8m0fnu),
            lp.ue8m0_codes(sb).view(torch.float8_e8m0fnu), torch.empty(sk.MX_M, sk.MX_N)]
    with _simtest_export(tmp_path, monkeypatch, name) as case:
        k = gb.build(sk.make_mx_gemm(bug), name=name)
        assert ".kind::mxf8f6f4.block_scale" in k.ptx and "tcgen05.cp" in k.ptx
        # every product of two E4M3 values and two powers of two is exact in fp32; what is left is
        # K fp32 additions, each within 2^-24 of a partial sum bounded by sum |a| |b|
        bound = (lp.mx_dequantize(qa, sa).abs().double() @ lp.mx_dequantize(qb, sb).abs().double().T).max()
        gb.check(k, args, ref=lambda *a: want, rtol=0, atol=float(sk.MX_K * 2.0 ** -24 * bound))
    return case


@pytest.mark.sim
@needs_sim
@pytest.mark.parametrize("bug, status", [(None, "simulated"), ("stale_scales", "failed")])
def test_a_block_scaled_mma_follows_the_mx_formats(tmp_path, monkeypatch, bug, status):
    """The simulator's MXFP8 MMA (E4M3 with UE8M0 scales staged through tcgen05.cp) computes the
    product that gpubook.models.lowprec dequantizes to, and scales from the wrong K tile fail."""
    rec = simulate.simulate_case(_export_mx_gemm(tmp_path, monkeypatch, bug), tools=("numbers",), timeout=1500)
    assert rec["status"] == status, rec
    assert rec["tools"]["numbers"]["verdict"] == ("match" if bug is None else "mismatch")


def _nvfp4_operands(sk):
    """NVFP4 operands of the one-tile kernel: A's blocks of 16 span seven binades, so that every
    block's scale differs from its neighbour's; (args, reference, the bound of the sums)."""
    from gpubook.models import lowprec as lp

    g = torch.Generator().manual_seed(7)
    spread = torch.exp2(torch.randint(-3, 4, (sk.NV_M, sk.NV_K // 16), generator=g).float())
    qa, sa, ga = lp.nvfp4_quantize(torch.randn(sk.NV_M, sk.NV_K, generator=g) * spread.repeat_interleave(16, 1))
    qb, sb, gb_ = lp.nvfp4_quantize(torch.randn(sk.NV_N, sk.NV_K, generator=g))
    a, b = lp.nvfp4_dequantize(qa, sa, ga).double(), lp.nvfp4_dequantize(qb, sb, gb_).double()
    want = (a @ b.T).float()
    bound = float((a.abs() @ b.abs().T).max())
    # E2M1 travels two to a byte as torch.float4_e2m1fn_x2 (M, K / 2); the block scales, positive
    # E4M3 values, as float8_e4m3fn; the tensor scales' product is the epilogue's alpha
    args = [lp.pack_e2m1(qa).view(torch.float4_e2m1fn_x2), lp.pack_e2m1(qb).view(torch.float4_e2m1fn_x2),
            sa.to(torch.float8_e4m3fn), sb.to(torch.float8_e4m3fn), torch.tensor([ga * gb_], dtype=torch.float32),
            torch.empty(sk.NV_M, sk.NV_N)]
    return args, want, bound


def _export_nvfp4_gemm(tmp_path, monkeypatch, bug):
    import sim_kernels as sk

    name = f"nvfp4_gemm_{bug or 'ok'}"
    args, want, bound = _nvfp4_operands(sk)
    with _simtest_export(tmp_path, monkeypatch, name) as case:
        k = gb.build(sk.make_nvfp4_gemm(bug), name=name)
        assert ".kind::mxf4nvf4.block_scale.scale_vec::4X" in k.ptx and "tcgen05.cp" in k.ptx
        # An E2M1 value has two significant bits and a UE4M3 scale four, so each product of two
        # scaled elements has at most twelve and is exact in fp32 (its exponent stays far inside
        # fp32's range). What is left is K fp32 additions, each within 2^-24 of a partial sum
        # bounded by sum |a| |b|, then two roundings of 2^-24 each: alpha = g_A g_B to fp32 and
        # the product of the sum with it.
        gb.check(k, args, ref=lambda *a: want, rtol=0, atol=float((sk.NV_K + 2) * 2.0 ** -24 * bound))
    return case


@pytest.mark.sim
@needs_sim
@pytest.mark.parametrize("bug, status", [(None, "simulated"), ("swapped_blocks", "failed")])
def test_an_nvfp4_mma_follows_the_format(tmp_path, monkeypatch, bug, status):
    """The simulator's NVFP4 MMA (packed E2M1 with UE4M3 scales per 16 elements, staged through
    tcgen05.cp, kind::mxf4nvf4 with scale_vec::4X, the tensor scales in the epilogue) computes the
    product that gpubook.models.lowprec dequantizes to, and each block taking its neighbour's
    scale fails."""
    rec = simulate.simulate_case(_export_nvfp4_gemm(tmp_path, monkeypatch, bug), tools=("numbers",), timeout=1500)
    assert rec["status"] == status, rec
    assert rec["tools"]["numbers"]["verdict"] == ("match" if bug is None else "mismatch")


def test_a_check_finds_only_a_simulation_with_its_own_residency(tmp_path, monkeypatch):
    from gpubook.facts import results

    for resident in (None, 4):
        run = {"gpu": simulate.SIM_GPU, "arch": "sm_100a", "date": f"2026-01-0{1 if resident is None else 2}",
               "simulator": "tirx-harness x"}
        case = {"case": "c--k--check", "chapter": "c", "name": "k", "kind": "check", "fingerprint": "f",
                "status": "simulated", "tools": {}}
        if resident is not None:
            case["resident"] = resident
        (tmp_path / f"2026-01-0{1 if resident is None else 2}-numsim.json").write_text(
            json.dumps({"format": 2, "run": run, "cases": [case]}))
    find = lambda r: results.newest_simulation("k", fingerprint="f", directory=tmp_path, resident=r)  # noqa: E731
    assert find(None)["run"]["date"] == "2026-01-01"
    assert find(4)["run"]["date"] == "2026-01-02"
    assert find(2) is None


def test_the_rotation_moves_through_the_records():
    days = [dt.date(2026, 12, 1) + dt.timedelta(days=i) for i in range(30)]
    picked = {c["case"] for d in days for c in sim_records.rotation(d)}
    pool = {c["case"] for c in results.cases(simulated=True) if c["status"] == "simulated"}
    assert pool, "no simulation is committed in results/"
    assert len(picked) >= min(len(pool), 10)


@pytest.mark.sim
@needs_sim
def test_a_rotating_sample_of_the_book_reproduces_its_records(built_book):
    from conftest import book_export

    exported = book_export()
    if exported is None:
        pytest.skip("no book build exported cases in this session (GPUBOOK_HTML reuses a build)")
    export_dir, sample = exported
    assert sample
    for rec in sample:
        case = export_dir / "cases" / rec["case"]
        assert case.is_dir(), f"the book build did not export {rec['case']}"
        meta = json.loads((case / "case.json").read_text())
        assert meta["fingerprint"] == rec["fingerprint"], f"{rec['case']}: the kernel changed since its record"
        assert meta["case_digest"] == rec["case_digest"], f"{rec['case']}: the inputs changed since its record"
        again = simulate.simulate_case(case, tools=("numbers", "synccheck"), timeout=1500)
        assert again["status"] == "simulated", again
        # Same kernel, same inputs: the simulated outputs must be the recorded ones, bit for bit.
        # A record made before outputs had a digest is held to its largest error instead, which
        # was computed in another process against expected outputs computed there (in float32,
        # for attention): a last-bit difference there moves it by about one float32 ulp.
        if "output_digest" in rec:
            assert again["output_digest"] == rec["output_digest"], (rec["case"], "the outputs changed")
        else:
            assert again["max_abs_error"] == pytest.approx(rec["max_abs_error"], rel=1e-3, abs=1e-6), \
                (rec["case"], again["max_abs_error"])
        assert again["tools"]["synccheck"]["verdict"] == rec["tools"]["synccheck"]["verdict"] == "clean"


def test_the_output_digest_names_the_bits_not_the_error():
    import numpy as np

    out = {"D": np.arange(12, dtype=np.float32).reshape(3, 4)}
    same = {"D": np.arange(12, dtype=np.float32).reshape(3, 4)}
    assert simulate.output_digest(out) == simulate.output_digest(same)
    one_bit = {"D": out["D"].copy()}
    one_bit["D"].view(np.uint32)[1, 1] ^= 1
    assert simulate.output_digest(one_bit) != simulate.output_digest(out)
    assert simulate.output_digest({"D": out["D"].reshape(4, 3)}) != simulate.output_digest(out)
    rec = simulate.judge(META, _tools(), EXPECTED, {"D": torch.ones(4, 4).numpy()})
    assert rec["output_digest"] == simulate.output_digest({"D": torch.ones(4, 4).numpy()})


def test_the_runs_of_a_day_merge_tool_by_tool(tmp_path):
    run = {"gpu": simulate.SIM_GPU, "arch": "sm_100a", "date": "2026-12-01",
           "simulator": "tirx-harness 0.1.2.post2", "tools": [], "sanitizer": []}
    base = {"chapter": "ch", "name": "k", "kind": "check", "fingerprint": "f", "runs_on": ["sm_100a"]}
    a = dict(base, case="ch--k--check", status="simulated", max_abs_error=0.5, seconds=10,
             tools={"numbers": {"verdict": "match"}, "synccheck": {"verdict": "clean"}})
    b = dict(base, case="ch--k--check", status="failed", message="racecheck: data_race", seconds=5,
             tools={"racecheck": {"verdict": "error"}})
    (tmp_path / "a.json").write_text(json.dumps({"format": 2, "run": dict(run, tools=["numbers", "synccheck"]), "cases": [a]}))
    (tmp_path / "b.json").write_text(json.dumps({"format": 2, "run": dict(run, tools=["racecheck"]), "cases": [b]}))
    sim_records.merge_records([tmp_path / "a.json", tmp_path / "b.json"], tmp_path / "out.json")
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["run"]["tools"] == ["numbers", "synccheck", "racecheck"]
    (rec,) = out["cases"]
    assert sorted(rec["tools"]) == ["numbers", "racecheck", "synccheck"]
    assert rec["status"] == "failed" and rec["max_abs_error"] == 0.5, "a finding is never merged away"
    (tmp_path / "c.json").write_text(json.dumps({"format": 2, "run": dict(run, date="2026-12-02"), "cases": []}))
    with pytest.raises(ValueError, match="another simulator or date"):
        sim_records.merge_records([tmp_path / "a.json", tmp_path / "c.json"], tmp_path / "x.json")
