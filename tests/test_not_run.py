"""A check that cannot run here leads with what did run: the newest replay of the same kernel (same
fingerprint), then says what this machine could not do; NOT RUN only when nothing is recorded."""

from __future__ import annotations

import json

import pytest
import torch

import gpubook as gb
from gpubook import export, results, runtime

import gpu_stubs
import kernels
from gpu_stubs import vadd  # noqa: F401 - fixtures

N = kernels.N


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch):
    gpu_stubs.pretend_no_gpu(monkeypatch)
    export.set_chapter("99-test")
    yield
    export.set_chapter("unknown")


def write_results(tmp_path, monkeypatch, cases, date="2026-11-30", gpu="NVIDIA H200"):
    doc = {"format": 2, "run": {"gpu": gpu, "arch": "sm_90a", "date": date, "torch": "2.11",
                                "sanitizer": ["memcheck", "racecheck"]}, "cases": cases}
    (tmp_path / f"{date}-h200.json").write_text(json.dumps(doc))
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)


def digest_of(vadd, stress=0, ref=None):
    """The case digest of `gb.check(vadd, args(), ref=add, stress=stress)`."""
    from gpubook.verify.check import prepare

    c = prepare(vadd, args(), ref or add, stress=stress)
    return gb.record.check_digest(vadd, c.args, c.expected, c.outputs, c.tols, c.stress, c.variants)


def record(vadd, check_stress=0, **kw):
    rec = {"case": "99-test--vadd--check", "chapter": "99-test", "name": "vadd", "kind": "check",
           "runs_on": ["sm_100a", "sm_90a"], "fingerprint": vadd.fingerprint, "status": "passed",
           "max_abs_error": 0.0, "max_rel_error": 0.0,
           "sanitizer": {"memcheck": "clean", "racecheck": "clean"},
           "case_digest": digest_of(vadd, check_stress), "toolchain": gb.record.toolchain_identity()}
    rec.update(kw)
    return rec


def args():
    return [gb.seeded((N,), seed=1), gb.seeded((N,), seed=2), torch.empty(N)]


def add(x, y, out):
    return x + y


def test_not_run_names_the_replay_of_the_same_kernel(vadd, tmp_path, monkeypatch):
    write_results(tmp_path, monkeypatch, [record(vadd)])
    res = gb.check(vadd, args(), ref=add)
    text = repr(res)
    lines = text.splitlines()
    assert lines[0] == ("PASSED vadd on an H200 (replay of 2026-11-30): max error 0 (exact), "
                        "memcheck and racecheck clean (appendix A, A-verification-matrix.html)")
    assert lines[1] == "  not run here: no GPU on this machine (compiled for sm_100a or sm_90a)"
    assert lines[2].startswith("  static facts: vadd: compiled for sm_100a (+sm_90a)")
    assert len(lines) == 3  # one static line, not the compile report again
    page = res._repr_html_()
    assert '<a href="A-verification-matrix.html">appendix A</a>' in page
    assert "PASSED vadd on an H200 (replay of 2026-11-30)" in page and "not run here" in page
    assert "PASSED vadd here" not in page and not res.passed


def test_not_run_shows_the_recorded_stress_result(vadd, tmp_path, monkeypatch):
    stress = {"launches": 2000, "failures": 0, "variants": 8, "first_failure": None}
    write_results(tmp_path, monkeypatch, [record(vadd, check_stress=2000, stress=stress)])
    text = repr(gb.check(vadd, args(), ref=add, stress=2000))
    assert text.startswith("PASSED vadd on an H200 (replay of 2026-11-30)")
    assert "memcheck and racecheck clean; stress: 2000 launches over 8 input variants, 0 failed" in text
    assert "not run either" not in text


def test_a_replay_of_a_different_script_does_not_count(vadd, tmp_path, monkeypatch):
    write_results(tmp_path, monkeypatch, [record(vadd, fingerprint="0123456789abcdef")])
    text = repr(gb.check(vadd, args(), ref=add))
    assert text.startswith("NOT RUN vadd: no GPU on this machine (compiled for sm_100a or sm_90a); "
                           "no record of this kernel yet")
    assert "PASSED" not in text and "passed on" not in text
    assert "appendix A" not in gb.check(vadd, args(), ref=add)._repr_html_()


