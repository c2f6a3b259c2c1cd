"""Published attention figures the chapters compare with, each with its source and commit.

The figures are quoted as their sources state them (microseconds per call at one shape) and
turned into TFLOP/s here, with the FLOP count the book uses everywhere (4 · B · H · S² · d, half
of it under a causal mask), so that no rate is typed by hand. None of them is measured here.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import sources as _src

FA4_SHAPE = dict(batch=1, heads=32, seqlen=8192, head_dim=128, dtype="float16")

TIRX_KERNELS = ("mlc-ai/TIRx-kernels, commit f495258, tirx_kernels/bench_suite/baseline.md "
                "(NVIDIA B200, fp16, d = 128, B = 1, H = 32, S = 8192)")
FA4_PAPER = ("FlashAttention-4, arXiv 2603.05451: forward pass up to 1613 TFLOP/s (71 % of peak), "
             "BF16, B200")
FA4_PAPER_TFLOPS = 1613.0
FLASH_ATTENTION = "Dao-AILab/flash-attention, commit 0251105a2fb19d2957484b7f023cd8c115286ced"
# where each of them can be read: a chapter prints the text above as the label of its link
TIRX_KERNELS_LINK = _src.Source(TIRX_KERNELS, _src.TIRX_KERNELS_BASELINE.url)
FA4_PAPER_LINK = _src.Source(FA4_PAPER, _src.FA4_PAPER.url)
FLASH_ATTENTION_LINK = _src.Source(
    FLASH_ATTENTION, "https://github.com/Dao-AILab/flash-attention/tree/0251105a2fb19d2957484b7f023cd8c115286ced")

# FlashAttention-3 (Shah et al., arXiv 2407.08608), figure 5: forward pass, FP16/BF16, on an H100
# 80GB SXM5, batch · length = 16k and heads · head dim = 2048. At head dim 128 without a mask its
# rate rises with the length to 648 TFLOP/s at 16k; the abstract's "up to 740 TFLOPs/s" is its
# head dim 256 figure, not a d = 128 one.
FA3_PAPER = ("FlashAttention-3, arXiv 2407.08608, figure 5: forward, FP16/BF16, H100 80GB SXM5, "
             "head dim 128, no mask, sequence length 16k")
FA3_PAPER_LINK = _src.Source(FA3_PAPER, _src.FA3_PAPER.url)
FA3_PAPER_D128_TFLOPS = 648.0
FA3_PAPER_UP_TO_TFLOPS = 740.0     # the abstract's figure, at head dim 256


@dataclass(frozen=True)
class Figure:
    kernel: str        # "TIRx FA4" or "CuTe DSL FA4"
    kv_heads: int      # 32 = multi-head attention; fewer = GQA
    causal: bool
    us: float          # microseconds per call, as published

    @property
    def tflops(self) -> float:
        s = FA4_SHAPE
        flops = 4 * s["batch"] * s["heads"] * s["seqlen"] ** 2 * s["head_dim"] / (2 if self.causal else 1)
        return flops / (self.us * 1e-6) / 1e12


# baseline.md's rows at FA4_SHAPE: the TIRx kernel and the CuTe DSL kernel it is benchmarked
# against ("flashattn_sm100"), both measured in the same run.
FA4_FIGURES = (
    Figure("TIRx FA4", 32, False, 776.499), Figure("CuTe DSL FA4", 32, False, 784.83),
    Figure("TIRx FA4", 16, False, 780.78), Figure("CuTe DSL FA4", 16, False, 779.73),
    Figure("TIRx FA4", 8, False, 766.17), Figure("CuTe DSL FA4", 8, False, 773.26),
    Figure("TIRx FA4", 4, False, 758.42), Figure("CuTe DSL FA4", 4, False, 761.17),
    Figure("TIRx FA4", 32, True, 434.38), Figure("CuTe DSL FA4", 32, True, 433.81),
)


def fa4_figure(kernel: str, kv_heads: int, causal: bool) -> Figure:
    """The published figure of `kernel` at FA4_SHAPE with `kv_heads` KV heads."""
    for f in FA4_FIGURES:
        if (f.kernel, f.kv_heads, f.causal) == (kernel, kv_heads, causal):
            return f
    raise KeyError(f"no published figure for {kernel}, kv_heads={kv_heads}, causal={causal}")


def fa4_published_cell(causal: bool) -> str:
    """The table cell of published FA4 rates at FA4_SHAPE, multi-head attention first."""
    tirx, cute = fa4_figure("TIRx FA4", 32, causal), fa4_figure("CuTe DSL FA4", 32, causal)
    cell = f"{tirx.tflops:,.0f} (FA4 in TIRx); {cute.tflops:,.0f} (FA4 in CuTe DSL)"
    if not causal:
        gqa = [f.tflops for f in FA4_FIGURES if f.kernel == "TIRx FA4" and f.kv_heads < 32]
        cell += f"; {min(gqa):,.0f}–{max(gqa):,.0f} with GQA (TIRx); up to {FA4_PAPER_TFLOPS:,.0f} (FA4 paper, BF16)"
    return cell


def sources_markdown() -> str:
    """Every published source of this module as a Markdown link, one per line of a list."""
    return "\n".join(f"- {s.markdown()}" for s in (TIRX_KERNELS_LINK, FA4_PAPER_LINK, FLASH_ATTENTION_LINK,
                                                     FA3_PAPER_LINK))
