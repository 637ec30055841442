"""`slipstream generate trending`: the command-line face of trending's event generator
(tools/catalog.py names this module trending's generator: its `add_arguments` and `run`).

    slipstream generate trending (--out DIR | --to kafka://HOST:PORT/TOPIC) [--catalog FILE]
                                 [--rate N]
                                 [--duration D | --events N] [--seed S] [--start now|ISO]
                                 [--out-of-order F] [--late F] [--duplicates F] [--malformed F]
                                 [--unknown-article F] [--pace live|fast] [--report FILE]

Pacing: `live` writes one file per `--file-every` of wall time at `--rate` events/s (a live
stream for a running pipeline); `fast` writes as fast as the disk allows, with a progress bar (a
backfill). The default is `fast` when the amount is bounded (`--events` or `--duration`) and
`live` when it is not (then Ctrl-C stops it after the current file).

Start: the first event time. Fast runs default to the generator's fixed start, so the same seed
gives the same bytes; live runs default to `now`.

The catalog (`--catalog`, default `catalog.csv` beside OUT: not inside it, where the pipeline
would read it as events, and not named `_...`, which Spark treats as hidden and reads as empty)
is written first, then the event files; the GenerationReport (exact counts of each kind of line)
is printed as JSON and saved (`--report`, default `OUT_generation-report.json` beside OUT, not
inside the stream folder), and a line says how many events were made late and what a run's late
count will be beside it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, TextIO

from slipstream.core.specs import DURATION_HELP, format_duration, parse_duration
from slipstream.errors import ConfigError
from slipstream.tools.generators import stream_command
from slipstream.tools.generators.kafka_out import add_destination, topic_writer
from slipstream.tools.generators.stream_command import moment
from slipstream.tools.generators.stream_model import REPORT_NAME, late_note, report_beside
from slipstream.tools.generators.trending import (
    SpecError,
    SystemClock,
    TrendingSpec,
    generate,
    write_catalog,
)

CATALOG_NAME = "catalog.csv"
FRACTIONS = ("out_of_order", "late", "duplicates", "malformed", "unknown_article")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = TrendingSpec()
    add_destination(parser)
    parser.add_argument(
        "--catalog",
        type=Path,
        metavar="FILE",
        help=f"catalog CSV (default: {CATALOG_NAME} beside OUT)",
    )
    parser.add_argument(
        "--rate", metavar="N", help=f"events per second (default {defaults.rate:g})"
    )
    bound = parser.add_mutually_exclusive_group()
    bound.add_argument(
        "--duration", metavar="DURATION", help="event time to cover: " + DURATION_HELP
    )
    bound.add_argument("--events", metavar="N", help="number of lines to write")
    parser.add_argument("--seed", metavar="S", help=f"random seed (default {defaults.seed})")
    parser.add_argument(
        "--start", metavar="now|ISO", help="first event time (default: fixed; `now` when live)"
    )
    parser.add_argument(
        "--articles", metavar="N", help=f"articles in the catalog (default {defaults.articles})"
    )
    parser.add_argument("--users", metavar="N", help=f"distinct readers (default {defaults.users})")
    parser.add_argument(
        "--file-every",
        metavar="DURATION",
        help="event time per file (default 1s)",
    )
    parser.add_argument(
        "--watermark",
        metavar="DURATION",
        help="the pipeline's watermark, which out-of-order and late events are shaped by "
        "(default 10m)",
    )
    parser.add_argument(
        "--window", metavar="DURATION", help="the pipeline's window length (default 10m)"
    )
    for name in FRACTIONS:
        parser.add_argument(
            _flag(name),
            metavar="F",
            help=f"share of {name.replace('_', ' ')} lines (default {getattr(defaults, name):g})",
        )
    parser.add_argument(
        "--pace",
        choices=("live", "fast"),
        help="live: files appear at --rate in wall time; fast: as fast as possible "
        "(default: fast when bounded, live otherwise)",
    )
    parser.add_argument(
        "--report",
        type=Path,
        metavar="FILE",
        help=f"report JSON (default: OUT{REPORT_NAME}, beside OUT)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar, no report print")


def _number(name: str, text: str, kind: type) -> Any:
    return stream_command.number(name, text, kind, None)


def spec_from_args(args: argparse.Namespace) -> tuple[TrendingSpec, bool]:
    """The spec and whether to pace it live. Bad values raise ConfigError naming the flag."""
    values: dict[str, Any] = {}
    for name, kind in (("rate", float), ("events", int), ("seed", int)):
        if getattr(args, name) is not None:
            values[name] = _number(name, getattr(args, name), kind)
    for name in ("articles", "users"):
        if getattr(args, name) is not None:
            values[name] = _number(name, getattr(args, name), int)
    for name in FRACTIONS:
        if getattr(args, name) is not None:
            values[name] = _number(name, getattr(args, name), float)
    for name in ("duration", "file_every", "watermark", "window"):
        text = getattr(args, name)
        if text is not None:
            try:
                values[name] = parse_duration(text)
            except ValueError as exc:
                raise ConfigError(
                    "CONFIG_BAD_VALUE",
                    f"{_flag(name)} has value {text!r}; allowed: {exc}",
                    f"give {_flag(name)} {DURATION_HELP}",
                ) from None
    bounded = "events" in values or "duration" in values
    live = args.pace == "live" or (args.pace is None and not bounded)
    if args.start is not None:
        values["start"] = moment(args.start)
    elif live:
        values["start"] = moment("now")
    try:
        return TrendingSpec(**values), live
    except SpecError as exc:
        flag = _flag(exc.field) if exc.field in values else exc.field
        raise ConfigError("CONFIG_BAD_VALUE", str(exc), f"fix {flag}") from None


def run(args: argparse.Namespace, out: TextIO) -> int:
    spec, live = spec_from_args(args)
    writer = None
    if args.to is not None:  # a topic: catalog and report in the working directory
        writer = topic_writer(args.to)
        out_dir = Path(".")
        catalog_path = args.catalog or Path(CATALOG_NAME)
        args.report = args.report or Path(f"{writer.topic.topic}{REPORT_NAME}")
    else:
        out_dir = args.out
        out_dir.mkdir(parents=True, exist_ok=True)
        catalog_path = args.catalog or out_dir.resolve().parent / CATALOG_NAME
    catalog_path.parent.mkdir(parents=True, exist_ok=True)
    write_catalog(catalog_path, spec)
    try:
        report = generate(
            spec,
            out_dir,
            clock=SystemClock() if live else None,
            progress=not args.quiet,
            write=writer,
        )
    except FileExistsError as exc:
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            str(exc),
            "generate into a new --out directory (Spark never re-reads a file name it has seen)",
        ) from None
    report_path = report.write_report(args.report or report_beside(out_dir))
    if not args.quiet:
        print(json.dumps(report.to_dict(), indent=2, sort_keys=True), file=out)
    target = f"{out_dir}" if writer is None else f"Kafka topic {writer.topic.describe()}"
    print(
        f"wrote {report.total_lines:,} lines in {report.files:,} files to {target}; "
        f"catalog {catalog_path}; report {report_path}",
        file=out,
        flush=True,
    )
    window, watermark = format_duration(spec.window), format_duration(spec.watermark)
    made = (
        f"each at least --watermark + --window ({watermark} + {window}) older than the newest "
        "event of the files before the previous one"
    )
    print(late_note(report.late, made, "when each file is its own micro-batch "
                    "(--max-files-per-trigger 1) and its --watermark and --window are these"),
          file=out, flush=True)  # fmt: skip
    return 0
