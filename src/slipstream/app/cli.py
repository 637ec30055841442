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
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TextIO

# Nothing here imports PySpark at import time: a Ctrl-C in the seconds Python takes to import
# it lands inside `main`, which says so in one line (exit 130), never a traceback.
from slipstream.app.exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_REFUSED
from slipstream.errors import SlipstreamError, disk_full

if TYPE_CHECKING:
    from slipstream.api.pipeline import Pipeline


#: what the command line creates is private to its user: checkpoints, quarantined raw records,
#: results and event logs are 0600 files in 0700 folders (generated landing files stay 0644)
PRIVATE_UMASK = 0o077


def entry() -> int:
    """The `slipstream` command (and `python -m slipstream`). A Ctrl-C at any moment of it is
    one line and exit 130 (runs handle their own: runtime.interrupt)."""
    try:
        if hasattr(signal, "pthread_sigmask"):  # held by __main__ until here
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        user_umask = os.umask(PRIVATE_UMASK)
        return main(user_umask=user_umask)
    except KeyboardInterrupt:
        return interrupted()


def interrupted() -> int:
    """Ctrl-C outside a run: one line, exit 130."""
    with contextlib.suppress(OSError, ValueError):  # stderr closed: the exit code says it
        print("\nslipstream: interrupted (Ctrl-C)", file=sys.stderr, flush=True)
    return EXIT_INTERRUPTED


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def main(
    argv: Sequence[str] | None = None, out: TextIO | None = None, user_umask: int | None = None
) -> int:
    """`user_umask`: the one the user ran slipstream with (`entry` makes the process's own
    private); files made for the user to edit and share (`init`) follow it."""
    out = out or sys.stdout
    argv = list(sys.argv[1:] if argv is None else argv)
    args: argparse.Namespace | None = None
    try:
        logging.basicConfig(level=logging.INFO, format="slipstream: %(message)s", stream=sys.stderr)
        for noisy in ("py4j", "pyspark"):
            logging.getLogger(noisy).setLevel(logging.ERROR)
        # py4j logs a foreachBatch function's failure with its traceback; Spark fails the query
        # with it, and the run reports that once, with a code
        logging.getLogger("py4j.clientserver").setLevel(logging.CRITICAL)
        from slipstream.app.parser import build_parser, pipeline_of  # PySpark: seconds

        pipeline = pipeline_of(argv)
        parser = build_parser(pipeline)
        args, unknown = parser.parse_known_args(argv)
        args.user_umask = current_umask() if user_umask is None else user_umask
        if unknown:
            refuse_unknown(parser, args, pipeline, unknown)
        return _dispatch(args, out)
    except SlipstreamError as exc:
        print(f"slipstream: refused {exc.render()}", file=sys.stderr)
        return EXIT_REFUSED
    except KeyboardInterrupt:  # Ctrl-C outside a run (runs handle it: runtime.interrupt)
        return interrupted()
    except Exception as exc:  # noqa: BLE001 - the last net: one line and a log, not a traceback
        full = disk_full(str(exc), getattr(args, "state_dir", None))
        if full is not None:  # ENOSPC anywhere: a traceback log could not be written either
            print(f"slipstream: failed {full.render()}", file=sys.stderr)
            return EXIT_FAILED
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
    from slipstream.app.parser import PIPELINE_COMMANDS
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
    from slipstream.app.parser import generator_pipeline, refuse_missing, settings_from_args
    from slipstream.settings.config import load_settings
    from slipstream.tools import catalog

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
            refuse_missing(pipeline.name, "generator")
        return int(generator.run(args, out))
    if args.command == "init":
        from slipstream.tools.scaffold import class_name, init

        module, test = init(args.name, args.dir, file_mode=0o666 & ~args.user_umask)
        print(f"wrote {module} and {test}", file=out)
        target = f"{args.name}:{class_name(args.name)}"
        here = Path(args.dir).resolve() == Path.cwd().resolve()
        print(
            "next:\n"
            + ("" if here else f"  cd {args.dir}\n")
            + f"  python -m pytest {test.name}      # its test\n"
            f"  slipstream run {target} --help\n"
            f"  slipstream run {target} --input landing   # JSON lines files landing there",
            file=out,
        )
        return 0
    if args.command == "demo":
        return _demo(args.demo_pipeline or args.pipeline, args, out)
    raise AssertionError(args.command)


def _demo(name: str, args: argparse.Namespace, out: TextIO) -> int:
    """The demo of a pipeline, found by its name (tools/catalog.py)."""
    import inspect

    from slipstream.app.parser import refuse_missing
    from slipstream.errors import ConfigError
    from slipstream.pipelines import get_pipeline
    from slipstream.tools import catalog

    pipeline = get_pipeline(name)
    function = catalog.demo(pipeline.name)
    if function is None:
        refuse_missing(pipeline.name, "demo")
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
    from slipstream.settings.config import load_settings

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
