"""The Runs-on badge logic of gpubook.sphinxext, on outputs written out by hand."""

from __future__ import annotations

import pytest

from gpubook.book.sphinxext import PageTiers

PORTABLE = '<div class="gpubook-report"><code>vadd: compiled for sm_100a (+sm_90a) · 12 regs</code></div>'
BLACKWELL = '<div class="gpubook-report"><code>gemm_tcgen05: compiled for sm_100a only · 90 regs</code></div>'
NOT_RUN = "NOT RUN vadd: compiled for sm_100a or sm_90a — not run: no GPU on this machine"
PASSED = "PASS vadd on NVIDIA B200 (sm_100a): max abs error 0"


def tiers(*outputs: str) -> PageTiers:
    t = PageTiers()
    for o in outputs:
        t.read(o)
    return t


@pytest.mark.parametrize(("outputs", "label"), [
    ((), "any machine"),
    ((PORTABLE,), "compile-only"),
    ((PORTABLE, NOT_RUN), "sm_90+"),
    ((BLACKWELL, NOT_RUN), "B200 only"),
    ((PORTABLE, BLACKWELL, NOT_RUN), "B200 only"),
    (('<div class="gpubook-report" data-kernel="k" data-runs-on="sm_100a sm_90a"><code>k</code></div>', NOT_RUN),
     "sm_90+"),
    (('<div class="gpubook-report" data-runs-on="sm_100a" data-kernel="k"><code>k</code></div>', NOT_RUN),
     "B200 only"),
])
def test_tier_of_a_page(outputs: tuple[str, ...], label: str) -> None:
    assert tiers(*outputs).tier()[1] == label


def test_a_mixed_page_names_the_blackwell_kernels() -> None:
    mod, _, why = tiers(PORTABLE, BLACKWELL, NOT_RUN).tier()
    assert "mixed" in mod and "gemm_tcgen05 needs a Blackwell B200" in why and "1 of the page's 2" in why


def test_the_build_note_says_what_ran() -> None:
    assert tiers(PORTABLE, NOT_RUN).build_note() == "This build: compiled only (no suitable GPU)"
    assert tiers(PORTABLE, PASSED).build_note() == "This build: checked on NVIDIA B200 (sm_100a)"
    assert tiers(PORTABLE).build_note() is None


def test_a_kernel_repeated_in_a_check_counts_once() -> None:
    t = tiers(PORTABLE, NOT_RUN + "\n  static facts: vadd: compiled for sm_100a (+sm_90a) · 12 regs")
    assert list(t.kernels) == ["vadd"]


def test_parallel_reading_takes_one_page_per_task_largest_first(tmp_path):
    from sphinx.util.parallel import make_chunks as sphinx_chunks

    from gpubook.book.sphinxext import longest_first

    (tmp_path / "chapters").mkdir()
    sizes = {"chapters/01-a": 10, "chapters/02-b": 500, "chapters/03-c": 40, "chapters/11B-d": 900, "index": 5}
    for name, n in sizes.items():
        (tmp_path / f"{name}.md").write_text("x" * n)
    names = sorted(sizes)
    chunks = longest_first(tmp_path)(names, 2)
    assert chunks == [["chapters/11B-d"], ["chapters/02-b"], ["chapters/03-c"], ["chapters/01-a"], ["index"]]
    # Sphinx's own split would put the two largest pages into the same process
    many = [f"chapters/{i:02d}" for i in range(18)]
    assert len(sphinx_chunks(many, 2)[0]) == 9
