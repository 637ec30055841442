"""8. JSON parsing: what strict parsing with reasons costs against Spark's own JSON reader.

Every JSON source in slipstream reads lines as text and parses them with
`slipstream.ingest.parse.parse_json`: one `try_parse_json` into a variant, then per field a
typed value, a presence test and a strict kind test (a number is not a string), and the reason
of the first failed check. Spark's JSON reader is faster but lenient and silent: a number where a
string is expected becomes text, a bad field becomes NULL, nothing says why. This scenario
measures the price of strictness on its own, as batch jobs over the same JSON-lines files that
keep the valid records (as every pipeline does before its transform) and write all their
columns to the noop sink (no streaming, no state, no sink), alternated:

- **spark reader**: `spark.read.schema(S).json(dir)`, rows with a NULL required field dropped
  (PERMISSIVE: the lenient ceiling);
- **from_json**: text lines + `from_json(value, S)`, same drop (Spark's parser, same input);
- **slipstream strict**: text lines + `parse_json` + `accepted` (the rows without a reason):
  the JVM parser (ingest/jvm_parse.py) where it reads the schema, as here;
- **strict expressions**: the same with the parser built from Spark SQL expressions
  (`parse_json_expressions`, the default before the JVM parser), in the same run;
- **strict @ BASELINE**: the same with the parser as it was at commit BASELINE (read with
  `git show`; by default the commit before the object test was made cheap), which turns the
  parser's before/after into a ratio measured in one run. Left out when git has no history."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from bench import inproc
from bench.core import (
    REPO,
    Comparison,
    Context,
    Result,
    Stopwatch,
)
from bench.workloads import write_mobile_files
from slipstream.pipelines.mobile import MobilePipeline

NAME = "parsing"
TITLE = "JSON parsing: slipstream's strict parser vs Spark's JSON reader, batch, same files"
PARSER_PATH = "src/slipstream/ingest/parse.py"
#: the parser before this session's two changes: the object test stopped describing the whole
#: document (f24a9e3), the parse is evaluated once per record behind a barrier (86b13fb)
DEFAULT_BASELINE = "63730f8"
#: the mobile pipeline's record: what the generated files hold
SCHEMA: StructType = MobilePipeline.input("actions").schema  # type: ignore[assignment]
REQUIRED = MobilePipeline.input("actions").required


def parser_at(commit: str, scratch: Path) -> ModuleType | None:
    """slipstream's parse module as it was at `commit`, or None without git history."""
    try:
        text = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{commit}:{PARSER_PATH}"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    path = scratch / f"parse_{commit}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"bench_parse_{commit}", path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def frame(variant: str, input_dir: Path, baseline: ModuleType | None) -> DataFrame:
    from slipstream.ingest.quarantine import accepted

    spark = inproc.session()
    if variant == "spark reader":
        return spark.read.schema(SCHEMA).json(str(input_dir)).dropna(subset=list(REQUIRED))
    raw = inproc.raw_lines(spark, input_dir)
    if variant == "from_json":
        parsed = raw.select(F.from_json("value", SCHEMA).alias("r"), "_source").select("r.*")
        return parsed.dropna(subset=list(REQUIRED))
    if variant == "slipstream strict":
        from slipstream.ingest.parse import parse_json

        return accepted(parse_json(raw, SCHEMA, REQUIRED))
    if variant == "strict expressions":
        from slipstream.ingest.parse import parse_json_expressions

        return accepted(parse_json_expressions(raw, SCHEMA, REQUIRED))
    assert baseline is not None
    return accepted(baseline.parse_json(raw, SCHEMA, REQUIRED))


def measure(
    variant: str, input_dir: Path, lines: int, baseline: ModuleType | None
) -> dict[str, Any]:
    watch = Stopwatch()
    frame(variant, input_dir, baseline).write.format("noop").mode("overwrite").save()
    seconds = watch.seconds()
    return {"seconds": seconds, "lines_per_s": lines / seconds}


def run(ctx: Context) -> Result:
    result = Result(NAME, TITLE)
    files, per_file = ctx.param("files", (10, 20_000), (20, 100_000))
    reps = ctx.param("reps", 3, 5)
    commit = str(ctx.param("baseline", DEFAULT_BASELINE, DEFAULT_BASELINE))
    input_dir = ctx.scratch("input")
    lines = write_mobile_files(input_dir, files, per_file)
    baseline = parser_at(commit, ctx.work) if commit else None
    variants = ["spark reader", "from_json", "slipstream strict", "strict expressions"]
    old = f"strict @ {commit}"
    if baseline is not None:
        variants.append(old)
    else:
        result.notes.append(f"no git history for {commit}: the before/after variant is left out")
    result.params = {
        "lines": lines,
        "files": files,
        "fields": "id string, action string, ts timestamp (all required)",
        "malformed_share": 0.005,
        "repetitions": reps,
        "baseline_commit": commit,
    }
    ctx.log(f"  {lines:,} lines in {files} files")

    def one(variant: str, rep: int) -> dict[str, Any]:
        return measure(variant, input_dir, lines, baseline)

    metrics = {"seconds": "seconds", "lines_per_s": "lines_per_s"}
    pairs = [
        ("slipstream strict", "spark reader"),
        ("strict expressions", "spark reader"),
        ("slipstream strict", "strict expressions"),
        ("from_json", "spark reader"),
    ]
    if baseline is not None:
        pairs.append(("slipstream strict", old))
    Comparison(metrics, "lines_per_s", pairs, "lines/s").run(
        ctx, result, variants, one, reps, lines=lines
    )
    result.notes.append(
        "lines/s = lines / wall time of a batch job keeping the valid records in noop; "
        "ratios are paired within one repetition, median (min-max)"
    )
    return result
