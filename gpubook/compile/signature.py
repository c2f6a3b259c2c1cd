"""A kernel's parameters (name, shape, dtype) and the checks run on a call before any launch."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence


class KernelCallError(TypeError):
    """A call whose arguments do not match the kernel's parameters."""


@dataclass(frozen=True)
class Param:
    """One tensor parameter of a kernel."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def describe(self) -> str:
        return f"{self.name}: {self.dtype}[{', '.join(map(str, self.shape))}]"

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
        if tuple(a.shape) != p.shape:
            raise KernelCallError(
                f"{where} has shape {tuple(a.shape)}, but the kernel was compiled for "
                f"{p.shape}.\n  signature: {sig}"
            )
        if torch_dtype_name(a) != p.dtype:
            raise KernelCallError(
                f"{where} has dtype {torch_dtype_name(a)}, but the kernel expects {p.dtype}."
                f"\n  signature: {sig}"
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
