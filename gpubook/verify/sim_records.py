"""The committed simulation records as a whole: the few a test simulates again each day, and
the merge of one day's results files (one per chapter or per tool) into one."""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any

TOOLS = ("numbers", "synccheck", "racecheck")


def rotation(day: Any = None, k: int = 2, directory: Path | None = None) -> list[dict[str, Any]]:
    """k of the committed good simulations (of kernels that must pass, each simulated in under
    two minutes), a different few each day: the sample a test simulates again to show that the
    records reproduce."""
    from ..facts import results

    newest: dict[str, dict[str, Any]] = {}
    for c in results.cases(directory, simulated=True):
        newest[c["case"]] = c
    pool = sorted((c for c in newest.values() if c["status"] == "simulated"
                   and (c.get("tools") or {}).get("numbers", {}).get("seconds") is not None
                   and c["tools"]["numbers"]["seconds"] < 120), key=lambda c: c["case"])
    if not pool:
        return []
    day = day or _dt.date.today()
    start = (day.toordinal() * k) % len(pool)
    return [pool[(start + i) % len(pool)] for i in range(min(k, len(pool)))]


def merge_records(files: list[Path], out: Path) -> int:
    """Join simulation results files of one simulator and date into `out` (the runs of a day,
    e.g. one per chapter or one per tool): records of the same case and kernel script join
    their tools, and a failing record's verdict wins over a passing one."""
    cases: dict[str, dict[str, Any]] = {}
    run: dict[str, Any] | None = None
    for f in files:
        d = json.loads(Path(f).read_text())
        run = run or d["run"]
        if (d["run"].get("simulator"), d["run"]["date"]) != (run.get("simulator"), run["date"]):
            raise ValueError(f"{f}: another simulator or date than {files[0]}")
        for c in d["cases"]:
            old = cases.get(c["case"])
            if old is None or old.get("fingerprint") != c.get("fingerprint"):
                cases[c["case"]] = c
                continue
            base = dict(old if old["status"] != "simulated" else c)
            for k in ("max_abs_error", "max_rel_error"):
                if k not in base and k in old:
                    base[k] = old[k]
            base["tools"] = dict(old.get("tools", {}), **c.get("tools", {}))
            base["seconds"] = round(old.get("seconds", 0) + c.get("seconds", 0), 1)
            cases[c["case"]] = base
    assert run is not None
    run = dict(run, tools=[t for t in TOOLS if any(t in c.get("tools", {}) for c in cases.values())])
    out.write_text(json.dumps({"format": 2, "run": run, "cases": [cases[k] for k in sorted(cases)]},
                              indent=1))
    print(f"simulate-merge: {len(cases)} cases from {len(files)} files in {out}")
    return 0
