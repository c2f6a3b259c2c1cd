"""Build the book the tests read, ahead of them: `python tests/prebuild_book.py FOLDER`, then
`GPUBOOK_BUILD_DIR=FOLDER python -m pytest`. The build is the one the `built_book` fixture makes
(every chapter executed afresh, every kernel compiled, the manifest and the day's simulation
sample exported); the fixture takes it as this session's while the book's sources are the ones
it was built from. `.ci/run` uses it so that the build has both cores to itself instead of
sharing them with the unit tests. Exits non-zero, with the end of the log, when the build fails.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from conftest import _build_book, sources_digest


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tests/prebuild_book.py FOLDER", file=sys.stderr)
        return 2
    base = Path(argv[0]).resolve()
    base.mkdir(parents=True, exist_ok=True)
    digest = sources_digest()
    if digest is None:
        print("prebuild_book: not a git checkout: the tests could not tell whether this build is theirs",
              file=sys.stderr)
        return 2
    t0 = time.monotonic()
    state = _build_book(base)
    state.update(run="prebuilt", prebuilt=digest)
    (base / "built.json").write_text(json.dumps(state))
    print(f"prebuild_book: {'built' if state['ok'] else 'FAILED'} in {time.monotonic() - t0:.0f} s into {base}")
    if not state["ok"]:
        print(state["message"], file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
