"""The documentation site's reference pages, generated from the code at build time (the MkDocs
hook in scripts/docs_hooks.py calls these), so they cannot drift from it:

- `cli_reference()`: every command's `--help` from the argparse parsers of `app/parser.py`, the
  built-in pipelines' own parameters and the generators' flags;
- `error_reference()`: every stable code of `slipstream.errors.CODES`, in the catalog's groups,
  with the modules that raise or report it."""

from __future__ import annotations

import argparse
import contextlib
import inspect
import os
import re
from collections.abc import Iterator
from pathlib import Path

from slipstream import errors
from slipstream.app.parser import build_parser
from slipstream.tools import catalog

#: the width `--help` is wrapped to on the page (a terminal's is its own)
WIDTH = 100
PACKAGE = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def _columns(width: int) -> Iterator[None]:
    """argparse wraps help to $COLUMNS: a fixed width, so the page does not depend on the
    terminal the site was built in."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def commands(parser: argparse.ArgumentParser | None = None) -> dict[str, argparse.ArgumentParser]:
    """name -> parser of every `slipstream` subcommand, in the order `--help` lists them."""
    parser = parser or build_parser()
    for action in parser._actions:  # argparse keeps its subparsers in this private list
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("slipstream's parser has no subcommands")


def _help_block(text: str) -> str:
    return "```text\n" + text.rstrip() + "\n```\n"


def cli_reference() -> str:
    """The CLI reference page (Markdown)."""
    from slipstream.pipelines.registry import builtin, load
    from slipstream.runtime.explain import show_value

    with _columns(WIDTH):
        parser = build_parser()
        out = [
            "# CLI reference\n",
            "Generated from the command line's own parsers (`src/slipstream/app/parser.py`) when "
            "the site is built: what `--help` prints, command by command.\n",
            "## slipstream\n",
            _help_block(parser.format_help()),
        ]
        for name, sub in commands(parser).items():
            out += [f"## slipstream {name}\n", _help_block(sub.format_help())]
        out += [
            "## Parameters of the built-in pipelines\n",
            "A pipeline's own parameters are flags of its `run`, `check` and `reset` (and keys "
            "of the `[params]` table of a `--config` file): `slipstream run NAME --help` lists "
            "them with the settings above.\n",
        ]
        for name, module in sorted(builtin().items()):
            pipeline = load(f"{module}:", name)
            out.append(f"### {name}\n")
            out.append(f"{pipeline.description}\n")
            inputs = ", ".join(
                f"`{i.name}`" + (" (table)" if i.static else "") for i in pipeline.inputs
            )
            outputs = ", ".join(
                f"`{o.name}`" + ("" if o.sink else " (off unless `--sink NAME=...`)")
                for o in pipeline.outputs
            )
            out.append(f"Inputs: {inputs}. Outputs: {outputs}.\n")
            if pipeline.params:
                out.append("| flag | default | meaning |\n|---|---|---|")
                for p in pipeline.params:
                    default = "" if p.default is None else f"`{show_value(p.default)}`"
                    meaning = f"{p.help} ({p.allowed})" if p.allowed else p.help
                    out.append(f"| `{p.flag} {p.metavar}` | {default} | {_cell(meaning)} |")
                out.append("")
        out.append("## Generators\n")
        for name in sorted(catalog.GENERATORS):
            pipeline = load(f"{builtin()[name]}:", name)
            generate = commands(build_parser(pipeline))["generate"]
            out += [f"### slipstream generate {name}\n", _help_block(generate.format_help())]
    return "\n".join(out)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def code_groups() -> dict[str, list[str]]:
    """The catalog's groups (its `# comment` lines in errors.py) -> their codes, in order."""
    groups: dict[str, list[str]] = {}
    group = "general"
    for line in inspect.getsource(errors).split("CODES: dict[str, str] = {", 1)[1].splitlines():
        if line.startswith("}"):
            break
        if comment := re.fullmatch(r"\s*# (.+)", line):
            group = comment.group(1)
        elif code := re.match(r'\s*"([A-Z][A-Z_]+)":', line):
            groups.setdefault(group, []).append(code.group(1))
    return groups


def raised_in() -> dict[str, list[str]]:
    """code -> the modules (paths under src/slipstream) whose code names it."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name in ("errors.py", "reference.py"):
            continue
        text = path.read_text()
        for code in errors.CODES:
            if f'"{code}"' in text:
                found.setdefault(code, []).append(str(path.relative_to(PACKAGE)))
    return found


def error_reference() -> str:
    """The error-code reference page (Markdown)."""
    where = raised_in()
    out = [
        "# Error codes\n",
        "Every refusal and every warning slipstream gives has a stable code; the message names "
        "the value and the fix. Generated from `slipstream.errors.CODES` when the site is "
        "built; *where* lists the modules that raise or report the code.\n",
        "A refusal reads `slipstream: refused [CODE] what is wrong` and, on the next line, "
        "`fix: what to do`; a refused command exits with code 2.\n",
    ]
    for group, codes in code_groups().items():
        out.append(f"## {group[0].upper()}{group[1:]}\n")
        out.append("| code | meaning | where |\n|---|---|---|")
        for code in codes:
            modules = ", ".join(f"`{m}`" for m in where.get(code, [])) or "`errors.py`"
            out.append(f"| `{code}` | {_cell(errors.CODES[code])} | {modules} |")
        out.append("")
    return "\n".join(out)
