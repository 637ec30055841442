"""The strict JSON parser in the JVM (ingest/jvm_parse.py, java/src/slipstream/jvm/): content
after the root value is `not JSON`, judged against Python's json module on the same lines; the
same fates, reasons and values as the expression parser on every other line of a generated
corpus; and the session refuses to start without its jar."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DateType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from slipstream import jvm
from slipstream.errors import ConfigError
from slipstream.ingest import jvm_parse
from slipstream.ingest.parse import parse_json, parse_json_expressions
from slipstream.settings.slipstream_jar import with_parser_jar

CORPUS = Path(__file__).parents[2] / "fixtures" / "hostile"
MOBILE = StructType(
    [
        StructField("id", StringType()),
        StructField("action", StringType()),
        StructField("ts", TimestampType()),
    ]
)
REQUIRED = ("id", "action", "ts")
VALID = '{"id": "p1", "action": "a", "ts": "2018-03-02T10:02:33"}'


def test_missing_jar_is_a_config_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(jvm, "jar_path", lambda: tmp_path / "slipstream-parse.jar")
    with pytest.raises(ConfigError) as raised:
        with_parser_jar("")
    assert raised.value.code == "JVM_PARSER_MISSING"
    assert "make jvm" in raised.value.render()


def test_a_session_without_the_jar_says_how_to_give_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    jar = tmp_path / "slipstream-parse.jar"
    jar.write_bytes(b"")
    monkeypatch.setattr(jvm_parse, "jar_path", lambda: jar)
    error = jvm_parse.not_on_classpath()
    assert isinstance(error, ConfigError) and error.code == "JVM_PARSER_MISSING"
    assert f"--jars {jar}" in error.render()


def test_jar_goes_first_on_spark_jars(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    jar = tmp_path / "slipstream-parse.jar"
    jar.write_bytes(b"")
    monkeypatch.setattr(jvm, "jar_path", lambda: jar)
    assert with_parser_jar("") == str(jar)
    assert with_parser_jar(f"/x/a.jar,{jar}") == f"{jar},/x/a.jar"


def lines_frame(spark: SparkSession, folder: Path, lines: list[bytes]) -> DataFrame:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "lines.json").write_bytes(b"\n".join(lines) + b"\n")
    return spark.read.text(str(folder)).select(
        "value", F.col("_metadata.file_path").alias("_source")
    )


def python_judges(line: str) -> dict[str, object] | None:
    """Python's json module on the line: the object, or None when it is not JSON."""
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return None


@pytest.mark.spark
def test_content_after_the_root_value_is_not_json(spark: SparkSession, tmp_path: Path) -> None:
    texts = [
        line.decode() for line in (CORPUS / "json" / "trailing.json").read_bytes().splitlines()
    ] + [
        VALID + " trailing",
        VALID + "{}",
        VALID + " {}",
        VALID + "[]",
        VALID + " 5",
        VALID + " null",
        VALID + "\t",
        " " + VALID,
        VALID,
    ]
    raw = lines_frame(spark, tmp_path / "in", [t.encode() for t in texts])
    parsed = parse_json(raw, MOBILE, REQUIRED)
    assert "slipstream_strict_json" in parsed._jdf.queryExecution().analyzed().toString()
    got = {r["_raw"]: r.asDict() for r in parsed.collect()}
    assert set(got) == set(texts)
    rejected = 0
    for text in texts:
        expected = python_judges(text)
        row = got[text]
        if expected is None:
            assert row["_reason"] == "not JSON", text
            rejected += 1
        else:
            assert row["_reason"] is None, text
            assert (row["id"], row["action"]) == (expected["id"], expected["action"])
    assert rejected == 8  # both forms of the issue, and every other trailing value


