"""`slipstream init NAME`: a new pipeline module and its test, from a template.

The template is the pipeline a newcomer usually writes first (page views per user in event-time
windows) and shows what docs/howto/own-pipeline.md covers: an input with a schema
and an event-time column, a parameter, an output with a key and the modes it offers,
`not_null` on the key, and a `PipelineHarness` test in which a malformed record is quarantined.
Both files are ready: `slipstream run NAME:CLASS --input DIR` and `python -m pytest test_NAME.py`.
"""

from __future__ import annotations

import importlib.util
import keyword
import re
import sys
from pathlib import Path

from slipstream.errors import ConfigError

MODULE = '''"""{title}: page views per user in event-time tumbling windows.

    slipstream run {name}:{cls} --input landing --window 5m

Input `views`: JSON lines {{"user_id", "page", "ts"}}; `ts` is ISO-8601 (no zone means UTC).
A record that is not JSON, lacks a required field or has a wrong type goes to the quarantine
(STATE_DIR/quarantine/{name}/views) with its reason; it never stops the query.
Output `counts`: {name}_counts(window_start, window_end, user_id, views), keyed by
(window_start, user_id): update mode upserts each window as it grows (the default), append
writes each window once the watermark has passed it, complete rewrites the whole table."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from slipstream.api import (
    Input,
    Output,
    Params,
    Pipeline,
    duration_param,
    not_null,
    spark_interval,
    watermarked,
    window_bounds,
)

# the input's schema: Spark DDL (or a pyspark StructType)
VIEWS = "user_id STRING, page STRING, ts TIMESTAMP"


class {cls}(Pipeline):
    name = "{name}"
    description = "page views per user in event-time tumbling windows"
    inputs = (
        Input("views", VIEWS, required=("user_id", "ts"), event_time="ts"),
    )
    params = (
        duration_param("window", timedelta(minutes=5), "length of the tumbling window"),
        duration_param("watermark", timedelta(minutes=10), "how late a view may arrive"),
    )
    outputs = (
        Output(
            "counts",
            table="{name}_counts",
            key=("window_start", "user_id"),
            modes=("update", "append", "complete"),
            help="views per user and window",
        ),
    )

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        views = watermarked(inputs["views"], "ts", params.watermark)
        counts = views.groupBy(F.window("ts", spark_interval(params.window)), "user_id").agg(
            F.count(F.lit(1)).alias("views")
        )
        counts = counts.select(*window_bounds(), "user_id", "views")
        # the key is never NULL (a NULL key would never conflict in the database sink)
        return {{"counts": not_null(counts, "window_start", "user_id")}}
'''

TEST = '''"""{cls}'s test: micro-batches under control, no sleeping (slipstream.testing)."""

from __future__ import annotations

from pathlib import Path

from slipstream.testing import PipelineHarness, session

from {name} import {cls}


def test_views_per_user_and_window_and_a_malformed_record_is_quarantined(tmp_path: Path) -> None:
    # `session` uncalled: the pipeline is checked first, then one SparkSession per test run
    with PipelineHarness(session, {cls}(), tmp_path, sink="collect", mode="complete") as h:
        h.feed(
            [
                '{{"user_id": "u1", "page": "/", "ts": "2026-01-01T10:01:00Z"}}',
                '{{"user_id": "u1", "page": "/about", "ts": "2026-01-01T10:03:00Z"}}',
                '{{"user_id": "u2", "page": "/", "ts": "2026-01-01T10:06:00Z"}}',
                "this line is not JSON",
            ]
        )
        rows = h.process()
        totals = h.totals["{name}.counts"]
    assert sorted(rows, key=lambda r: (r["window_start"], r["user_id"])) == [
        {{"window_start": "2026-01-01T10:00:00Z", "window_end": "2026-01-01T10:05:00Z",
          "user_id": "u1", "views": 2}},
        {{"window_start": "2026-01-01T10:05:00Z", "window_end": "2026-01-01T10:10:00Z",
          "user_id": "u2", "views": 1}},
    ]
    assert totals["quarantined"] == 1  # the line that is not JSON, with its reason
'''


def class_name(name: str) -> str:
    """`page_views` -> `PageViews`."""
    return "".join(part.capitalize() for part in name.split("_"))


#: the longest name: its table NAME_counts fits PostgreSQL's identifiers (63 bytes; a longer
#: one is cut there), and its files fit any file system's names
MAX_NAME = 63 - len("_counts")


def shadowed(name: str) -> str | None:
    """What a module `name` would hide, or None: a standard-library module, or one installed
    (importable) here. The pipeline's module would hide it, or it the pipeline's."""
    if name in sys.stdlib_module_names:
        return "a module of Python's standard library"
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if found is None:
        return None
    where = found.origin or ", ".join(found.submodule_search_locations or []) or "?"
    return f"an installed module ({where})"


def check_name(name: str) -> None:
    """Refuse a name init cannot write, before anything is written."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or keyword.iskeyword(name):
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"init has value {name[:80]!r}; allowed: a Python module name in lower case",
            "e.g. `slipstream init page_views`",
        )
    if len(name) > MAX_NAME:
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"init has a name of {len(name)} characters; at most {MAX_NAME} (its table "
            f"NAME_counts must fit PostgreSQL's 63-character names)",
            "choose a shorter name, e.g. `slipstream init page_views`",
        )
    hidden = shadowed(name)
    if hidden is not None:
        raise ConfigError(
            "INIT_NAME_SHADOWS",
            f"init {name}: a module named {name} would shadow {hidden}: the pipeline could "
            "not be loaded by that name, or the test could not import",
            f"choose a name no module has, e.g. `slipstream init {name}_pipeline` or "
            "`slipstream init page_views`",
        )


def init(name: str, folder: Path, file_mode: int = 0o644) -> list[Path]:
    """Write `folder/NAME.py` and `folder/test_NAME.py` (as `file_mode`: the command line
    passes the user's umask, not its own private one); refuse a bad name or existing files
    before writing anything."""
    check_name(name)
    folder = Path(folder)
    module, test = folder / f"{name}.py", folder / f"test_{name}.py"
    taken = [str(p) for p in (module, test) if p.exists()]
    if taken:
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"init would overwrite {', '.join(taken)}",
            "choose another name or --dir, or move those files away",
        )
    folder.mkdir(parents=True, exist_ok=True)
    values = {"name": name, "cls": class_name(name), "title": class_name(name)}
    module.write_text(MODULE.format(**values))
    test.write_text(TEST.format(**values))
    for path in (module, test):
        path.chmod(file_mode)  # source files a user reads, shares and commits
    return [module, test]
