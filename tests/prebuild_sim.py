"""Build the simulator's engines ahead of the tests: `python tests/prebuild_sim.py`.

NumSim compiles a Rust engine for each of its tools (numbers, synccheck, racecheck) the first
time the tool runs, and keeps it in its build cache: minutes on two cores, once per machine.
Inside the test run those builds would share the cores with the unit tests and slow both, so
`.ci/run` makes them here first, by simulating the smallest kernel of the tests (tests/kernels.py's
vector add) with every tool: the engines are what takes minutes, the kernel's own compile takes
seconds, and each kernel the tests simulate is compiled where its test runs and kept (NumSim keys
those compiles on the paths and times of its own environment's libraries, which is why
`.ci/run` keeps that environment once per machine rather than per clone). The kernel must
simulate cleanly, so this also fails early when the simulator cannot run at all.
Exits 0 without doing anything where there is no simulator interpreter (the `sim` tests are
then skipped with the reason).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    import torch

    import gpubook as gb
    from gpubook import export, simulate

    import kernels

    if simulate.simulator_version() is None:
        print("prebuild_sim: no simulator interpreter: nothing to build")
        return 0
    with tempfile.TemporaryDirectory(prefix="gpubook-prebuild-sim-") as tmp:
        os.environ[export.EXPORT_ENV] = tmp
        export.set_chapter("prebuild")
        k = gb.build(kernels.vadd, name="vadd")
        x, y = gb.seeded((kernels.N,), seed=1), gb.seeded((kernels.N,), seed=2)
        gb.check(k, [x, y, torch.empty(kernels.N)], ref=lambda x, y, out: x + y)
        case = Path(tmp) / "cases" / "prebuild--vadd--check"
        t0 = time.monotonic()
        rec = simulate.simulate_case(case, tools=simulate.TOOLS, timeout=3000)
    verdicts = {tool: entry.get("verdict") for tool, entry in rec.get("tools", {}).items()}
    print(f"prebuild_sim: {rec.get('status')} in {time.monotonic() - t0:.0f} s ({verdicts})")
    if rec.get("status") != "simulated":
        print(rec.get("message", ""), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
