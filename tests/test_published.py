"""The published attention figures: quoted as their sources state them, converted once."""

from gpubook.facts import published


def test_rates_come_from_the_quoted_microseconds_and_the_books_flop_count():
    mha = published.fa4_figure("TIRx FA4", 32, causal=False)
    assert round(mha.tflops) == round(4 * 32 * 8192**2 * 128 / 776.499e-6 / 1e12) == 1416
    causal = published.fa4_figure("CuTe DSL FA4", 32, causal=True)
    assert round(causal.tflops) == 1267                      # half the FLOPs under the mask
    assert {f.kv_heads for f in published.FA4_FIGURES if not f.causal} == {32, 16, 8, 4}


def test_every_cell_names_its_kernel_and_the_causal_row_has_figures():
    full, causal = published.fa4_published_cell(False), published.fa4_published_cell(True)
    assert "FA4 in TIRx" in full and "FA4 in CuTe DSL" in full and "GQA" in full and "paper" in full
    assert "1,266" in causal and "1,267" in causal
    assert "f495258" in published.TIRX_KERNELS and "0251105a" in published.FLASH_ATTENTION


def test_the_fa3_figure_is_the_papers_d128_row_not_its_headline():
    assert "head dim 128" in published.FA3_PAPER and "no mask" in published.FA3_PAPER
    assert 640 <= published.FA3_PAPER_D128_TFLOPS <= 650 < published.FA3_PAPER_UP_TO_TFLOPS == 740
