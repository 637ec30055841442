"""`python -m tests.chaos --seed N` runs one scenario (the command a defect prints);
`--seeds N [--first K]` runs seeds K..K+N-1 (with `--sink KIND`, only those of them whose plan
writes into KIND) and, with `--report PATH`, writes the campaign's report. Exit 1 when any
scenario is a defect."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from tests.chaos.campaign import report, run_seeds
from tests.chaos.scenario import plan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--seed", type=int, help="one scenario")
    which.add_argument("--seeds", type=int, help="this many scenarios, from --first")
    parser.add_argument("--first", type=int, default=1, help="the first seed of --seeds (1)")
    parser.add_argument(
        "--sink", help="with --seeds: only the seeds that write into this sink (e.g. delta)"
    )
    parser.add_argument("--report", type=Path, help="write the campaign's report (Markdown)")
    parser.add_argument("--workdir", type=Path, help="where scenarios run (a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep every scenario's folder")
    parser.add_argument("--plan", action="store_true", help="print the plans only, run nothing")
    args = parser.parse_args(argv)
    seeds = [args.seed] if args.seed is not None else range(args.first, args.first + args.seeds)
    if args.sink:
        seeds = [seed for seed in seeds if plan(seed).sink == args.sink]
    if args.plan:
        print("\n".join(plan(seed).describe() for seed in seeds))
        return 0
    found = run_seeds(seeds, args.workdir, args.keep)
    text = report(found, "python -m tests.chaos " + shlex.join(argv or sys.argv[1:]))
    print(text)
    if args.report:
        args.report.write_text(text)
    return 1 if any(o.verdict == "defect" for o in found) else 0


if __name__ == "__main__":
    sys.exit(main())
