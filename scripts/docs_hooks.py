"""MkDocs hooks of the documentation site (mkdocs.yml `hooks:`), run at every build: the CLI and
error-code reference pages are generated from the code (slipstream.app.reference), so they
cannot drift from it. (The README is a front page; the sections pages once included from it
live in the pages now.)"""

from __future__ import annotations

from typing import Any

from mkdocs.structure.files import File, Files

from slipstream.app.reference import cli_reference, error_reference

GENERATED = {"reference/cli.md": cli_reference, "reference/errors.md": error_reference}


def on_files(files: Files, config: Any) -> Files:
    for path, make in GENERATED.items():
        files.append(File.generated(config, path, content=make()))
    return files