def test_a_newer_failure_is_shown_instead_of_an_older_pass(vadd, tmp_path, monkeypatch):
    write_results(tmp_path, monkeypatch, [record(vadd)])
    failed = record(vadd, status="failed", max_abs_error=None, sanitizer=None,
                    message="vadd: out-of-bounds write: wrote 1 element after out (...)\nmore")
    doc = {"format": 2, "run": {"gpu": "NVIDIA H200", "arch": "sm_90a", "date": "2026-12-02"},
           "cases": [failed]}
    (tmp_path / "2026-12-02-h200.json").write_text(json.dumps(doc))
    text = repr(gb.check(vadd, args(), ref=add))
    assert text.startswith("FAILED vadd on an H200 (replay of 2026-12-02): vadd: out-of-bounds write: "
                           "wrote 1 element after out (...)")
    assert "PASSED" not in text and "2026-11-30" not in text


def test_the_reason_comes_from_the_runtime_probe(vadd, tmp_path, monkeypatch):
    write_results(tmp_path, monkeypatch, [])
    monkeypatch.setattr(runtime, "why_not_here", lambda runs_on: "the probe says so")
    text = repr(gb.check(vadd, args(), ref=add))
    assert text.startswith("NOT RUN vadd: the probe says so (compiled for sm_100a or sm_90a)")
    assert "B200" not in text.splitlines()[0]


def test_results_newest_ignores_cases_a_replay_could_not_run(vadd, tmp_path):
    doc = {"format": 2, "run": {"gpu": "NVIDIA H200", "arch": "sm_90a", "date": "2026-11-30"},
           "cases": [record(vadd, status="not runnable")]}
    (tmp_path / "r.json").write_text(json.dumps(doc))
    assert results.newest("vadd", directory=tmp_path) is None


@pytest.mark.parametrize("expect, status", [("race", "race found"), ("trap", "trapped")])
def test_a_broken_kernel_names_the_replay_that_judged_it(vadd, tmp_path, monkeypatch, expect, status):
    judged = record(vadd, status=status, max_abs_error=None, max_rel_error=None, expect=expect,
                    sanitizer={"memcheck": "clean", "racecheck": "1 error: Race reported ..."}
                    if expect == "race" else None)
    write_results(tmp_path, monkeypatch, [judged])
    lines = repr(gb.check(vadd, args(), ref=add, expect=expect)).splitlines()
    assert lines[0].startswith(f"{status.upper()} vadd on an H200 (replay of 2026-11-30), as expected")
    assert lines[1].startswith("  not run here: ") and f"to {expect}" in lines[1]
    write_results(tmp_path, monkeypatch, [dict(judged, status="failed", message="expected a race; racecheck "
                                              "reported no hazard")])
    text = repr(gb.check(vadd, args(), ref=add, expect=expect))
    assert text.startswith("FAILED vadd on an H200 (replay of 2026-11-30): expected a race")
    write_results(tmp_path, monkeypatch, [])
    text = repr(gb.check(vadd, args(), ref=add, expect=expect))
    assert text.startswith("NOT RUN vadd: ") and text.splitlines()[0].endswith("; no record of this kernel yet")



def test_a_replay_of_another_case_of_the_same_script_is_not_credited(vadd, tmp_path, monkeypatch):
    """Same kernel script, other inputs, tolerance or toolchain: a record of another case."""
    tc = gb.record.toolchain_identity()
    for other in (dict(case_digest=digest_of(vadd, stress=10)),            # other stress run
                  dict(toolchain=dict(tc, compiler="another compiler"))):  # other binary
        write_results(tmp_path, monkeypatch, [record(vadd, **other)])
        text = repr(gb.check(vadd, args(), ref=add))
        assert "replayed for another case (other inputs, tolerance, stress runs or toolchain), so not " \
               "this check: passed on an H200 (replay of 2026-11-30)" in text, other
        assert text.startswith("NOT RUN vadd: no GPU on this machine (compiled for sm_100a or sm_90a); "
                               "no replay of this very check yet"), other
        assert "PASSED" not in text
    # an older record of this very case wins over a newer one of another case
    write_results(tmp_path, monkeypatch, [record(vadd)])
    doc = {"format": 2, "run": {"gpu": "NVIDIA H200", "arch": "sm_90a", "date": "2026-12-02"},
           "cases": [record(vadd, case_digest=digest_of(vadd, stress=10))]}
    (tmp_path / "2026-12-02-h200.json").write_text(json.dumps(doc))
    assert repr(gb.check(vadd, args(), ref=add)).startswith("PASSED vadd on an H200 (replay of 2026-11-30)")