WIDE = StructType(
    [
        StructField(name, kind)
        for name, kind in [
            ("s", StringType()),
            ("b", BooleanType()),
            ("t", ByteType()),
            ("sm", ShortType()),
            ("i", IntegerType()),
            ("l", LongType()),
            ("f", FloatType()),
            ("d", DoubleType()),
            ("dt", DateType()),
            ("ts", TimestampType()),
        ]
    ]
)
VALUES = [
    *["null", "true", "false", '"x"', '""', "0", "-0", "1", "-1", "127", "128", "-129"],
    *["32768", "2147483648", "9223372036854775807", "9223372036854775808"],
    *["123456789012345678901234567890", "1234567890123456789012345678901234567890"],
    *["1.5", "1.0", "100.0", "1e3", "1e400", "-1e400", "1e-400", "0.1", "1e39", "-0.0"],
    *["1.7976931348623157e308", "12345678901234567.5", "[]", "[1,2]", "{}", '{"a":{"b":[1]}}'],
    *['"2018-03-02"', '"2018-03-02T10:02:33"', '"2018-03-02T12:04:35+02:00"', '"10:02:33"'],
    *['"2018"', '"2018-03"', '" 2018-03-02"', '"2018-03-02 "', '"+2018-03-02"', '"2018-13-02"'],
    *['"9999-12-31T23:59:59.999"', '"0001-01-01T00:00:00"', '"1520000000"', '"a\\"b\\u0000"'],
    *['"\\ud800"', '"\\ud83d\\ude00"', '"2018-03-02\\u2028"', '"\\t2018-03-02"', '"\u00e9t\u00e9"'],
    *[f'"{text}"' for text in ("2018-03-02 10:02:33", "2016-02-29T23:59:59.5Z", "2018-04-31")],
    *[f'"{text}"' for text in ("2018-03-02T10:02:33.1234567Z", "2018-03-02T10:02:33+18:30")],
]
#: timestamp and date texts: the plain forms the JVM parser reads itself (java PlainTime) and
#: their neighbours, which Spark's Cast decides
TIMES = [
    *["2018-03-02", "2018-03-02T10:02:33", "2018-03-02 10:02:33", "2018-03-02T10:02:33Z"],
    *["2018-03-02T10:02:33.5", "2018-03-02T10:02:33.123456Z", "2018-03-02T10:02:33.1234567Z"],
    *["2018-03-02T10:02:33.Z", "2018-03-02T10:02:33.000", "1969-12-31T23:59:59.999999Z"],
    *["2018-03-02T10:02:33-07:30", "2018-03-02T10:02:33+17:59", "2018-03-02T10:02:33+18:00"],
    *["2018-03-02T10:02:33+18:30", "2018-03-02T10:02:33+0200", "2018-03-02T10:02:33+2:00"],
    *["2018-03-02T10:02:33 Z", "2018-03-02t10:02:33z", "2018-03-02T10:02", "2018-03-02T24:00:00"],
    *["2018-03-02T23:59:60Z", "2016-02-29T12:00:00", "2018-02-29T12:00:00", "2018-04-31"],
    *["0000-01-01T00:00:00Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999Z"],
    *["2024-03-10T02:30:00", "2024-11-03T01:30:00", "2024-03-31T02:30:00", "12018-03-02"],
    *["2018-03-02T10:02:33[UTC]", "2018-03-02T10:02:33 America/Los_Angeles", "2018-3-2"],
]
DUPLICATE_AT = '{{"s":"a","ts":"2018-03-02",{}}}'
SHAPES = [
    *["not json", '{"s": "p1", "ts": "2018-03-02T10:0', "[1, 2]", '"a string"', "5", "null"],
    *['{"s":"a","s":"b"}', '{"s":"a","x":{"k":1,"k":2}}', '{"x":{"k":1,"k":2},"s":"a","s":"b"}'],
    *['{"s":"a","s":"b"} junk', '{"s":"a","s":"b", "x": [1,}', '{"x":"\\q"}', '{"x":01}'],
    *['{"x":NaN}', '{"x":' + "1" * 1001 + "}", "{'s':'p1'}", '{"x":1,}', '{"x":.5}', '{"x":-}'],
    *['{"x":' + "[" * 999 + "]" * 999 + "}", '{"x":' + "[" * 1000 + "]" * 1000 + "}"],
    *['\ufeff{"s":"p1"}', '{"s":"p1","S":1}', '{"s":"p1", "x": "\x01"}', '{"x":"\\ud800"}'],
    # a key twice in a record the fast path would take otherwise (the required fields there):
    # among the undeclared, after a null, spelled by an escape, nested in an array or deeper,
    # after the keys the fast path looks through itself (ROOT_KEYS), or not at all
    *[DUPLICATE_AT.format(rest) for rest in ('"x":1,"x":2', '"s":null,"s":"b"', '"\\u0073":"b"')],
    *[DUPLICATE_AT.format(rest) for rest in ('"x":[{"k":1,"k":2}]', '"x":{"y":{"k":1,"k":2}}')],
    *[DUPLICATE_AT.format(rest) for rest in ('"x":[]', '"ts":"2018-03-02"', '"x":{"s":1}')],
    DUPLICATE_AT.format(",".join(f'"k{i}":{i}' for i in range(20)) + ',"k3":0'),
    DUPLICATE_AT.format(",".join(f'"k{i}":{i}' for i in range(20))),
    DUPLICATE_AT.format(",".join(f'"k{i}":{i}' for i in range(12)) + ',"s":"b"'),
]
#: lines the expression parser takes although content follows the root value
TRAILING = ['{"s":"p1","ts":"2018-03-02"} trailing', '{"s":"p1","ts":"2018-03-02"}{}', "[1] x"]


