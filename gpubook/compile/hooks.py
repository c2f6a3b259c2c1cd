"""Listeners of every build: `build()` hands each Kernel it returns, a cached one too, to the
functions a higher layer registered here (gpubook.verify.manifest records what each chapter builds)."""

from __future__ import annotations

from typing import Any, Callable

_listeners: list[Callable[[Any], None]] = []


def on_build(listener: Callable[[Any], None]) -> None:
    """Call `listener(kernel)` after every build (once, however often it is registered)."""
    if listener not in _listeners:
        _listeners.append(listener)


def built(kernel: Any) -> Any:
    """Hand a finished build to every listener; return it."""
    for listener in _listeners:
        listener(kernel)
    return kernel
