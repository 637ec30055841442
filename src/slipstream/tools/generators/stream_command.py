"""The command line of the record generators (`generate sensors`, `iot`, `temperature_load`,
`activity`, `ads`): the flags every one has, a workload's own flags (`Own`), and the run that
generates, saves the report beside the stream folder and prints it. The engine itself (arrival,
dirt, files, pacing) is `streams.py`; what a record looks like is each workload's module."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from slipstream.core import values
from slipstream.core.files import write_atomically
from slipstream.core.specs import DURATION_HELP, format_duration, parse_duration
from slipstream.errors import ConfigError
from slipstream.tools.generators.kafka_out import add_destination, topic_writer
from slipstream.tools.generators.stream_model import (
    DIRT,
    REPORT_NAME,
    Report,
    StreamSpec,
    Workload,
    late_note,
    report_beside,
)
from slipstream.tools.generators.streams import folder, generate
from slipstream.tools.generators.trending import SystemClock


@dataclass(frozen=True)
class Own:
    """A workload's own flag, declared once: `--NAME` (underscores as dashes), its default,
    whose type says how a value is read (an int, a float or a duration), and its help."""

    name: str
    default: float | timedelta
    help: str
    metavar: str = ""

    def read(self, text: str | None) -> Any:
        if isinstance(self.default, timedelta):
            return self.default if text is None else duration(self.name, text)
        return number(self.name, text, type(self.default), self.default)


def add_arguments(parser: argparse.ArgumentParser, defaults: StreamSpec, *own: Own) -> None:
    """The flags every record generator has, then the workload's `own`."""
    add_destination(parser, "; a workload of one stream only")
    parser.add_argument(
        "--duration",
        metavar="DURATION",
        help=f"event time to cover (default {defaults.duration}): {DURATION_HELP}",
    )
    parser.add_argument("--seed", metavar="S", help=f"random seed (default {defaults.seed})")
    parser.add_argument(
        "--start", metavar="now|ISO", help="first event time (default: fixed; `now` when live)"
    )
    parser.add_argument(
        "--file-every", metavar="DURATION", help=f"arrival time per file ({defaults.file_every})"
    )
    parser.add_argument(
        "--watermark",
        metavar="DURATION",
        help=f"the pipeline's watermark, which shapes out-of-order and late records "
        f"({defaults.watermark})",
    )
    parser.add_argument(
        "--window", metavar="DURATION", help=f"the pipeline's window ({defaults.window})"
    )
    for name in DIRT:
        parser.add_argument(
            "--" + name.replace("_", "-"),
            metavar="F",
            help=f"share of {name.replace('_', ' ')} records (default {getattr(defaults, name):g})",
        )
    parser.add_argument(
        "--pace",
        choices=("live", "fast"),
        help="live: a file per --file-every of wall time; fast: as fast as possible (default)",
    )
    parser.add_argument(
        "--report",
        type=Path,
        metavar="FILE",
        help=f"report JSON (default: OUT{REPORT_NAME}, beside OUT)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar, no report print")
    for flag in own:
        metavar = flag.metavar or ("DURATION" if isinstance(flag.default, timedelta) else "N")
        parser.add_argument("--" + flag.name.replace("_", "-"), metavar=metavar, help=flag.help)


def number(name: str, text: str | None, kind: type, default: Any) -> Any:
    """A flag's number, or its default; a bad value, or one beyond the bounds every number
    flag has (values.MAX_COUNT, seeds 64 bits), fails naming the flag and the bounds. What
    each generator allows inside them (a positive rate, a share in [0, 1)) it checks itself."""
    if text is None:
        return default
    top = values.MAX_SEED if name == "seed" else values.MAX_COUNT
    if kind is int:
        parse: Callable[[Any], Any] = values.integer(-top, top)
    else:
        parse = values.number(-top, top, above=False)
    try:
        return parse(text)
    except ValueError as exc:
        flag = "--" + name.replace("_", "-")
        raise ConfigError(
            "CONFIG_BAD_VALUE", f"{flag} has value {text!r}", f"give {flag} {exc}"
        ) from None


def own_values(args: argparse.Namespace, *own: Own) -> dict[str, Any]:
    """The workload's own flags' values, by name, each read as its default's type."""
    return {flag.name: flag.read(getattr(args, flag.name)) for flag in own}


