"""The command line: parse, then dispatch to plain functions (which the tests call directly).

slipstream list
slipstream check PIPELINE [flags]      explain the plan; refuse forbidden combinations
slipstream run PIPELINE [flags]        check, then run (resumes from its checkpoint)
slipstream reset PIPELINE [--outputs]  delete a pipeline's checkpoint (and outputs)
slipstream feed [--port 9999] [FILE]   a line server for the socket source
slipstream status [PIPELINE] [--json]  health of each query, from the event logs
slipstream stop PIPELINE               stop a running pipeline at a batch boundary
slipstream dashboard [PIPELINE]        the live dashboard of a state directory
slipstream generate trending --out DIR an event stream for a pipeline (see --help)
slipstream demo [trending|mobile]      the quick-start demo (what `make demo` runs)
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from slipstream.config import DEFAULT_DASHBOARD_PORT, OPTIONS, Settings, load_settings
from slipstream.errors import SlipstreamError

EXIT_OK, EXIT_FAILED, EXIT_REFUSED = 0, 1, 2


def _add_settings_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", type=Path, metavar="FILE", help="TOML file of settings (flags win over it)"
    )
    group = parser.add_argument_group("settings (also accepted as keys of the --config file)")
    for option in OPTIONS:
        flag = option.flag or "--" + option.name.replace("_", "-")
        help_text = option.help
        if option.env:
            help_text += f" [env {option.env}]"
        if option.kind == "bool":
            group.add_argument(
                flag,
                dest=option.name,
                action="store_const",
                const=True,
                default=None,
                help=help_text,
            )
        elif option.kind == "multi":
            group.add_argument(
                flag,
                dest=option.name,
                action="append",
                default=None,
                metavar=option.metavar,
                help=help_text,
            )
        else:
            optional = {"nargs": "?", "const": option.const} if option.const is not None else {}
            group.add_argument(
                flag,
                dest=option.name,
                default=None,
                metavar=option.metavar or option.name.upper(),
                help=help_text,
                **optional,
            )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="slipstream",
        description="Streaming pipelines on PySpark Structured Streaming, and the toolkit to "
        "build, test and operate them.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("list", help="list the pipelines")
    for name, text in (
        ("check", "explain the plan and refuse forbidden combinations"),
        ("run", "check, then run a pipeline (resumes from its checkpoint)"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("pipeline", help="a pipeline name (see `list`) or module:attr")
        _add_settings_flags(p)
    p = sub.add_parser(
        "reset", help="delete a pipeline's checkpoint (and, with --outputs, its outputs)"
    )
    p.add_argument("pipeline")
    p.add_argument(
        "--outputs", action="store_true", help="also delete the results, quarantine and event log"
    )
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    _add_settings_flags(p)
    p = sub.add_parser("feed", help="serve lines to the socket source (instead of netcat)")
    p.add_argument("file", nargs="?", type=Path, help="file of lines (default: standard input)")
    p.add_argument("--port", type=int, default=9999)
    p.add_argument("--host", default="127.0.0.1")
    _add_monitor_commands(sub)
    p = sub.add_parser("samples", help="copy a workload's bundled sample files into a folder")
    p.add_argument("workload", choices=["mobile"])
    p.add_argument("--out", type=Path, required=True, help="landing folder to copy into")
    p = sub.add_parser("generate", help="write a generated event stream into a landing dir")
    from slipstream.generators.command import add_arguments as add_generate_arguments

    add_generate_arguments(p)
    p = sub.add_parser("demo", help="the quick-start demo (default: live trending articles)")
    p.add_argument("--state-dir", type=Path, default=Path("demo-state"))
    p.add_argument(
        "pipeline",
        nargs="?",
        choices=("trending", "mobile"),
        default="trending",
        help="trending: a live generated stream and its top 10 (default); mobile: seed 003",
    )
    p.add_argument(
        "--pipeline", dest="demo_pipeline", choices=("trending", "mobile"), help=argparse.SUPPRESS
    )
    p.add_argument("--duration", help="trending: stop after this long (default: until Ctrl-C)")
    p.add_argument("--rate", type=float, default=2000.0, help="trending: events/s (default 2000)")
    return parser


def _state_dir_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="the state directory of the runs [env SLIPSTREAM_STATE_DIR; default: state]",
    )


def _add_monitor_commands(sub: Any) -> None:
    p = sub.add_parser("status", help="health of each pipeline's queries, from the event logs")
    p.add_argument("pipeline", nargs="?", help="only this pipeline")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _state_dir_flag(p)
    p = sub.add_parser("stop", help="stop a running pipeline cleanly, at a batch boundary")
    p.add_argument("pipeline")
    _state_dir_flag(p)
    p.add_argument("--checkpoint", type=Path, metavar="DIR", help="the run's --checkpoint")
    p.add_argument("--no-wait", action="store_true", help="ask, and return at once")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait (default 120)")
    p = sub.add_parser("dashboard", help="serve the live dashboard of a state directory")
    p.add_argument("pipeline", nargs="?", help="whose results to show (default: latest active)")
    _state_dir_flag(p)
    p.add_argument("--port", type=int, default=DEFAULT_DASHBOARD_PORT, help="0 picks a free port")
    p.add_argument("--bind", default="127.0.0.1", help="address to listen on (127.0.0.1)")


def settings_from_args(args: argparse.Namespace) -> Settings:
    flags = {o.name: getattr(args, o.name, None) for o in OPTIONS}
    return load_settings(args.pipeline, flags, args.config)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="slipstream: %(message)s", stream=sys.stderr)
    for noisy in ("py4j", "pyspark"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    try:
        return _dispatch(args, out)
    except SlipstreamError as exc:
        print(f"slipstream: refused {exc.render()}", file=sys.stderr)
        return EXIT_REFUSED
    except KeyboardInterrupt:
        return 130


def _dispatch(args: argparse.Namespace, out: TextIO) -> int:
    from slipstream import commands

    if args.command == "list":
        return commands.list_pipelines(out)
    if args.command == "check":
        return commands.check(settings_from_args(args), out)
    if args.command == "run":
        return commands.run(settings_from_args(args), out)
    if args.command == "reset":
        return commands.reset(settings_from_args(args), outputs=args.outputs, yes=args.yes, out=out)
    if args.command in ("status", "stop", "dashboard"):
        return _monitor_command(args, out)
    if args.command == "feed":
        from slipstream.generators.feed import serve

        return serve(args.port, args.file, args.host)
    if args.command == "samples":
        from slipstream.demo import copy_samples

        for path in copy_samples(args.out):
            print(path, file=out)
        return 0
    if args.command == "generate":
        from slipstream.generators.command import run as generate

        return generate(args, out)
    if args.command == "demo":
        args.pipeline = args.demo_pipeline or args.pipeline
    if args.command == "demo" and args.pipeline == "trending":
        from slipstream.demo_trending import demo as trending_demo

        return trending_demo(args.state_dir, out, duration=args.duration, rate=args.rate)
    if args.command == "demo":
        from slipstream.demo import demo

        return demo(args.state_dir, out)
    raise AssertionError(args.command)


def _monitor_command(args: argparse.Namespace, out: TextIO) -> int:
    from slipstream import commands

    name = args.pipeline or "status"  # settings need a pipeline name; only the dirs matter
    flags = {"state_dir": args.state_dir, "checkpoint": getattr(args, "checkpoint", None)}
    settings = load_settings(name, flags)
    if args.command == "status":
        return commands.status(settings.state_dir, args.pipeline, args.json, out)
    if args.command == "stop":
        from slipstream.pipelines import get_pipeline

        get_pipeline(args.pipeline)  # a typo fails here, naming the known pipelines
        return commands.stop(settings, out, wait=not args.no_wait, timeout=args.timeout)
    return commands.dashboard(settings.state_dir, args.pipeline, args.port, args.bind, out)
