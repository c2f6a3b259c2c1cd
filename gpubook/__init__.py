"""The helper package of the book: compile, report, check and time TIRx kernels."""

from . import gemm, guard, layouts, lessons, mbarrier, plots, results, roofline, schedule, tmem
from .bench import Timing, bench
from .build import BLACKWELL, HOPPER, Kernel, build, lower, target
from .check import CheckError, CheckResult, NotRunError, check, compare, seeded, tolerance
from .export import set_chapter
from .hardware import B200, GPUS, H100, H200, gpu_for
from .lessons import Refusal, explain_failure
from .signature import KernelCallError, Param
from .trace import Trace, trace

__all__ = [
    "B200",
    "BLACKWELL",
    "CheckError",
    "CheckResult",
    "GPUS",
    "H100",
    "H200",
    "HOPPER",
    "Kernel",
    "KernelCallError",
    "NotRunError",
    "Param",
    "Refusal",
    "Timing",
    "Trace",
    "bench",
    "build",
    "check",
    "compare",
    "explain_failure",
    "gemm",
    "gpu_for",
    "guard",
    "layouts",
    "lessons",
    "lower",
    "mbarrier",
    "plots",
    "results",
    "roofline",
    "schedule",
    "seeded",
    "set_chapter",
    "target",
    "tmem",
    "tolerance",
    "trace",
]
