"""gpubook.verify.coverage: each property fails on a shape too small for it, by how much, and
holds on one large enough; a shape kept short must name its reason, and lose it once covered."""

import pytest
import torch

from gpubook.verify import coverage as cov
from gpubook.verify.compare import seeded


def test_ring_needs_two_refills_of_every_slot():
    with pytest.raises(cov.CoverageError, match=r"K-tiles >= 2 \* STAGES \+ 1 = 9, 6 short"):
        cov.ring(3, 4)                        # chapter 10H's old K = 192 against 4 stages
    with pytest.raises(cov.CoverageError, match="= 13, 9 short"):
        cov.ring(4, 6)
    with pytest.raises(cov.CoverageError, match="1 short"):
        cov.ring(8, 4)
    assert "both parities flip" in cov.ring(9, 4)
    with pytest.raises(cov.CoverageError, match="does not wrap the ring"):   # the line says what is untested
        cov.ring(4, 4)
    with pytest.raises(cov.CoverageError, match="wraps only once"):
        cov.ring(8, 4)
    assert "slot 0 filled 3 times" in cov.ring(9, 4)


def test_rounds_needs_three_tiles_for_every_cta():
    with pytest.raises(cov.CoverageError, match="the last gets 2: at most 4 CTAs, or >= 15 tiles"):
        cov.rounds(14, 5)
    with pytest.raises(cov.CoverageError, match="the last gets 1"):
        cov.rounds(4, 3)
    assert "3-4 per CTA" in cov.rounds(16, 5)
    assert "4 tiles over 1 CTA, 4 per CTA" in cov.rounds(4, 1)


def test_kv_blocks_needs_three():
    with pytest.raises(cov.CoverageError, match=r"seqlen > 128, 92 short"):
        cov.kv_blocks(37, 64)
    with pytest.raises(cov.CoverageError, match="1 short"):
        cov.kv_blocks(128, 64)
    assert "the last holds 1" in cov.kv_blocks(129, 64)


def test_short_names_its_reason_and_loses_it_when_covered():
    line = cov.ring(4, 6, short="a longer K costs 6 minutes of simulation")
    assert "4 short" not in line and "9 short" in line and "6 minutes" in line
    assert line.startswith("ring coverage: 4 K-tiles over 6 stages, slot 0 filled once — short of coverage: "
                           "the check's K does not wrap the ring, so no slot is reused")
    with pytest.raises(cov.CoverageError, match="drop the reason"):
        cov.ring(13, 6, short="no longer true")
    with pytest.raises(cov.CoverageError, match="drop the reason"):
        cov.kv_blocks(200, 64, short="no longer true")


def _qk(seqlen, heads=2, kv_heads=1, d=64, dtype="float16", seed=1):
    return (seeded((1, heads, seqlen, d), dtype, seed=seed),
            seeded((1, kv_heads, seqlen, d), dtype, seed=seed + 1))


@pytest.mark.parametrize("causal", [False, True])
def test_late_max_needs_a_planted_logit(causal):
    q, k = _qk(180)
    case = dict(seqlen=180, q=q, k=k, causal=causal)
    assert cov.late_rise(q, k, 64, causal) < cov.MIN_RISE      # seeded inputs: small late rises only
    with pytest.raises(cov.CoverageError, match="rises late enough"):
        cov.attention([case], 64)
    row, key = cov.plant_late_max(q, k)
    assert (row, key) == (179, 179)
    assert cov.late_rise(q, k, 64, causal) >= cov.MIN_RISE
    assert "raises a row max" in cov.attention([case], 64)


def test_late_max_ignores_the_first_two_blocks():
    q, k = _qk(180)
    k[0, 0, 5] = q[0, 0, 179].float().sign().to(k.dtype)         # the max, but in block 0
    assert cov.late_rise(q, k, 64) < cov.MIN_RISE


def test_attention_needs_a_ragged_case():
    q, k = _qk(192)
    cov.plant_late_max(q, k)
    with pytest.raises(cov.CoverageError, match="ragged"):
        cov.attention([dict(seqlen=192, q=q, k=k)], 64)
    line = cov.attention([dict(seqlen=192, q=q, k=k)], 64, short="whole blocks only")
    assert "ragged" in line and "whole blocks only" in line and "rises late" not in line
    q2, k2 = _qk(130)
    assert "seqlen [130]" in cov.attention([dict(seqlen=192, q=q, k=k), dict(seqlen=130, q=q2, k=k2)], 64)


def test_late_rise_reads_gqa_heads():
    q, k = _qk(200, heads=4, kv_heads=1)
    cov.plant_late_max(q, k)                                      # query head 0 reads kv head 0
    s = cov._logits(q, k)
    assert s.shape == (1, 4, 200, 200)
    assert torch.argmax(s[0, 0, 199]).item() == 199


def test_kept_short_says_the_reason_only_where_a_case_falls_short():
    assert cov.kept_short(cov.ring, 13, 6, reason="slow") == cov.ring(13, 6)
    assert "= 13, 9 short" in cov.kept_short(cov.ring, 4, 6, reason="slow")
    assert cov.kept_short(cov.ring, 4, 6, reason="slow").endswith("; kept short on purpose: slow")
    with pytest.raises(ValueError):
        cov.kept_short(cov.ring, 0, 6, reason="slow")


def test_the_cost_of_a_simulation_comes_from_the_records(tmp_path):
    import json

    from gpubook.verify import coverage

    run = {"gpu": "NumSim (CPU)", "arch": "sm_100a", "date": "2026-01-01", "simulator": "tirx-harness x"}
    cases = [{"case": f"ch--{n}--check", "chapter": "ch", "name": n, "kind": "check", "status": "simulated",
              "seconds": s} for n, s in (("gemm_v8_a", 19.2), ("gemm_v8_b", 164.6), ("other", 999.0))]
    (tmp_path / "2026-01-01-numsim.json").write_text(json.dumps({"format": 2, "run": run, "cases": cases}))
    assert coverage.sim_seconds("ch", r"^gemm_v8_", directory=tmp_path) == "19–165 s"
    assert coverage.sim_seconds("ch", r"^gemm_v8_a", directory=tmp_path) == "19 s"
    with pytest.raises(coverage.CoverageError, match="no simulation"):
        coverage.sim_seconds("ch", r"^gemm_v9_", directory=tmp_path)
