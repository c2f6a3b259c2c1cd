"""The helper package of the book: compile, report, check and time TIRx kernels."""

from . import layouts, plots, results, roofline, schedule
from .bench import Timing, bench
from .build import BLACKWELL, HOPPER, Kernel, build, lower, target
from .check import CheckError, CheckResult, NotRunError, check, compare, seeded, tolerance
from .export import set_chapter
from .hardware import B200, GPUS, H100, H200, gpu_for
from .signature import KernelCallError, Param
from .trace import Trace, trace

__all__ = [
    "B200", "BLACKWELL", "CheckError", "CheckResult", "GPUS", "H100", "H200", "HOPPER", "Kernel",
    "KernelCallError", "NotRunError", "Param", "Timing", "bench", "build", "check", "compare",
    "gpu_for", "layouts", "lower", "plots", "results", "roofline", "seeded", "set_chapter",
    "target", "tolerance", "schedule", "Trace", "trace",
]
