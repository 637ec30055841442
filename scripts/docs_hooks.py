"""MkDocs hooks of the documentation site (mkdocs.yml `hooks:`), run at every build:

- the CLI and error-code reference pages are generated from the code (slipstream.app.reference),
  so they cannot drift from it;
- a page may include a section of README.md with a line `<!-- README: ## Heading -->`: the
  section under that heading, up to the next one of its level (the page gives the heading). The
  README keeps the sections other work writes there ("Changing a pipeline", `slipstream state`,
  "Landed files", the tour), and the site shows them without a copy."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

from slipstream.app.reference import cli_reference, error_reference

REPO = Path(__file__).resolve().parents[1]
GENERATED = {"reference/cli.md": cli_reference, "reference/errors.md": error_reference}
INCLUDE = re.compile(r"^<!-- README: (#+ .+?) -->$", re.M)


def readme_section(heading: str, readme: str | None = None) -> str:
    """The README's section under `heading` (its heading line, exactly), up to the next heading
    of the same or a higher level."""
    text = readme if readme is not None else (REPO / "README.md").read_text()
    level = len(heading) - len(heading.lstrip("#"))
    lines = text.split("\n")
    if heading not in lines:
        raise ValueError(f"README.md has no heading {heading!r}")
    start = lines.index(heading) + 1
    body, fenced = [], False
    for line in lines[start:]:
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and re.match(rf"#{{1,{level}}} ", line):
            break
        body.append(line)
    return "\n".join(body).strip() + "\n"


def on_files(files: Files, config: Any) -> Files:
    for path, make in GENERATED.items():
        files.append(File.generated(config, path, content=make()))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    return INCLUDE.sub(lambda m: readme_section(m.group(1)), markdown)
