"""The helper package of the book: compile, report, check and time TIRx kernels."""

from .bench import Timing, bench
from .build import BLACKWELL, HOPPER, Kernel, build, lower, target
from .check import CheckError, CheckResult, NotRunError, check, compare, seeded, tolerance
from .export import set_chapter
from . import layouts
from .hardware import B200, GPUS, H100, H200, gpu_for
from .signature import KernelCallError, Param
from . import plots, results, roofline

__all__ = [
    "CheckError", "CheckResult", "NotRunError", "Timing", "bench", "check", "compare", "seeded",
    "set_chapter", "tolerance", "B200", "BLACKWELL", "GPUS", "H100", "H200", "HOPPER", "Kernel", "KernelCallError",
    "Param", "build", "gpu_for", "lower", "target",
]