def command(
    defaults: StreamSpec, own: Sequence[Own], make: Callable[[dict[str, Any], StreamSpec], Workload]
) -> tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace, TextIO], int]]:
    """A record generator's `add_arguments` and `run`: the flags every generator has and its
    `own`; a run makes the workload from its own flags' values and the spec, and writes it."""

    def add(parser: argparse.ArgumentParser) -> None:
        add_arguments(parser, defaults, *own)

    def generate(args: argparse.Namespace, out: TextIO) -> int:
        spec = spec_from_args(args, defaults)
        run(args, out, make(own_values(args, *own), spec), spec)
        return 0

    return add, generate


def duration(name: str, text: str) -> timedelta:
    """A duration flag's value; a bad one fails naming the flag and what it takes."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        flag = "--" + name.replace("_", "-")
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"{flag} has value {text!r}; allowed: {exc}",
            f"give {flag} {DURATION_HELP}",
        ) from None


def spec_from_args(args: argparse.Namespace, defaults: StreamSpec) -> StreamSpec:
    values: dict[str, Any] = {"seed": number("seed", args.seed, int, defaults.seed)}
    for name in DIRT:
        values[name] = number(name, getattr(args, name), float, getattr(defaults, name))
    for name in ("duration", "file_every", "watermark", "window"):
        text = getattr(args, name)
        if text is not None:
            values[name] = duration(name, text)
    if args.start is not None:
        values["start"] = moment(args.start)
    elif args.pace == "live":
        values["start"] = moment("now")
    return StreamSpec(**{**defaults.__dict__, **values})


def moment(text: str) -> datetime:
    """`--start`: `now` or an ISO-8601 time (no zone: UTC)."""
    if text.strip().lower() == "now":
        now = datetime.now(UTC)
        return now.replace(microsecond=now.microsecond // 1000 * 1000)
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"--start has value {text!r}",
            "give --start now or an ISO-8601 time such as 2026-01-01T00:00:00Z",
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def run(args: argparse.Namespace, out: TextIO, workload: Workload, spec: StreamSpec) -> Report:
    """Generate, save the report beside the stream folder (or, into a topic, in the working
    folder) and print it (what `generate` does)."""
    live = args.pace == "live"
    check_target(args, workload)
    writer = None if args.to is None else topic_writer(args.to)
    report = generate(
        spec,
        workload,
        Path(".") if writer is not None else args.out,
        clock=SystemClock() if live else None,
        progress=not args.quiet,
        write=writer,
    )
    if writer is not None:
        report_path = args.report or Path(f"{writer.topic.topic}{REPORT_NAME}")
        targets: Sequence[str] = [f"Kafka topic {writer.topic.describe()}"]
    else:
        report_path = args.report or report_beside(Path(args.out))
        targets = [str(folder(Path(args.out), workload, s.name)) for s in workload.shapes]
    report_path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(report.to_dict(), indent=2, sort_keys=True)
    write_atomically(report_path.parent, report_path.name, text.splitlines())
    if not args.quiet:
        print(text, file=out)
    print(
        f"wrote {report.total_lines:,} lines to {', '.join(targets)}; report {report_path}",
        file=out,
        flush=True,
    )
    late = sum(c.late for c in report.streams.values())
    made = (
        f"each in transit at least --watermark + --window + 3 files "
        f"({format_duration(spec.watermark)} + {format_duration(spec.window)} + "
        f"3 x {format_duration(spec.file_every)})"
    )
    own = "when each file is its own micro-batch (--max-files-per-trigger 1)"
    if writer is not None:
        own = "when each file's records are one micro-batch"
    print(late_note(late, made, own), file=out, flush=True)
    return report


def check_target(args: argparse.Namespace, workload: Workload) -> None:
    """`--to` writes one topic: a workload of several streams is refused before anything is
    written (one topic would mix them)."""
    if args.to is not None and len(workload.shapes) != 1:
        names = ", ".join(s.name for s in workload.shapes)
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"--to writes one topic, and {workload.name} makes {len(workload.shapes)} streams "
            f"({names})",
            "use --out DIR, and bind each stream's folder as its own input",
        )
