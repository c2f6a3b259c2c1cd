"""What the Blackwell GEMM chapters use, in one namespace (`from gpubook import gemm as gg`): the
ladder's shared parts: calls it refuses, tolerances, diffs, a model, tables.

`D = A @ B.T` with A (M x K) and B (N x K) both K-major, fp16 or bf16 in, fp32 accumulated in
tensor memory, D written in the input dtype. Chapters 8-10 build the kernels; this module holds
what they would otherwise repeat: the checks of a call (`problem`, `Gemm`, and the rules that
the Hopper ladder shares, `validate_operands`), the tolerance of a check (`tolerance`), the diff
of one step against the next (`show_diff`), the performance model of a step (`Plan`, `bound`),
the published figures a step is compared with (`PUBLISHED`), and the ladder's table and figure
(`ladder_rows`, `ladder_markdown`, `plot_ladder`).
"""

from ..models.gemm_model import *  # noqa: F401,F403
from ..verify.gemm_check import *  # noqa: F401,F403
from ..verify.static import *  # noqa: F401,F403
from .ladder import *  # noqa: F401,F403
from .ladder import _named_source, _rate  # noqa: F401
