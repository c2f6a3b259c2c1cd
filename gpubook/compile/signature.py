"""A kernel's parameters (name, shape, dtype) and the checks run on a call before any launch.

A parameter of a format narrower than a byte is passed as PyTorch stores it: an E2M1 buffer
`T.Buffer((M, K), "float4_e2m1fn")` takes a `torch.float4_e2m1fn_x2` tensor of shape (M, K / 2),
two elements to a byte, the element of lower index in the low four bits (what
`gpubook.models.lowprec.pack_e2m1(q).view(torch.float4_e2m1fn_x2)` makes). `Param.torch_shape`
and `Param.torch_dtype` name that tensor; the launch hands TVM a view of its bytes with the
kernel's own shape and dtype (`gpubook.run.runtime`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence


class KernelCallError(TypeError):
    """A call whose arguments do not match the kernel's parameters."""


# Kernel dtypes narrower than a byte: the PyTorch dtype that holds them, and elements per byte.
PACKED: dict[str, tuple[str, int]] = {"float4_e2m1fn": ("float4_e2m1fn_x2", 2)}


@dataclass(frozen=True)
class Param:
    """One tensor parameter of a kernel."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def describe(self) -> str:
        return f"{self.name}: {self.dtype}[{', '.join(map(str, self.shape))}]"

    @property
    def packed(self) -> int:
        """Elements per byte of the tensor that holds this parameter: 2 for E2M1, else 1."""
        return PACKED[self.dtype][1] if self.dtype in PACKED else 1

    @property
    def torch_dtype(self) -> str:
        """The PyTorch dtype (name) of the tensor passed for this parameter."""
        return PACKED[self.dtype][0] if self.dtype in PACKED else self.dtype

    @property
    def torch_shape(self) -> tuple[int, ...]:
        """The shape of the tensor passed for this parameter: the last dimension divided by the
        elements each byte holds."""
        if self.packed == 1:
            return self.shape
        if not self.shape or self.shape[-1] % self.packed:
            raise KernelCallError(f"{self.describe()}: a {self.dtype} buffer needs a last dimension "
                                  f"that is a multiple of {self.packed}, to fill whole bytes")
        return self.shape[:-1] + (self.shape[-1] // self.packed,)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(d: dict[str, Any]) -> "Param":
        return Param(d["name"], tuple(d["shape"]), d["dtype"])


def params_of(func: Any) -> list[Param]:
    """The tensor parameters of a TIRx PrimFunc, in call order."""
    out = []
    for var in func.params:
        if not hasattr(var, "shape") or var.shape is None:
            raise KernelCallError(
                f"parameter {var.name} of {func_name(func)} is not a buffer: "
                "the book's kernels take tensors only"
            )
        shape = tuple(int(s) for s in var.shape)
        out.append(Param(str(var.name), shape, str(var.dtype)))
    return out


def func_name(func: Any) -> str:
    attrs = func.attrs
    if attrs is not None and "global_symbol" in attrs:
        return str(attrs["global_symbol"])
    return "kernel"


def torch_dtype_name(t: Any) -> str:
    return str(t.dtype).removeprefix("torch.")


def validate(name: str, params: Sequence[Param], args: Sequence[Any], device: str | None) -> None:
    """Raise KernelCallError, naming the argument and what was expected, for a bad call.

    `device` is the device type the tensors must live on ('cuda'), or None to accept any
    (used when the arguments are only being prepared on the CPU).
    """
    sig = f"{name}({', '.join(p.describe() for p in params)})"
    if len(args) != len(params):
        raise KernelCallError(
            f"{name} takes {len(params)} tensors, got {len(args)}.\n  signature: {sig}"
        )
    for i, (p, a) in enumerate(zip(params, args)):
        where = f"argument {i} ({p.name!r}) of {name}"
        if not hasattr(a, "shape") or not hasattr(a, "dtype"):
            raise KernelCallError(f"{where} must be a tensor, got {type(a).__name__}")
        packing = (f" ({p.dtype}[{', '.join(map(str, p.shape))}] is passed as {p.torch_dtype} of shape "
                   f"{p.torch_shape}, {p.packed} elements to a byte, the first in the low bits)"
                   if p.packed > 1 else "")
        if torch_dtype_name(a) != p.torch_dtype:
            raise KernelCallError(
                f"{where} has dtype {torch_dtype_name(a)}, but the kernel expects {p.torch_dtype}"
                f"{packing}.\n  signature: {sig}"
            )
        if tuple(a.shape) != p.torch_shape:
            raise KernelCallError(
                f"{where} has shape {tuple(a.shape)}, but the kernel was compiled for "
                f"{p.torch_shape}{packing}.\n  signature: {sig}"
            )
        if device is not None and a.device.type != device:
            raise KernelCallError(
                f"{where} is on {a.device}, but the kernel runs on the GPU: "
                f"move it with .to('{device}') first"
            )
        if not a.is_contiguous():
            raise KernelCallError(
                f"{where} is not contiguous (strides {tuple(a.stride())}); the kernel "
                "indexes it as a dense row-major array: pass .contiguous()"
            )
