"""Deciding whether a kernel is right: the check of a notebook cell, the comparison, the export of the
chapters, the replay on a GPU host, the simulation on the CPU, the verification matrix.
Imports run, compile and facts."""
