"""The command line's parser: every command and flag, a pipeline's own parameters as flags,
and the Settings a parsed command line stands for (`settings_from_args`). app/cli.py
dispatches what this parses."""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from slipstream.core import values
from slipstream.settings.config import DEFAULT_DASHBOARD_PORT, OPTIONS, Settings, load_settings
from slipstream.tools import catalog, demo_kafka

if TYPE_CHECKING:
    from slipstream.api.pipeline import Pipeline


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
        kind: dict[str, Any]
        if option.kind == "bool":
            kind = {"action": "store_const", "const": True}
        elif option.kind == "multi":
            kind = {"action": "append", "metavar": option.metavar}
        else:
            kind = {"metavar": option.metavar or option.name.upper()}
            if option.const is not None:  # `--dashboard` alone takes the const
                kind |= {"nargs": "?", "const": option.const}
        group.add_argument(flag, dest=option.name, default=None, help=help_text, **kind)


PARAM_DEST = "param:"
HELP = ("-h", "--help")
PIPELINE_COMMANDS = ("check", "run", "reset", "generate")


def _add_param_flags(parser: argparse.ArgumentParser, pipeline: Pipeline) -> None:
    """The pipeline's own parameters: flags of its `run`, `check` and `reset` only."""
    from slipstream.runtime.explain import show_value

    if not pipeline.params:
        return
    group = parser.add_argument_group(
        f"parameters of {pipeline.name} (also accepted as keys of the [params] table)"
    )
    for param in pipeline.params:
        default = "" if param.default is None else f" (default {show_value(param.default)})"
        group.add_argument(
            param.flag,
            dest=PARAM_DEST + param.name,
            default=None,
            metavar=param.metavar,
            help=f"{param.help}{default}",
        )
    names = ", ".join(f"{i.name}{' (table)' if i.static else ''}" for i in pipeline.inputs)
    outs = ", ".join(
        o.name + ("" if o.sink else " (off unless --sink NAME=...)") for o in pipeline.outputs
    )
    parser.epilog = f"inputs of {pipeline.name}: {names}. outputs: {outs}."


def pipeline_of(argv: Sequence[str]) -> Pipeline | None:
    """The pipeline a `run`, `check` or `reset` command names, loaded before the full parse
    (its parameters are flags of that command). Raises its ConfigError when it cannot load."""
    if not argv or argv[0] not in PIPELINE_COMMANDS:
        return None
    helping = any(a in ("-h", "--help") for a in argv)
    try:
        with contextlib.redirect_stderr(io.StringIO()) if helping else contextlib.nullcontext():
            known, _ = build_parser().parse_known_args([a for a in argv if a not in HELP])
    except SystemExit:
        if helping:  # `run --help` without a pipeline: the command's own help, flags only
            return None
        raise
    name = getattr(known, "workload" if argv[0] == "generate" else "pipeline", None)
    if not name:
        return None
    from slipstream.pipelines import get_pipeline

    pipeline = generator_pipeline(name) if argv[0] == "generate" else get_pipeline(name)
    if argv[0] == "generate" and catalog.generator(pipeline.name) is None:
        refuse_missing(pipeline.name, "generator")
    return pipeline


