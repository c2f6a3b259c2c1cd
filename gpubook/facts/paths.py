"""Where the book's files are: the repository, its chapters and its results."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHAPTERS = REPO / "chapters"
RESULTS = REPO / "results"
