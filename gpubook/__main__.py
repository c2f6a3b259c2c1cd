"""Command line: `python -m gpubook export OUT`, `export-selftest OUT`, `replay OUT`, `simulate OUT`,
`pack-runtime OUT`, `manifest FOLDER`, `promotion`, `build-budget`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gpubook")
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="execute the chapters and write every kernel case to OUT")
    e.add_argument("out", type=Path)
    e.add_argument("chapters", nargs="*", type=Path, help="chapter files (default: all)")
    st = sub.add_parser("export-selftest",
                        help="write the harness's self-test cases (one must fail) to OUT")
    st.add_argument("out", type=Path)
    r = sub.add_parser("replay", help="run exported cases on this GPU and write a results file")
    r.add_argument("out", type=Path)
    r.add_argument("--results", type=Path, default=None, help="results JSON to write")
    r.add_argument("--sanitize", action="store_true", help="also run memcheck and racecheck")
    r.add_argument("--timeout", type=float, default=120.0, help="seconds per case")
    r.add_argument("--only", default=None, help="regex on case names")
    r.add_argument("--jobs", type=int, default=1,
                   help="check cases run this many at a time (timed cases always one at a time)")
    r.add_argument("--repeats", type=int, default=None,
                   help="independent processes that each time every ladder's whole loop (default 3)")
    s = sub.add_parser("simulate", help="run the exported Blackwell-only checks on the CPU in NumSim, "
                       "with synccheck and racecheck, and write a results file")
    s.add_argument("out", type=Path)
    s.add_argument("--results", type=Path, default=None,
                   help="results JSON to write (default results/<date>-numsim.json)")
    s.add_argument("--only", default=None, help="regex on case names")
    s.add_argument("--tools", default=",".join(("numbers", "synccheck", "racecheck")),
                   help="comma-separated: numbers, synccheck, racecheck")
    s.add_argument("--timeout", type=float, default=1800.0, help="seconds per case, all tools")
    s.add_argument("--jobs", type=int, default=1, help="cases simulated at a time")
    s.add_argument("--workers", type=int, default=2, help="NumSim worker threads per case")
    s.add_argument("--all-archs", action="store_true",
                   help="also the kernels that run on Hopper (default: Blackwell-only kernels)")
    s.add_argument("--merge", type=Path, default=None,
                   help="an earlier results file whose other cases are kept in the new one")
    sm = sub.add_parser("simulate-merge", help="join simulation results files of one day into one")
    sm.add_argument("out", type=Path)
    sm.add_argument("files", nargs="+", type=Path)
    pk = sub.add_parser("pack-runtime", help="write the runtime bundle a GPU host without apache-tvm "
                        "needs to replay an export (source OUT/env.sh there)")
    pk.add_argument("out", type=Path)
    pk.add_argument("--python", default="3.12", help="the GPU host's Python version (default 3.12)")
    pk.add_argument("--wheels", type=Path, default=None,
                    help="a folder holding the apache-tvm-ffi wheel (default: download it with pip)")
    mf = sub.add_parser("manifest", help="merge the kernels that chapters executed with GPUBOOK_MANIFEST_DIR="
                        "FOLDER built into results/manifest/kernels.json")
    mf.add_argument("folder", type=Path)
    mf.add_argument("--execute", nargs="*", type=Path, default=None, metavar="CHAPTER",
                    help="first execute these chapter files (none named: all) recording into FOLDER")
    bb = sub.add_parser("build-budget", help="play the recorded chapter times (chapters/_build_times.json) "
                        "out on N cores, largest first as the book build reads them, and compare with the budget")
    bb.add_argument("--record", type=Path, default=None, help="default chapters/_build_times.json")
    bb.add_argument("--cores", type=int, default=2, help="reading processes (default 2)")
    bb.add_argument("--budget", type=float, default=480.0, help="seconds (default 480)")
    bb.add_argument("--overhead", type=float, default=None,
                    help="seconds of the build outside the chapters (default: the record's, measured by "
                    "the last build that executed every page; 0 where none did)")
    bb.add_argument("--report", action="store_true", help="print the verdict and exit 0 whatever it is")
    lc = sub.add_parser("replay-ladder", help=argparse.SUPPRESS)
    lc.add_argument("cases", nargs="+")
    lc.add_argument("--json", required=True)
    lc.add_argument("--load-only", action="store_true", help="load (and so compile) the modules, time nothing")
    pr = sub.add_parser("promotion", help="measure the error of cuBLASLt's FP8 GEMM with and without "
                        "promotion against fp64 on this GPU and write a record (chapter 12H)")
    pr.add_argument("--results", type=Path, default=None,
                    help="record to write (default results/promotion/<date>-<letter>-<gpu>.json)")
    pr.add_argument("--ks", default="1024,2048,4096,8192,12288,16384", help="comma-separated K")
    pr.add_argument("--size", type=int, default=2048, help="M = N (default 2048)")
    pr.add_argument("--seed", type=int, default=0)
    c = sub.add_parser("replay-case", help=argparse.SUPPRESS)
    c.add_argument("case")
    c.add_argument("--json", required=True)
    c.add_argument("--no-timing", action="store_true")
    c.add_argument("--no-stress", action="store_true")
    args = p.parse_args(argv)
    if args.cmd == "export":
        from .verify.export import export_chapters

        return export_chapters(args.out, args.chapters)
    if args.cmd == "export-selftest":
        from .verify.export import export_selftest

        return export_selftest(args.out)
    if args.cmd == "replay":
        from .verify.replay import replay

        return replay(args.out, args.results, args.sanitize, args.timeout, args.only, args.jobs,
                      repeats=args.repeats)
    if args.cmd == "simulate":
        from .verify.simulate import simulate

        return simulate(args.out, args.results, args.only, tuple(args.tools.split(",")),
                        args.timeout, args.jobs, args.workers, args.all_archs, args.merge)
    if args.cmd == "simulate-merge":
        from .verify.sim_records import merge_records

        return merge_records(args.files, args.out)
    if args.cmd == "pack-runtime":
        from .run.pack import bundle_size, pack_runtime

        out = pack_runtime(args.out, args.python, args.wheels)
        print(f"pack-runtime: {out} holds {bundle_size(out) / 1e6:.1f} MB for Python {args.python}; "
              f"on the GPU host: source {out}/env.sh")
        return 0
    if args.cmd == "manifest":
        from .verify.manifest import main as manifest_main

        return manifest_main(args.folder, args.execute is not None, args.execute or ())
    if args.cmd == "build-budget":
        from .book import budget
        from .facts.paths import CHAPTERS, REPO

        return budget.main(args.record or REPO / budget.RECORD, CHAPTERS, args.cores, args.budget,
                           args.overhead, args.report)
    if args.cmd == "replay-ladder":
        from .verify.replay import main_ladder

        return main_ladder(args.cases, args.json, args.load_only)
    if args.cmd == "promotion":
        from .run.promotion import main as promotion_main

        return promotion_main(args.results, [int(k) for k in args.ks.split(",")], args.size, args.seed)
    from .verify.replay import main_case

    return main_case(args.case, args.json, not args.no_timing, not args.no_stress)


if __name__ == "__main__":
    sys.exit(main())