def generated_lines(seed: int = 26, count: int = 1500) -> list[bytes]:
    """Records of WIDE: each tricky value in each field, then random mixes, then shapes."""
    rng = random.Random(seed)
    base = {"s": '"p1"', "ts": '"2018-03-02T10:02:33"'}
    lines = []
    for field in WIDE.fieldNames():
        for value in VALUES:
            record = {**base, field: value}
            lines.append("{" + ", ".join(f'"{k}": {v}' for k, v in record.items()) + "}")
    for _ in range(count):
        items = [(f, rng.choice(VALUES)) for f in WIDE.fieldNames() if rng.random() < 0.6]
        if rng.random() < 0.3:
            items.append(("extra", rng.choice(VALUES)))
        rng.shuffle(items)
        lines.append("{" + ",".join(f'"{k}":{v}' for k, v in items) + "}")
    encoded = [line.encode("utf-8", "surrogatepass") for line in lines + SHAPES + TRAILING]
    return encoded + [
        b'{"s":"p1\xff","ts":"2018-03-02"}',
        b'{"s":"p1",\x00"ts":"2018-03-02"}',
        b'\x00{"s":"p1"}',
        b"   ",
        b'{"s":"p\xc3\xa9","ts":"2018-03-02"}',
    ]


def as_text(frame: DataFrame) -> dict[str, dict[str, object]]:
    """Every row by its raw line, each value as Spark's text (dates before year 1 included)."""
    rows = frame.select(*[F.col(c).cast("string").alias(c) for c in frame.columns]).collect()
    return {r["_raw"]: r.asDict() for r in rows}


@pytest.mark.spark
def test_same_fates_as_the_expression_parser(spark: SparkSession, tmp_path: Path) -> None:
    assert jvm_parse.supports(WIDE)
    raw = lines_frame(spark, tmp_path / "in", generated_lines())
    required = ("s", "ts")
    old = as_text(parse_json_expressions(raw, WIDE, required))
    new = as_text(jvm_parse.parse_json(raw, WIDE, required))
    assert set(old) == set(new)
    reasons = {row["_reason"] for row in new.values()}
    assert len(reasons) > 40 and None in reasons  # the corpus reaches many checks
    differ = {raw for raw in old if old[raw] != new[raw]}
    # only the fix: content after the root value, which the expression parser reads past
    assert differ == set(TRAILING)
    for raw in differ:
        assert python_judges(raw) is None and new[raw]["_reason"] == "not JSON", raw


