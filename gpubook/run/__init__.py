"""Launching a compiled kernel on the local GPU: the runtime, guard zones, the timer, traces, the record of
each check and measurement for export, and the runtime bundle for a GPU host. Imports compile and facts."""
