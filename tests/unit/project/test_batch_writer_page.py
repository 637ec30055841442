"""docs/howto/batch-writer.md shows examples/batch_writer.py's writer as it is (the writer runs in
tests/spark/sinks/test_batch_writer.py), and names the sink the way `--sink` parses it."""

from __future__ import annotations

import inspect

from examples import batch_writer

from slipstream.core.specs import SinkSpec
from tests import doc_blocks

PAGE = "docs/howto/batch-writer.md"


def test_the_pages_example_is_the_tested_writer() -> None:
    shown = doc_blocks.block_after(PAGE, "## An example: SQLite, idempotent by batch id", "python")
    source = inspect.getsource(batch_writer.to_sqlite)
    docstring = f'    """{batch_writer.to_sqlite.__doc__}"""\n'
    assert source.replace(docstring, "") == shown


def test_the_pages_command_names_a_sink_spec_that_parses() -> None:
    command = next(body for lang, _, body in doc_blocks.blocks(PAGE) if lang == "bash")
    target = command.split("--sink ", 1)[1].split()[0]
    assert SinkSpec.parse(target) == SinkSpec("batch", "examples.batch_writer:to_sqlite")
