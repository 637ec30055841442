"""python -m bench SCENARIO... [--quick]: run benchmark scenarios, print tables, write JSON.

Scenarios (by name or number): 1 ceiling, 2 overhead, 3 flagship, 4 sustained, 5 recovery,
6 state, 7 startup, 8 parsing, 9 soak, 10 sensors, 11 activity, 12 ads, 13 cluster, 14 peers,
15 parquet, 16 filesage, 17 realtime (a Kafka broker; real-time mode vs micro-batches),
18 kafka_latency (trending from a topic to PostgreSQL beside the peers; a topic vs files),
19 realtime_peers (mobile from a topic into PostgreSQL: slipstream real-time beside Spark's
Kafka sink, Flink, Bytewax, Pathway), 20 delta (mobile MERGEd into Delta beside the query by
hand; the 4.2 line: `.venv-delta/bin/python -m bench delta`), or `all` (all but the soak,
which runs for an hour: `python -m bench soak --minutes 60 --rate 2000`, the peers,
kafka_latency and realtime_peers, which need `make bench-peers`, and delta). `--quick` shrinks
every size so that `all` takes a few minutes; its figures show the shape, the full run gives
the numbers for docs/benchmarks.md.

Results go to bench/results/<time>-<scenarios>.json (and a .md with the same tables)."""

from __future__ import annotations

import argparse
import importlib
import json
import shlex
import shutil
import sys
import tempfile
import traceback
from pathlib import Path
from types import ModuleType

from bench.core import (
    RESULTS_DIR,
    Context,
    Result,
    Stopwatch,
    environment,
    machine_now,
    render,
    write_json,
)

SCENARIOS = (
    "ceiling",
    "overhead",
    "flagship",
    "sustained",
    "recovery",
    "state",
    "startup",
    "parsing",
    "soak",
    "sensors",
    "activity",
    "ads",
    "cluster",
    "peers",
    "parquet",
    "filesage",
    "realtime",
    "kafka_latency",
    "realtime_peers",
    "delta",
)
IN_ALL = tuple(
    s for s in SCENARIOS if s not in ("soak", "peers", "kafka_latency", "realtime_peers", "delta")
)  # `all` leaves out the
# hour-long soak, the peers (their own environments, `make bench-peers`) and delta (the 4.2 line)


def scenario_module(name: str) -> ModuleType:
    return importlib.import_module(f"bench.scenarios.{name}")


def resolve(names: list[str]) -> list[str]:
    chosen: list[str] = []
    for name in names:
        if name == "all":
            chosen += IN_ALL
        elif name.isdigit() and 1 <= int(name) <= len(SCENARIOS):
            chosen.append(SCENARIOS[int(name) - 1])
        elif name in SCENARIOS:
            chosen.append(name)
        else:
            known = ", ".join(f"{i} {n}" for i, n in enumerate(SCENARIOS, start=1))
            raise SystemExit(f"bench: unknown scenario {name!r}; known: {known}, all")
    return list(dict.fromkeys(chosen))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="+", metavar="SCENARIO", help="name, number or all")
    parser.add_argument("--quick", action="store_true", help="small sizes: minutes, not tens")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="where JSON goes")
    parser.add_argument("--work", type=Path, help="scratch directory (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--markdown", action="store_true", help="print tables as Markdown")
    parser.add_argument(
        "--minutes", type=float, help="soak: how long to measure (= --set minutes=N)"
    )
    parser.add_argument(
        "--warmup",
        type=float,
        help="soak: minutes run before measuring, while the state fills (= --set warmup=N)",
    )
    parser.add_argument("--rate", type=int, help="soak: events/s (= --set rate=N)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a scenario parameter (VALUE is JSON, else text), e.g. "
        "--set rates=[1000] "
        '--set variants=\'["ingest-stage=false", "ingest-stage=false,trigger=1s"]\'',
    )
    return parser


def parse_overrides(items: list[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SystemExit(f"bench: --set wants NAME=VALUE, got {item!r}")
        try:
            out[name.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[name.strip()] = value
    return out


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    names = resolve(args.scenarios)
    overrides = parse_overrides(args.set)
    for name in ("minutes", "rate", "warmup"):
        if getattr(args, name) is not None:
            overrides[name] = getattr(args, name)
            args.set.append(f"{name}={getattr(args, name):g}")
    work = args.work or Path(tempfile.mkdtemp(prefix="slipstream-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    env = environment()
    print(
        f"slipstream bench: {', '.join(names)}{' (quick)' if args.quick else ''}\n"
        f"machine: {env['cores']} cores, {env['memory_gib']} GiB, load {env['load_1m']} "
        f"{env['load_5m']} {env['load_15m']}; pyspark {env['pyspark']}, {env['java']}, "
        f"python {env['python']}, slipstream {env['slipstream_commit']}\n"
        f"scratch: {work}",
        flush=True,
    )
    results: list[Result] = []
    failed = False
    try:
        for name in names:
            module = scenario_module(name)
            if not getattr(module, "IN_PROCESS", True):
                from bench import inproc

                inproc.stop_session()  # an idle JVM still costs memory and some CPU
            ctx = Context(
                quick=args.quick,
                work=work / name,
                results=args.results,
                log=lambda text: print(text, flush=True),
                overrides=overrides,
            )
            ctx.work.mkdir(parents=True, exist_ok=True)
            print(f"\n== {SCENARIOS.index(name) + 1}. {module.TITLE}", flush=True)
            before = machine_now()
            watch = Stopwatch()
            try:
                result = module.run(ctx)
            except Exception as exc:  # noqa: BLE001 - one failed scenario must not hide others
                traceback.print_exc()
                result = Result(name, module.TITLE, skipped=f"failed: {exc!r}"[:500])
                failed = True
            result.machine_before = before
            result.machine_after = machine_now()
            result.seconds = watch.seconds()
            result.command = f"python -m bench {name}" + (" --quick" if args.quick else "")
            result.command += "".join(f" --set {shlex.quote(item)}" for item in args.set)
            results.append(result)
            if result.failed:
                print(f"\n{name} FAILED: {result.failed}", flush=True)
                failed = True
            print("\n" + render(result, args.markdown), flush=True)
    finally:
        from bench import inproc

        inproc.stop_session()
        if results:
            path = write_json(results, env, args.quick, args.results)
            md = path.with_suffix(".md")
            md.write_text("\n\n".join(render(r, markdown=True) for r in results) + "\n")
            print(f"\nresults: {path}\ntables:  {md}", flush=True)
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
