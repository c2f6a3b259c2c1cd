"""The helper package of the book: compile, run, verify and model TIRx kernels, and draw the book.

Layers, each importing only those below it (tests/test_layers.py checks the import graph):

    book      sphinxext, reading, notebook_download, kernel_links, tables (the build), lessons, the GEMM ladder as the chapters show it (gemm, ladder, diffs, gemm_hopper),
              timings (what a chapter may say of its timed kernels)
    models    roofline, schedule, layouts, plots, ladder_plot, fa4, fa4_timeline, fa4_protocol, gemm_model, pipeline_model, lowprec
    verify    check, compare, coverage, describe, export, replay, verdicts, simulate, sim_worker, matrix,
              appendix, manifest, gemm_check, static
    run       runtime, guard, bench, timer, protocol, environment, baselines, outcheck, clocks, trace, record, pack
    compile   toolchain, build, hooks, report, signature, lowering, mbarrier, tmem, lint, ptxflow
    facts     hardware, numbers, results, paths, stats, published, sources

models and verify do not import each other. Chapters use `import gpubook as gb` (gb.build,
gb.check, gb.bench, gb.tmem, ...) and `from gpubook import lint, gemm as gg, ...`: the modules
below are bound here by their short names.
"""

from .facts import hardware, numbers, paths, published, results, sources, stats
from .compile import (build as _build_module, lint, lowering, mbarrier, report, signature, tmem, toolchain,
                      txbytes)
from .run import (baselines, bench as _bench_module, clocks, environment, guard, outcheck, pack, protocol,
                  record, runtime, timer, trace as _trace_module)
from .verify import (appendix, check as _check_module, compare as _compare_module, coverage, describe, export,
                     gemm_check, matrix, replay, simulate, static, verdicts)
from .models import fa4, fa4_protocol, fa4_timeline, gemm_model, layouts, lowprec, pipeline_model, plots, roofline, schedule
from .book import gemm, gemm_hopper, headline, ladder, lessons, timings

from .compile import parsing as _parsing
from .compile.build import BLACKWELL, HOPPER, Kernel, build, lower, target
from .compile.signature import KernelCallError, Param
from .facts.hardware import B200, GPUS, H100, H200, gpu_for
from .run.bench import Timing, bench
from .run.outcheck import OutputMismatch
from .run.record import set_chapter
from .run.trace import Trace, trace
from .verify.check import CheckResult, NotRunError, check
from .verify.compare import CheckError, compare, seeded, tolerance
from .book.lessons import Refusal, explain_failure

_parsing.arm()  # TIRx's parser finds itself without building frame records (compile/parsing.py)

__all__ = [
    "B200", "BLACKWELL", "CheckError", "CheckResult", "GPUS", "H100", "H200", "HOPPER", "Kernel",
    "KernelCallError", "NotRunError", "OutputMismatch", "Param", "Refusal", "Timing", "Trace", "bench", "build", "check",
    "compare", "coverage", "explain_failure", "gemm", "gpu_for", "guard", "hardware", "layouts", "lessons",
    "lint", "lower", "mbarrier", "plots", "report", "results", "roofline", "schedule", "seeded",
    "set_chapter", "target", "tmem", "tolerance", "trace",
]


def __getattr__(name: str):
    """`gpubook.sphinxext`, imported on first use: it needs Sphinx and docutils, which a GPU host
    that only replays cases does not have (python -m gpubook replay imports this package)."""
    if name == "sphinxext":
        from .book import sphinxext

        return sphinxext
    raise AttributeError(f"module 'gpubook' has no attribute {name!r}")
