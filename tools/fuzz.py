#!/usr/bin/env python3
"""Fuzz intq as a hostile user would, and print the outcome table (issue 17).

    python tools/fuzz.py                          # the CI sample: 500 cases, seed 17, 2 workers
    nice -n 10 python tools/fuzz.py --cases 20000 --seed 2026 --json campaign.json   # the long campaign
    python tools/fuzz.py --family tflite_struct --cases 200
    python tools/fuzz.py --replay 1234 --seed 17  # one case again, with its details
    python tools/fuzz.py --intq-root /path/to/other/checkout   # the same cases against another intq

Families (tests/fuzz/cases.py): structure-aware mutation of ONNX protos and .tflite flatbuffers,
byte mutation of both, malformed-model generators, bad data, command-line misuse, API misuse and
interrupts (SIGINT / SIGTERM at a random moment). Each case runs in a forked child with an
address-space, CPU-time and file-size limit (tests/fuzz/runner.py) and ends as one of: ok, clean
(an intq error), traceback, hang, crash, silently_wrong, lost_file. Exit status 1 if any case
ended in one of the last five.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fuzz.runner import DEFECTS, format_table, plan, run_campaign, summarize  # noqa: E402

#: family -> weight; kept here too so that planning needs no intq import (tests/fuzz/cases.py is the source)
FAMILY_WEIGHTS = {"onnx_struct": 20, "tflite_struct": 20, "bytes_onnx": 6, "bytes_tflite": 6, "malformed": 14,
                  "bad_data": 10, "cli_misuse": 12, "api_misuse": 6, "interrupt": 6}
#: families whose outcome is known (the judge's self-test: --selftest)
SELFTEST = ("selftest_traceback", "selftest_hang", "selftest_crash", "selftest_memory", "selftest_lost_file",
            "selftest_silently_wrong")


def _size(text: str) -> int:
    units = {"k": 2**10, "m": 2**20, "g": 2**30}
    text = text.strip().lower().rstrip("b")
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", type=int, default=500)
    p.add_argument("--seed", type=int, default=17)
    p.add_argument("--start", type=int, default=0,
                   help="skip the plan's first START cases (run cases START .. START+CASES-1 of this seed's plan)")
    p.add_argument("--stop-after", type=float, metavar="SECONDS",
                   help="start no case after SECONDS; the table covers the cases run (a prefix of the plan when "
                        "--jobs 1)")
    p.add_argument("--log", help="append one JSON line per finished case to this file as it finishes")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds before a case is a hang (default 60)")
    p.add_argument("--memory", default="3G", help="address space a case may add to its worker's (default 3G)")
    p.add_argument("--intq-limit", default="256M",
                   help="intq's own per-tensor limit in the cases (INTQ_MAX_TENSOR_BYTES; default 256M, well "
                        "inside --memory so that intq's refusal, not the rlimit, is what a huge tensor meets)")
    p.add_argument("--family", action="append", help="run only these families (repeatable)")
    p.add_argument("--replay", type=int, metavar="ID", help="run only case ID of this seed's plan, and show it")
    p.add_argument("--json", help="write every case's result and the summary here")
    p.add_argument("--keep", action="store_true", help="keep each case's working folder (under /tmp/intq-fuzz-*)")
    p.add_argument("--intq-root", help="import intq from this checkout instead of this one (for before/after tables)")
    p.add_argument("--selftest", action="store_true",
                   help="also run the families whose outcome is known (traceback, hang, crash, lost file...) once "
                        "each; they are reported apart and do not count as defects")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)

    specs = plan(args.start + args.cases if args.replay is None else args.replay + 1, args.seed, FAMILY_WEIGHTS,
                 args.family)
    if args.replay is None:
        specs = specs[args.start:]
    if args.selftest:  # appended to the plan: the same workers judge both (a short limit for the hang)
        specs += [{"id": len(specs) + i, "family": f, "seed": i, "timeout": 8.0} for i, f in enumerate(SELFTEST)]
    if args.replay is not None:
        specs = [specs[args.replay]]
    pythonpath = [str(ROOT)]
    if args.intq_root:
        shim = Path(tempfile.mkdtemp(prefix="intq-root-"))
        (shim / "intq").symlink_to(Path(args.intq_root).resolve() / "intq")
        pythonpath.insert(0, str(shim))
    options = {"timeout": args.timeout, "memory": _size(args.memory), "intq_limit": _size(args.intq_limit),
               "pythonpath": os.pathsep.join(pythonpath), "keep": args.keep}
    t0 = time.monotonic()
    cpu0 = os.times()

    log = open(args.log, "a") if args.log else None

    def progress(r, done, total):
        if log:
            log.write(json.dumps(r.__dict__, default=str) + "\n")
            log.flush()
        if args.quiet:
            return
        mark = "." if r.outcome in ("ok", "clean") else r.outcome[0].upper()
        print(mark, end="" if done % 100 else f" {done}/{total} {time.monotonic() - t0:.0f} s\n", flush=True)
        if args.replay is not None or r.outcome in DEFECTS and not args.quiet:
            print(f"\n  case {r.id} ({r.family}, seed {r.seed}): {r.outcome}: {r.detail[:400]}", flush=True)

    try:
        deadline = None if args.stop_after is None else time.monotonic() + args.stop_after
        results = run_campaign(specs, args.jobs, options, progress, deadline)
    finally:
        if log:
            log.close()
        if args.intq_root:
            shutil.rmtree(shim, ignore_errors=True)
    wall = time.monotonic() - t0
    cpu1 = os.times()
    selftest = {r.family: r.outcome for r in results if r.family in SELFTEST}
    results = [r for r in results if r.family not in SELFTEST]
    summary = summarize(results)
    if args.selftest:
        summary["selftest"] = selftest
    summary.update({"seed": args.seed, "start": args.start, "planned": args.cases, "jobs": args.jobs, "wall_seconds": round(wall, 1),
                    "cpu_seconds": round(cpu1.children_user + cpu1.children_system
                                         - cpu0.children_user - cpu0.children_system, 1),
                    "intq_root": str(Path(args.intq_root).resolve()) if args.intq_root else str(ROOT)})
    print()
    print(format_table(summary))
    if args.selftest:
        print("judge self-test (family: outcome): " + ", ".join(f"{k}: {v}" for k, v in selftest.items()))
    ran = len(results)
    which = f"case {args.replay}" if args.replay is not None else \
        f"cases {args.start}..{args.start + ran - 1} ({ran} of {args.cases} planned)"
    print(f"{which} of seed {args.seed}'s plan; wall {wall:.0f} s on {args.jobs} workers "
          f"({ran / max(wall, 1e-9):.2f} cases/s)")
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "results": [r.__dict__ for r in results]},
                                              indent=1, default=str))
    judged = all(selftest.get(f) == f.replace("selftest_", "").replace("memory", "traceback") for f in SELFTEST)
    if args.selftest and not judged:
        return 2
    return 1 if any(summary["table"].get("total", {}).get(c, 0) for c in DEFECTS) else 0


if __name__ == "__main__":
    sys.exit(main())
