"""The command line: parse, then dispatch to plain functions (which the tests call directly).

slipstream list
slipstream check PIPELINE [flags]      explain the plan; refuse forbidden combinations
slipstream run PIPELINE [flags]        check, then run (resumes from its checkpoint)
slipstream reset PIPELINE [--outputs]  delete a pipeline's checkpoint (and outputs)
slipstream feed [--port 9999] [FILE]   a line server for the socket source
slipstream state PIPELINE [--output NAME] [--json] [--keys N] [--batch N]
                                       the state each output's checkpoint holds
slipstream status [PIPELINE] [--json]  health of each query, from the event logs
slipstream stop PIPELINE               stop a running pipeline at a batch boundary
slipstream dashboard [PIPELINE]        the live dashboard of a state directory
slipstream generate trending --out DIR an event stream for a pipeline (see --help)
slipstream demo [trending|mobile]      the quick-start demo (what `make demo` runs)
slipstream init NAME [--dir DIR]       a new pipeline module and its test, from a template
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from slipstream.app.exits import EXIT_FAILED, EXIT_REFUSED
from slipstream.core import values
from slipstream.errors import SlipstreamError
from slipstream.settings.config import DEFAULT_DASHBOARD_PORT, OPTIONS, Settings, load_settings
from slipstream.tools import catalog

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
        _refuse_missing(pipeline.name, "generator")
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
        help="a pipeline with a generator, or the generator's name: trending, sensors, iot, "
        "temperature_load, ads, activity",
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
        choices=("files", "kafka"),
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


#: what the command line creates is private to its user: checkpoints, quarantined raw records,
#: results and event logs are 0600 files in 0700 folders (generated landing files stay 0644)
PRIVATE_UMASK = 0o077


def entry() -> int:
    """The `slipstream` command (and `python -m slipstream`)."""
    os.umask(PRIVATE_UMASK)
    return main()


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    argv = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="slipstream: %(message)s", stream=sys.stderr)
    for noisy in ("py4j", "pyspark"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    # py4j logs a foreachBatch function's failure with its traceback; Spark fails the query with
    # it, and the run reports that once, with a code
    logging.getLogger("py4j.clientserver").setLevel(logging.CRITICAL)
    args: argparse.Namespace | None = None
    try:
        pipeline = pipeline_of(argv)
        parser = build_parser(pipeline)
        args, unknown = parser.parse_known_args(argv)
        if unknown:
            refuse_unknown(parser, args, pipeline, unknown)
        return _dispatch(args, out)
    except SlipstreamError as exc:
        print(f"slipstream: refused {exc.render()}", file=sys.stderr)
        return EXIT_REFUSED
    except KeyboardInterrupt:  # Ctrl-C outside a run (runs handle it: runtime.interrupt)
        print("\nslipstream: interrupted (Ctrl-C)", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the last net: one line and a log, not a traceback
        where = write_traceback(exc, getattr(args, "state_dir", None))
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        error = SlipstreamError(
            "INTERNAL_ERROR",
            f"{type(exc).__name__}: {first}",
            f"the full traceback is in {where} (please attach it to a bug report)",
        )
        print(f"slipstream: failed {error.render()}", file=sys.stderr)
        return EXIT_FAILED


def write_traceback(exc: BaseException, state_dir: Path | None) -> Path | str:
    """Write `exc`'s traceback to STATE_DIR/logs/slipstream-TIME-PID.log (else the temp
    folder); returns the file, or a note when no file could be written."""
    import tempfile
    import time
    import traceback

    state = state_dir or Path(os.environ.get("SLIPSTREAM_STATE_DIR") or "state")
    name = f"slipstream-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}.log"
    text = "".join(traceback.format_exception(exc))
    for folder in (Path(state) / "logs", Path(tempfile.gettempdir()) / "slipstream-logs"):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(f"slipstream {' '.join(sys.argv)}\n{text}")
            return folder / name
        except OSError:
            continue
    return "no file (neither STATE_DIR/logs nor the temp folder is writable)"


def refuse_unknown(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    pipeline: Pipeline | None,
    unknown: list[str],
) -> NoReturn:
    """A flag no parser knows: for a pipeline's command, say which parameters it has (another
    pipeline's parameter is the usual mistake: `run mobile --slide 1m`); else argparse's error."""
    from slipstream.errors import ConfigError

    flag = next((a for a in unknown if a.startswith("--")), None)
    if pipeline is not None and args.command in PIPELINE_COMMANDS and flag is not None:
        flag = flag.split("=", 1)[0]
        own = ", ".join(p.flag for p in pipeline.params)
        raise ConfigError(
            "CONFIG_UNKNOWN_KEY",
            f"{pipeline.name} has no parameter {flag}",
            (f"its parameters: {own}" if own else f"{pipeline.name} takes no parameters")
            + f"; `slipstream {args.command} {pipeline.name} --help` lists every flag",
        )
    parser.error(f"unrecognized arguments: {' '.join(unknown)}")


def _dispatch(args: argparse.Namespace, out: TextIO) -> int:
    from slipstream.app import commands

    if args.command == "list":
        return commands.list_pipelines(out)
    if args.command == "check":
        return commands.check(settings_from_args(args), out)
    if args.command == "run":
        return commands.run(settings_from_args(args), out)
    if args.command == "reset":
        from slipstream.app.reset import reset

        return reset(settings_from_args(args), outputs=args.outputs, yes=args.yes, out=out)
    if args.command == "state":
        from slipstream.pipelines import get_pipeline

        name = get_pipeline(args.pipeline).name
        flags = {"state_dir": args.state_dir, "checkpoint": args.checkpoint}
        from slipstream.app.operate import state

        return state(
            load_settings(name, flags),
            out,
            output=args.output,
            as_json=args.json,
            keys=int(args.keys),
            batch=None if args.batch is None else int(args.batch),
        )
    if args.command in ("status", "stop", "dashboard"):
        return _monitor_command(args, out)
    if args.command == "feed":
        from slipstream.tools.generators.feed import serve

        if args.to is not None:
            from slipstream.tools.generators.kafka_out import feed_topic

            return feed_topic(args.to, args.file)
        return serve(args.port, args.file, args.host)
    if args.command == "samples":
        from slipstream.tools.demo import copy_samples

        for path in copy_samples(args.out, args.workload):
            print(path, file=out)
        return 0
    if args.command == "generate":
        pipeline = generator_pipeline(args.workload)
        generator = catalog.generator(pipeline.name)
        if generator is None:
            _refuse_missing(pipeline.name, "generator")
        return int(generator.run(args, out))
    if args.command == "init":
        from slipstream.tools.scaffold import class_name, init

        module, test = init(args.name, args.dir)
        print(f"wrote {module} and {test}", file=out)
        target = f"{args.name}:{class_name(args.name)}"
        print(
            f"next:\n  cd {args.dir}\n  python -m pytest {test.name}      # its test\n"
            f"  slipstream run {target} --help\n"
            f"  slipstream run {target} --input landing   # JSON lines files landing there",
            file=out,
        )
        return 0
    if args.command == "demo":
        return _demo(args.demo_pipeline or args.pipeline, args, out)
    raise AssertionError(args.command)


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


def _refuse_missing(name: str, what: str) -> NoReturn:
    from slipstream.errors import ConfigError

    having = sorted(catalog.DEMOS if what == "demo" else catalog.GENERATORS)
    raise ConfigError(
        "CONFIG_BAD_VALUE",
        f"pipeline {name} has no {what}",
        f"pipelines with a {what}: {', '.join(having) or 'none'}",
    )


def _demo(name: str, args: argparse.Namespace, out: TextIO) -> int:
    """The demo of a pipeline, found by its name (tools/catalog.py)."""
    import inspect

    from slipstream.errors import ConfigError
    from slipstream.pipelines import get_pipeline

    pipeline = get_pipeline(name)
    function = catalog.demo(pipeline.name)
    if function is None:
        _refuse_missing(pipeline.name, "demo")
    given = {k: v for k in ("duration", "rate", "source") if (v := getattr(args, k)) is not None}
    accepted = inspect.signature(function).parameters
    for key in given:
        if key not in accepted:
            raise ConfigError(
                "CONFIG_BAD_VALUE",
                f"the {pipeline.name} demo takes no --{key}",
                f"leave --{key} out, or run `slipstream demo trending --{key} ...`",
            )
    return int(function(args.state_dir, out, **given))


def _monitor_command(args: argparse.Namespace, out: TextIO) -> int:
    from slipstream.app import operate

    name = args.pipeline or "status"  # settings need a pipeline name; only the dirs matter
    if args.command == "stop":
        from slipstream.pipelines import get_pipeline

        name = get_pipeline(args.pipeline).name  # a typo fails here, naming the known ones
    flags = {"state_dir": args.state_dir, "checkpoint": getattr(args, "checkpoint", None)}
    settings = load_settings(name, flags)
    if args.command == "status":
        return operate.status(settings.state_dir, args.pipeline, args.json, out)
    if args.command == "stop":
        return operate.stop(settings, out, wait=not args.no_wait, timeout=args.timeout)
    return operate.dashboard(settings.state_dir, args.pipeline, args.port, args.bind, out)
