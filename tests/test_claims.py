"""Every chapter that glues comparisons from its timings audits them against its table, and no
chapter compares two kernels through a ratio of their ratios to a baseline."""

import re
from pathlib import Path

import pytest

CHAPTERS = sorted((Path(__file__).resolve().parents[1] / "chapters").glob("*.md"))


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_a_chapter_that_keeps_a_ladder_audits_its_claims(path):
    text = path.read_text()
    if "gb.timings.Ladder(" not in text:
        return
    assert re.search(r"\.audit\(", text), f"{path.name} builds a Ladder but never calls audit()"
    assert "LAD.than(" in text or ".than(" in text


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_ratio_of_ratios(path):
    """A speed-up divided by another speed-up compares two kernels through a baseline that may
    have moved between their runs (appendix B): kernels are compared by their paired times."""
    text = path.read_text()
    bad = re.findall(r"(?:vs_cudnn|speedup)\([^)]*\)\s*/\s*(?:vs_cudnn|speedup)\(", text)
    assert not bad, f"{path.name}: {bad}"


def test_the_audit_is_what_fails_a_chapter():
    """The audit raises; a chapter that calls it cannot build past a contradicted claim."""
    from gpubook.book.timings import ClaimError, Ladder
    from gpubook.run.bench import Timing

    def t(name, ms):
        return Timing(name, "measured", gpu="NVIDIA H100", ms=ms, flops=1e12, samples=[ms * (1 + 0.001 * (i % 3))
                                                                                    for i in range(30)],
                      reps=[10, 10, 10], ladder_run="r")

    lad = Ladder({"a": t("a", 1.0), "b": t("b", 2.0)})
    assert "faster" in lad.than("a", "b")
    with pytest.raises(ClaimError):
        lad.audit([dict(lad.row("a"), rate=lad.rate("b")), dict(lad.row("b"), rate=lad.rate("a"))])