def test_a_record_written_before_cases_had_digests_says_so(vadd, tmp_path, monkeypatch):
    legacy = {k: v for k, v in record(vadd).items() if k not in ("case_digest", "toolchain")}
    write_results(tmp_path, monkeypatch, [legacy])
    text = repr(gb.check(vadd, args(), ref=add))
    assert text.startswith("PASSED vadd on an H200 (replay of 2026-11-30)")
    assert "recorded before results named the inputs, tolerance and toolchain of their case" in text


def test_the_case_digest_follows_inputs_tolerance_and_stress_not_the_reference_rounding(vadd):
    from gpubook.verify.check import prepare

    base = digest_of(vadd)
    assert digest_of(vadd) == base
    assert digest_of(vadd, stress=5) != base
    c = prepare(vadd, args(), add, atol=1e-3)
    assert gb.record.check_digest(vadd, c.args, c.expected, c.outputs, c.tols) != base
    other = args()
    other[0][0] += 1
    c = prepare(vadd, other, add)
    assert gb.record.check_digest(vadd, c.args, c.expected, c.outputs, c.tols) != base
    # expected outputs computed on another CPU may round differently: they are not part of it
    c = prepare(vadd, args(), lambda x, y, out: (x + y) * (1 + 2**-23))
    assert gb.record.check_digest(vadd, c.args, c.expected, c.outputs, c.tols) == base


def test_a_check_takes_one_tolerance_for_every_output_or_one_per_output(vadd):
    from gpubook.verify.check import prepare

    assert prepare(vadd, args(), add, rtol=0, atol=1e-3).tols == [(0, 1e-3)]
    assert prepare(vadd, args(), add, rtol=[0.5], atol=(2e-3,)).tols == [(0.5, 2e-3)]
    with pytest.raises(ValueError, match="2 values for 1 outputs"):
        prepare(vadd, args(), add, atol=(1e-3, 1e-4))


def test_a_replayed_error_is_a_fraction_of_the_whole_allowance(vadd, tmp_path, monkeypatch):
    """A record with the error over its allowance prints that fraction; an older one, without it,
    prints the absolute error beside both atol and rtol, never beside atol alone."""
    write_results(tmp_path, monkeypatch, [record(vadd, max_abs_error=2e-5, max_error_over_allowed=0.31)])
    first = repr(gb.check(vadd, args(), ref=add)).splitlines()[0]
    assert first.startswith("PASSED vadd on an H200 (replay of 2026-11-30): max error 31% of the allowance,")
    assert "2e-05" not in first
    write_results(tmp_path, monkeypatch, [record(vadd, max_abs_error=2e-5)])
    first = repr(gb.check(vadd, args(), ref=add)).splitlines()[0]
    assert "max abs error 2e-05 (allowance atol 1e-05 + rtol 1.3e-06·|ref|)" in first


def test_a_replay_of_another_case_is_linked_where_it_is_cited(vadd, tmp_path, monkeypatch):
    write_results(tmp_path, monkeypatch, [record(vadd, case_digest=digest_of(vadd, stress=10))])
    lines = repr(gb.check(vadd, args(), ref=add)).splitlines()
    cited = [ln for ln in lines if "replayed for another case" in ln]
    assert len(cited) == 1 and cited[0].endswith("(appendix A, A-verification-matrix.html)")
    assert sum("appendix A" in ln for ln in lines) == 1


def test_a_replay_without_the_stress_run_says_the_stress_run_is_missing(vadd, tmp_path, monkeypatch):
    """A pass recorded without the planned stress launches leads, and the missing stress run is
    said as such, not as 'not run either'."""
    write_results(tmp_path, monkeypatch, [dict(record(vadd, check_stress=2000), stress=None)])
    text = repr(gb.check(vadd, args(), ref=add, stress=2000))
    assert text.startswith("PASSED vadd on an H200 (replay of 2026-11-30)")
    assert "stress test of 2000 launches: not in the replay's record, and not run here" in text
