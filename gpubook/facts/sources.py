"""Where the book's quoted facts come from: each source named and linked.

A chapter that prints a source prints it as a Markdown link (`Source.markdown`), so that the
reader can open it from the page. Every address is the publisher's own (NVIDIA's documentation,
arXiv, the DOI resolver, a repository at the commit the figure was read from).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    label: str   # what the page shows
    url: str     # where it leads

    def markdown(self) -> str:
        return f"[{self.label}]({self.url})"


def markdown_list(sources: tuple[Source, ...] | list[Source], sep: str = "; ") -> str:
    """Several sources as links, in one line."""
    return sep.join(s.markdown() for s in sources)


# NVIDIA's documentation
PTX_ISA = Source("PTX ISA", "https://docs.nvidia.com/cuda/parallel-thread-execution/index.html")
CUDA_GUIDE = Source("CUDA C++ Programming Guide",
                    "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html")
CUDA_BEST_PRACTICES = Source("CUDA C++ Best Practices Guide",
                             "https://docs.nvidia.com/cuda/cuda-c-best-practices-guide/index.html")
TENSOR_MAP_API = Source("CUDA Driver API, tensor map objects",
                        "https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TENSOR__MEMORY.html")
COMPUTE_SANITIZER = Source("Compute Sanitizer",
                           "https://docs.nvidia.com/compute-sanitizer/ComputeSanitizer/index.html")
NSIGHT_COMPUTE = Source("Nsight Compute profiling guide",
                        "https://docs.nvidia.com/nsight-compute/ProfilingGuide/index.html")

# papers
FA4_PAPER = Source("FlashAttention-4, arXiv 2603.05451", "https://arxiv.org/abs/2603.05451")
FA3_PAPER = Source("FlashAttention-3, arXiv 2407.08608", "https://arxiv.org/abs/2407.08608")
FLASH_ATTENTION_PAPER = Source("FlashAttention, arXiv 2205.14135", "https://arxiv.org/abs/2205.14135")
FLASH_ATTENTION_2_PAPER = Source("FlashAttention-2, arXiv 2307.08691", "https://arxiv.org/abs/2307.08691")
ONLINE_SOFTMAX_PAPER = Source("Online normalizer calculation for softmax, arXiv 1805.02867",
                              "https://arxiv.org/abs/1805.02867")
ROOFLINE_PAPER = Source("Roofline, CACM 52(4)", "https://doi.org/10.1145/1498765.1498785")
STREAM_K = Source("Stream-K, arXiv 2301.03598", "https://arxiv.org/abs/2301.03598")
AXE = Source("Axe layouts, arXiv 2601.19092", "https://arxiv.org/abs/2601.19092")
DEEPSEEK_V3 = Source("DeepSeek-V3 technical report, arXiv 2412.19437", "https://arxiv.org/abs/2412.19437")
OCP_MX = Source("OCP Microscaling Formats (MX) v1.0",
                "https://www.opencompute.org/documents/ocp-microscaling-formats-mx-v1-0-spec-final-pdf")

# repositories, at the commit a figure was read from where the book names one
ML_ENGINEERING = Source("stas00/ml-engineering, compute/accelerator/README.md",
                        "https://github.com/stas00/ml-engineering/blob/b9e29720eebd4aa946fa9678975385efbc90a777/"
                        "compute/accelerator/README.md")
FLASH_ATTENTION_REPO = Source("Dao-AILab/flash-attention", "https://github.com/Dao-AILab/flash-attention")
FLASH_ATTENTION_BENCH = Source("Dao-AILab/flash-attention, benchmarks/benchmark_attn.py",
                               "https://github.com/Dao-AILab/flash-attention/blob/"
                               "8c348fd79f423923710cb5a949c8e79f6aa29f7f/benchmarks/benchmark_attn.py")
TIRX_KERNELS_BASELINE = Source("mlc-ai/TIRx-kernels, bench_suite/baseline.md (commit f495258)",
                               "https://github.com/mlc-ai/TIRx-kernels/blob/f495258/tirx_kernels/bench_suite/baseline.md")
MLSYS_BOOK = Source("mlc-ai, Modern GPU Programming for MLSys", "https://mlc.ai/modern-gpu-programming-for-mlsys/")
MLSYS_REPO = Source("mlc-ai/modern-gpu-programming-for-mlsys (commit 0fdad07)",
                    "https://github.com/mlc-ai/modern-gpu-programming-for-mlsys/tree/0fdad07")
DEEPGEMM = Source("deepseek-ai/DeepGEMM", "https://github.com/deepseek-ai/DeepGEMM")
CUTLASS = Source("NVIDIA/cutlass", "https://github.com/NVIDIA/cutlass")
