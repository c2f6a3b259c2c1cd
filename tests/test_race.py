"""Kernels expected to race: judged by compute-sanitizer's racecheck in the replay, never by a
comparison; and the trap reports the replay keeps."""

from __future__ import annotations

import json

import pytest

import gpubook as gb
from gpubook import matrix, replay, runtime

# What `compute-sanitizer --tool racecheck` prints for one launch, in its default (analysis)
# report mode: a race between lanes of one warp is a warning, between warps an error.
RACY = """\
========= COMPUTE-SANITIZER
========= Warning: Race reported between Write access at warp_sums_racy_kernel+0x1b0
=========     and Read access at warp_sums_racy_kernel+0x2e0 [3968 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (0 errors, 1 warning)
"""
RACY_BETWEEN_WARPS = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at block_sum_kernel+0x170 in /tmp/tvm/kernel.cu:31:block_sum_kernel
=========     and Read access at block_sum_kernel+0x250 in /tmp/tvm/kernel.cu:36:block_sum_kernel [124 hazards]
=========
========= Error: Race reported between Write access at block_sum_kernel+0x170 in /tmp/tvm/kernel.cu:31:block_sum_kernel
=========     and Read access at block_sum_kernel+0x250 in /tmp/tvm/kernel.cu:36:block_sum_kernel [124 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""
HAZARD_MODE = """\
========= COMPUTE-SANITIZER
========= Error: Potential RAW hazard detected at __shared__ 0x40 in block (3,0,0) :
=========     Write Thread (1,0,0) at warp_sums_racy_kernel+0x1b0
=========     Read Thread (0,0,0) at warp_sums_racy_kernel+0x2e0
=========     Current Value : 0
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""
CLEAN = """\
========= COMPUTE-SANITIZER
========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)
"""
CRASHED = """\
========= COMPUTE-SANITIZER
Traceback (most recent call last):
RuntimeError: CUDA error: an illegal memory access was encountered
========= Target application returned an error
"""
META = {"case": "D--warp_sums_racy--check", "chapter": "D-debugging-async", "name": "warp_sums_racy",
        "kind": "check", "runs_on": ["sm_100a", "sm_90a"], "fingerprint": "f", "expect": "race",
        "expect_message": None}
PASSED = {"status": "passed", "max_abs_error": 0.0, "max_rel_error": 0.0}
WRONG = {"status": "failed", "message": "warp_sums_racy: 3 of 128 elements differ from the reference"}


@pytest.mark.parametrize("plain, sanitizer, pattern, status", [
    (PASSED, RACY, None, "race found"),                 # right values, and racecheck saw the race
    (WRONG, RACY, None, "race found"),                  # the comparison decides nothing
    (PASSED, RACY_BETWEEN_WARPS, r"Write access .* and Read access", "race found"),
    (PASSED, HAZARD_MODE, r"RAW hazard", "race found"),
    (PASSED, CLEAN, None, "failed"),                    # racecheck clean: the race was not found
    (WRONG, CLEAN, None, "failed"),
    (PASSED, RACY, r"Read access .* and Write access", "failed"),  # a hazard, not the expected one
    (PASSED, CRASHED, None, "error"),                   # racecheck never reached its summary
])
def test_a_race_case_passes_only_when_racecheck_reports_the_hazard(plain, sanitizer, pattern, status):
    res = replay.judge_race(dict(META, expect_message=pattern), plain, sanitizer,
                            finished="SUMMARY" in sanitizer)
    assert res["status"] == status, res["message"]
    assert res["expect"] == "race"
    if status == "race found":
        assert replay.exit_code([res]) == 0
        assert "RACECHECK SUMMARY" in res["message"] and "comparison of one launch" in res["message"]
    else:
        assert replay.exit_code([res]) == 1


def test_a_race_report_is_kept_whole_and_once():
    res = replay.judge_race(META, PASSED, RACY_BETWEEN_WARPS)
    lines = res["message"].splitlines()
    race = [ln for ln in lines if "Race reported" in ln]
    assert len(race) == 1  # the two identical reports are kept once
    assert race[0].startswith("Error: Race reported between Write access at block_sum_kernel+0x170")
    assert race[0].endswith("and Read access at block_sum_kernel+0x250 in /tmp/tvm/kernel.cu:36:block_sum_kernel [124 hazards]")
    assert "1 hazard displayed (1 error, 0 warnings)" in res["message"]


def test_without_racecheck_a_race_case_is_not_judged_and_never_passes():
    for why in ("the replay ran without --sanitize", "compute-sanitizer is not on PATH"):
        res = replay.judge_race(META, PASSED, None, why_not=why)
        assert res["status"] == "not judged" and why in res["message"]
        assert "comparison of one launch: passed" in res["message"]
        assert res["status"] not in ("passed", "race found")
    # neither a failure nor a pass: the replay's exit code and the matrix say so
    assert replay.exit_code([res]) == 0
    row = matrix.rows_from([{"run": {"gpu": "NVIDIA H200", "arch": "sm_90a", "date": "2026-12-01"},
                             "cases": [res]}])[0]
    assert not row["passed_on"] and "not judged" in matrix.tier(row)


def test_the_matrix_and_exit_code_of_a_race_found():
    res = replay.judge_race(META, PASSED, RACY)
    res["sanitizer"] = {"memcheck": "clean", "racecheck": "1 warning: Warning: Race reported between ..."}
    assert replay.exit_code([res]) == 0  # racecheck's complaint is what this case asks for
    row = matrix.rows_from([{"run": {"gpu": "NVIDIA H200", "arch": "sm_90a", "date": "2026-12-01"},
                             "cases": [res]}])[0]
    assert matrix.tier(row) == "racecheck found the race as expected on H200 (sm_90)"
    res["sanitizer"]["memcheck"] = "2 errors: Invalid __shared__ write of size 4 bytes"
    assert replay.exit_code([res]) == 1  # memcheck still judges a racy kernel


def test_an_ordinary_case_with_a_racecheck_hazard_still_fails_the_replay():
    rec = {"status": "passed", "sanitizer": {"memcheck": "clean", "racecheck": "1 error: Error: Race reported between ..."}}
    assert replay.exit_code([rec]) == 1


def test_sanitizer_verdicts_read_racecheck_summaries():
    assert replay.sanitizer_verdict(CLEAN, PASSED, False) == "clean"
    assert replay.sanitizer_verdict(RACY, PASSED, False).startswith("1 warning: Warning: Race reported")
    assert replay.sanitizer_verdict(RACY_BETWEEN_WARPS, PASSED, False).startswith("1 error: Error: Race reported")
    both = RACY_BETWEEN_WARPS.replace("1 hazard displayed (1 error, 0 warnings)",
                                      "4 hazards displayed (1 error, 3 warnings)")
    assert replay.sanitizer_verdict(both, PASSED, False).startswith("1 error and 3 warnings: Error: Race")
    memcheck = ("========= Invalid __shared__ write of size 4 bytes\n"
                "========= ERROR SUMMARY: 2 errors\n")
    assert replay.sanitizer_verdict(memcheck, PASSED, False) == "2 errors: Invalid __shared__ write of size 4 bytes"
    assert replay.sanitizer_verdict(RACY, PASSED, True) == "timeout"
    assert replay.sanitizer_verdict(CRASHED, None, False).startswith("did not finish")


def test_check_never_runs_a_kernel_expected_to_race_and_exports_the_expectation(tmp_path, monkeypatch):
    import torch
    from kernels import NT, vadd_tail

    monkeypatch.setattr(runtime, "why_not_here", lambda runs_on: None)   # even where a GPU could run it
    monkeypatch.setattr(runtime, "load", lambda *a: pytest.fail("a racy kernel was run without racecheck"))
    monkeypatch.setenv("GPUBOOK_EXPORT_DIR", str(tmp_path))
    monkeypatch.setenv("GPUBOOK_STRICT", "1")
    k = gb.build(vadd_tail, name="vadd_race")
    args = [gb.seeded((NT,), seed=1), gb.seeded((NT,), seed=2), torch.empty(NT)]
    res = gb.check(k, args, ref=lambda x, y, o: x + y, expect="race", expect_output="Race reported")
    assert not res.passed and "expected to race" in res.reason and "racecheck" in res.reason
    assert "PASS" not in repr(res)
    case = json.loads(next(tmp_path.glob("cases/*/case.json")).read_text())
    assert case["expect"] == "race" and case["expect_message"] == "Race reported"


# A trap in a ring: every consumer warp reports the same barrier; the producer's one line
# is the one that tells two bugs apart, and must survive.
def _report(barrier, parity, block, thread):
    return (f"gpubook: mbarrier wait timed out: barrier {barrier} at shared 0x4{barrier:02x} waiting for "
            f"phase parity {parity}; block ({block},0,0) thread ({thread},0,0), 32 waiting lanes, "
            f"309657 polls in 2001615264 ns")


def test_trap_reports_keep_every_distinct_barrier_and_count_the_repeats():
    consumers = [_report(0, 0, b, t) for b in range(4) for t in (0, 32, 64, 96)]
    producer = [_report(10, 0, b, 128) for b in range(4)]
    out = "\n".join(consumers[:9] + [producer[0]] + consumers[9:] + producer[1:]) \
        + "\nRuntimeError: CUDA error: unspecified launch failure\n"
    meta = dict(META, expect="trap", expect_message=gb.mbarrier.REPORT_PATTERN)
    res = replay.judge_trap(meta, None, out, False, 120)
    assert res["status"] == "trapped"
    lines = res["message"].splitlines()
    assert lines[0] == consumers[0] + "  [16 reports]"
    assert lines[1] == producer[0] + "  [4 reports]"
    assert "unspecified launch failure" in lines[2] and len(lines) == 3


def test_trap_reports_are_bounded():
    out = "\n".join(_report(b, b % 2, 0, 0) for b in range(40)) + "\nCUDA error: unspecified launch failure"
    meta = dict(META, expect="trap", expect_message=gb.mbarrier.REPORT_PATTERN)
    lines = replay.judge_trap(meta, None, out, False, 120)["message"].splitlines()
    assert len(lines) == replay.MAX_REPORT_LINES + 2
    assert lines[replay.MAX_REPORT_LINES] == "… 24 more distinct reports (24 lines) left out"
    assert all("[" not in ln for ln in lines[:replay.MAX_REPORT_LINES])  # each reported once
