"""How the book's tools start the Jupyter kernels that execute chapters (the book build, the
export of cases for a GPU host, the manifest of built kernels)."""

from __future__ import annotations

QUIET = "--IPKernelApp.log_level=ERROR"


def quiet_kernels() -> None:
    """Start chapter kernels without the kernel application's own warnings, which are one line
    per chapter that says the kernel talks to its client over unencrypted TCP: both ends are this
    machine's loopback interface. (IPC sockets would avoid it, but jupyter_client names them
    relative to the working directory, which differs between the client and a chapter's kernel.)
    Errors of the kernel application are still printed; a cell's own warnings are outputs of the
    cell and are not affected. nbclient reads the default when a client is made, after this."""
    from nbclient import NotebookClient

    trait = NotebookClient.class_traits()["extra_arguments"]
    now = list(trait.default_value) if isinstance(trait.default_value, (list, tuple)) else []
    if QUIET not in now:
        trait.default_value = [*now, QUIET]