def build_parser(pipeline: Pipeline | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="slipstream",
        description="Streaming pipelines on PySpark Structured Streaming, and the toolkit to "
        "build, test and operate them.",
    )
    parser.add_argument("--version", action="version", version=version_text())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("list", help="list the pipelines")
    for name, text in (
        ("check", "explain the plan and refuse forbidden combinations"),
        ("run", "check, then run a pipeline (resumes from its checkpoint)"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("pipeline", help="a pipeline name (see `list`) or module:attr")
        _add_settings_flags(p)
        if pipeline is not None:
            _add_param_flags(p, pipeline)
    p = sub.add_parser(
        "reset", help="delete a pipeline's checkpoint (and, with --outputs, its outputs)"
    )
    p.add_argument("pipeline")
    p.add_argument(
        "--outputs",
        nargs="?",
        const=True,
        default=False,
        metavar="NAME",
        help="also delete the results, quarantine and event log; with an output's NAME, only "
        "that output's checkpoint and results (the others keep theirs)",
    )
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    _add_settings_flags(p)
    if pipeline is not None:
        _add_param_flags(p, pipeline)
    p = sub.add_parser(
        "state", help="the state each output's checkpoint holds, per stateful operator"
    )
    p.add_argument("pipeline")
    p.add_argument("--output", metavar="NAME", help="only this output")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--keys",
        type=values.flag_type(values.integer(0, 1_000_000)),
        default=0,
        metavar="N",
        help="also show a sample of N keys and values per operator",
    )
    p.add_argument(
        "--batch",
        type=values.flag_type(values.integer(0, 10**12)),
        default=None,
        metavar="N",
        help="the state as of batch N (default: the latest)",
    )
    _state_dir_flag(p)
    p.add_argument("--checkpoint", type=Path, metavar="DIR", help="the run's --checkpoint")
    p = sub.add_parser("feed", help="serve lines to the socket source (instead of netcat)")
    p.add_argument("file", nargs="?", type=Path, help="file of lines (default: standard input)")
    p.add_argument(
        "--port",
        type=values.flag_type(values.port),
        default=9999,
        help="the port to serve on; the socket source's --port (default 9999)",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to listen on (default 127.0.0.1: this machine only)",
    )
    p.add_argument(
        "--to", metavar="kafka://HOST:PORT/TOPIC", help="send the lines to a Kafka topic instead"
    )
    _add_monitor_commands(sub)
    p = sub.add_parser("samples", help="copy a pipeline's bundled sample files into a folder")
    p.add_argument("workload", metavar="PIPELINE", help="a pipeline with samples (mobile)")
    p.add_argument("--out", type=Path, required=True, help="landing folder to copy into")
    p = sub.add_parser("generate", help="write a generated event stream into a landing dir")
    p.add_argument(
        "workload",
        metavar="NAME",
        help="a pipeline with a generator, or the generator's name: "
        + ", ".join(catalog.generator_names()),
    )
    generator = None if pipeline is None else catalog.generator(pipeline.name)
    if generator is not None:
        generator.add_arguments(p)
    p = sub.add_parser("init", help="write a new pipeline module and its test from a template")
    p.add_argument("name", help="the pipeline's name, a Python module name (page_views)")
    p.add_argument(
        "--dir", type=Path, default=Path("."), help="where to write NAME.py and test_NAME.py"
    )
    p = sub.add_parser("demo", help="the quick-start demo (default: live trending articles)")
    p.add_argument("--state-dir", type=Path, default=Path("demo-state"))
    p.add_argument(
        "pipeline",
        nargs="?",
        default="trending",
        help="a pipeline with a demo: trending (a live generated stream and its top 10, the "
        "default) or mobile (seed 003's files)",
    )
    p.add_argument("--pipeline", dest="demo_pipeline", help=argparse.SUPPRESS)
    p.add_argument("--duration", help="stop after this long (default: until Ctrl-C)")
    p.add_argument(
        "--rate",
        type=values.flag_type(values.positive_number),
        help="events/s of a generated stream (default 2000)",
    )
    p.add_argument(
        "--source",
        choices=demo_kafka.TRANSPORTS,
        help="how the generated events reach the pipeline: files (default) or a local Kafka "
        "broker that the demo starts (needs Java and Maven; trending)",
    )
    return parser


def version_text() -> str:
    """`slipstream --version`: slipstream's version and the Spark it runs on."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        ours = version("slipstream")
    except PackageNotFoundError:  # a source checkout on PYTHONPATH, not installed
        ours = "(not installed)"
    try:
        spark = version("pyspark")
    except PackageNotFoundError:
        spark = "not installed"
    return f"slipstream {ours} (PySpark {spark}, Python {sys.version.split()[0]})"


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
    p.add_argument(
        "--timeout",
        type=values.flag_type(values.number(0, 86_400)),
        default=120.0,
        help="seconds to wait, up to a day (default 120)",
    )
    p = sub.add_parser("dashboard", help="serve the live dashboard of a state directory")
    p.add_argument("pipeline", nargs="?", help="whose results to show (default: latest active)")
    _state_dir_flag(p)
    p.add_argument(
        "--port",
        type=values.flag_type(values.port),
        default=DEFAULT_DASHBOARD_PORT,
        help="0 picks a free port",
    )
    p.add_argument("--bind", default="127.0.0.1", help="address to listen on (127.0.0.1)")


def settings_from_args(args: argparse.Namespace) -> Settings:
    flags = {o.name: getattr(args, o.name, None) for o in OPTIONS}
    params = {
        key[len(PARAM_DEST) :]: value
        for key, value in vars(args).items()
        if key.startswith(PARAM_DEST) and value is not None
    }
    return load_settings(args.pipeline, flags, args.config, params=params)


def generator_pipeline(name: str) -> Pipeline:
    """The pipeline whose generator `generate NAME` runs: NAME is the pipeline's name, or its
    generator's own (the module's name: `generate iot` writes iot_steps' input)."""
    from slipstream.errors import ConfigError
    from slipstream.pipelines import get_pipeline

    try:
        return get_pipeline(name)
    except ConfigError as exc:
        owner = catalog.pipeline_of_generator(name)
        if exc.code != "UNKNOWN_PIPELINE" or owner is None:
            raise
        return get_pipeline(owner)


def refuse_missing(name: str, what: str) -> NoReturn:
    from slipstream.errors import ConfigError

    having = sorted(catalog.DEMOS if what == "demo" else catalog.GENERATORS)
    raise ConfigError(
        "CONFIG_BAD_VALUE",
        f"pipeline {name} has no {what}",
        f"pipelines with a {what}: {', '.join(having) or 'none'}",
    )