@pytest.mark.spark
def test_a_record_sources_null_empty_and_blank_values_are_rejected_by_every_parser(
    spark: SparkSession,
) -> None:
    """issue 43 break 1, below Kafka: where each row is a record (the raw frame carries
    `_empty`, as sources/kafka.py's does), a NULL, empty or blank value is a rejected record with
    its reason in the JVM parser, the expression parser and the CSV parser alike; a file's
    blank line (no `_empty`) is still skipped."""
    from slipstream.ingest.parse import parse_csv
    from slipstream.ingest.records import EMPTY, empty_reason

    valid = '{"id": "p1", "action": "open", "ts": "2026-03-02T10:00:00Z"}'
    values = [valid, None, "", " \t "]
    frame = spark.createDataFrame(
        [(v, f"kafka:t:0:{i}") for i, v in enumerate(values)], "value string, _source string"
    )
    records = frame.withColumn(EMPTY, empty_reason(F.col("value")))
    want = {
        "kafka:t:0:0": None,
        "kafka:t:0:1": "null value",
        "kafka:t:0:2": "empty value",
        "kafka:t:0:3": "blank value",
    }
    schema, required = MOBILE, ("id", "ts")
    for parse in (jvm_parse.parse_json, parse_json_expressions):
        got = {r["_source"]: r["_reason"] for r in parse(records, schema, required).collect()}
        assert got == want, parse
    line = F.lit("p1,open,2026-03-02T10:00:00Z")
    csv = frame.withColumn("value", F.when(F.col("value") == valid, line).otherwise(F.col("value")))
    csv = csv.withColumn(EMPTY, empty_reason(F.col("value")))
    got = {r["_source"]: r["_reason"] for r in parse_csv(csv, schema, required).collect()}
    assert got == want
    for parse in (jvm_parse.parse_json, parse_json_expressions):  # a file's lines
        assert [r["_source"] for r in parse(frame, schema, required).collect()] == ["kafka:t:0:0"]


@pytest.mark.spark
@pytest.mark.parametrize("zone", ["UTC", "+05:30", "America/Los_Angeles", "Europe/Berlin"])
def test_timestamp_and_date_texts_read_as_sparks_cast_in_every_session_zone(
    spark: SparkSession, zone: str
) -> None:
    """The JVM parser's values for timestamp and date texts are Spark's CAST of the text in the
    session's zone (daylight-saving gaps and overlaps included) and its fates the expression
    parser's, whether the text is in a plain form it reads itself or not."""
    schema = StructType([StructField("ts", TimestampType()), StructField("d", DateType())])
    lines = [(json.dumps({"ts": t, "d": t}), t) for t in TIMES]
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        raw = spark.createDataFrame(lines, "value string, _source string")
        texts = F.col("_source")
        got = {}
        for parse in (jvm_parse.parse_json, parse_json_expressions):
            rows = parse(raw, schema, ()).select(
                texts, F.unix_micros("ts").alias("ts"), F.unix_date("d").alias("d"), "_reason"
            )
            got[parse] = {r["_source"]: r.asDict() for r in rows.collect()}
        cast = raw.select(
            texts,
            F.unix_micros(texts.try_cast("timestamp")).alias("ts"),
            F.unix_date(texts.try_cast("date")).alias("d"),
        ).collect()
    finally:
        spark.conf.set("spark.sql.session.timeZone", before or "UTC")
    mine = got[jvm_parse.parse_json]
    assert mine == got[parse_json_expressions]
    taken = [r for r in cast if mine[r["_source"]]["_reason"] is None]
    assert len(taken) > 15  # the plain forms and more
    for row in taken:
        assert (mine[row["_source"]]["ts"], mine[row["_source"]]["d"]) == (row["ts"], row["d"])
