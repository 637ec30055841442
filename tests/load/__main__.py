"""`python -m tests.load [--pressure 4 8] [--case NAME ...] [--report PATH]`: every case (or the
named ones) under each CPU pressure, then the report. Exit 1 when a case is not exact."""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.load.harness import ALL_CASES, report, run_cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.load", description=__doc__)
    parser.add_argument("--pressure", type=int, nargs="+", default=[4, 8],
                        help="hogs per core, one round of cases each (4 8)")  # fmt: skip
    parser.add_argument("--case", action="append", choices=sorted(ALL_CASES), help="(all)")
    parser.add_argument("--report", type=Path, help="write the report (Markdown)")
    parser.add_argument("--keep", action="store_true", help="keep every case's folder")
    parser.add_argument("--together", action="store_true", help="a round's cases all at once")
    args = parser.parse_args(argv)
    names = args.case or list(ALL_CASES)
    root = Path(tempfile.mkdtemp(prefix="slipstream-load-"))
    rows = []
    from tests.services import running_postgres

    with running_postgres() as server, broker(any(ALL_CASES[n].kafka for n in names)) as kafka:
        if isinstance(server, str):
            raise SystemExit(f"PostgreSQL could not start: {server}")
        for factor in args.pressure:
            results, pressure = run_cases(
                names, factor, root, server, args.keep, args.together, kafka
            )
            for result in results:
                rows.append((pressure, result))
                print(f"{pressure}: {result.case}: {result.seconds:.0f} s, "
                      f"{'exact' if result.exact else 'FAILED ' + '; '.join(result.notes)}",
                      flush=True)  # fmt: skip
    text = report(rows, "python -m tests.load " + shlex.join(argv or sys.argv[1:]))
    print(text)
    if args.report:
        args.report.write_text(text)
    return 0 if all(r.exact for _, r in rows) else 1


@contextlib.contextmanager
def broker(needed: bool) -> Iterator[Any]:
    """A started Kafka broker (as the Kafka tests start theirs), with Spark's connector made
    resolvable for the runs, when a case reads a topic; else None."""
    if not needed:
        yield None
        return
    from tests.services import kafka_connector, running_kafka

    reason = kafka_connector()
    if reason:
        raise SystemExit(f"Spark's Kafka connector cannot be had: {reason}")
    with running_kafka() as server:
        if isinstance(server, str):
            raise SystemExit(f"the Kafka broker could not start: {server}")
        yield server


if __name__ == "__main__":
    sys.exit(main())
