"""The pipeline model, bound before Spark starts: named inputs, parameters and outputs, each
output its own query, checkpoint and sink; mistakes refused naming the flag (no Spark)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slipstream.errors import ConfigError, ValidationError
from slipstream.runtime import runner
from slipstream.settings.config import load_settings

ORDERS = "examples.orders:Orders"


@pytest.fixture
def landing(tmp_path: Path) -> dict[str, Path]:
    folders = {name: tmp_path / name for name in ("orders", "payments")}
    for folder in folders.values():
        folder.mkdir()
    return folders


def prepare(landing: dict[str, Path], **flags: Any) -> runner.Prepared:
    inputs = [f"{name}={path}" for name, path in landing.items()]
    params = flags.pop("params", {})
    settings = load_settings(
        ORDERS, {"input": inputs, "state_dir": "st", **flags}, environ={}, params=params
    )
    return runner.prepare(settings)


def test_each_output_is_its_own_query_checkpoint_and_table(landing: dict[str, Path]) -> None:
    prepared = prepare(landing)
    assert prepared.settings.pipeline == "orders"  # module:Class runs under its own name
    assert list(prepared.outputs) == ["paid_orders", "unpaid_orders"]
    assert list(prepared.quarantine_sinks) == ["quarantine.orders", "quarantine.payments"]
    paid, unpaid = prepared.outputs["paid_orders"], prepared.outputs["unpaid_orders"]
    assert (paid.ctx.query_name, paid.ctx.table, paid.ctx.mode) == (
        "orders.paid_orders",
        "paid_orders",
        "append",
    )
    assert paid.ctx.checkpoint == Path("st/checkpoints/orders/paid_orders")
    assert unpaid.ctx.checkpoint == Path("st/checkpoints/orders/unpaid_orders")
    assert prepared.inputs["payments"].quarantine == Path("st/quarantine/orders/payments")
    assert prepared.quarantine_sinks["quarantine.payments"].sink.spec.target == (
        "st/quarantine/orders/payments"
    )
    assert prepared.params.pay_within.total_seconds() == 15 * 60


def test_one_sink_for_all_or_one_per_output(landing: dict[str, Path], tmp_path: Path) -> None:
    both = prepare(landing, sink=f"parquet:{tmp_path}/out")  # one folder per output under it
    assert both.outputs["paid_orders"].sink.spec.target == f"{tmp_path}/out/paid_orders"
    assert both.outputs["unpaid_orders"].sink.spec.target == f"{tmp_path}/out/unpaid_orders"
    mixed = prepare(landing, sink=["sqlite:db.sqlite", "unpaid_orders=json:unpaid"])
    assert mixed.outputs["paid_orders"].sink.spec.kind == "sqlite"
    assert mixed.outputs["unpaid_orders"].sink.spec.target == "unpaid"
    renamed = prepare(landing, table=["unpaid_orders=late_orders"])
    assert renamed.outputs["unpaid_orders"].ctx.table == "late_orders"


@pytest.mark.parametrize(
    ("flags", "code", "words"),
    [
        ({"sink": "paied_orders=sqlite:"}, "CONFIG_UNKNOWN_KEY", "no output 'paied_orders'"),
        ({"mode": "unpaid=append"}, "CONFIG_UNKNOWN_KEY", "no output 'unpaid'"),
        ({"input": "clicks=x"}, "CONFIG_UNKNOWN_KEY", "no input 'clicks'"),
        ({"params": {"pay_whithin": "5m"}}, "CONFIG_UNKNOWN_KEY", "no parameter 'pay_whithin'"),
        ({"params": {"pay_within": "soon"}}, "CONFIG_BAD_VALUE", "--pay-within"),
        ({"mode": "paid_orders=update"}, "MODE_NOT_SUPPORTED", "orders.paid_orders"),
        (
            {"sink": ["paid_orders=json:same", "unpaid_orders=json:same"]},
            "CONFIG_BAD_VALUE",
            "outputs paid_orders and unpaid_orders both write to",
        ),
        (
            {"table": ["unpaid_orders=paid_orders"]},
            "CONFIG_BAD_VALUE",
            "both write to table paid_orders",
        ),
    ],
)
def test_mistakes_are_refused_before_spark_naming_them(
    landing: dict[str, Path], flags: dict[str, Any], code: str, words: str
) -> None:
    with pytest.raises((ConfigError, ValidationError)) as refused:
        if "input" in flags:
            extra = flags.pop("input")
            settings = load_settings(ORDERS, {"input": [extra]}, environ={})
            runner.prepare(settings)
        prepare(landing, **flags)
    assert refused.value.code == code
    assert words in refused.value.message


def test_a_bare_input_path_must_say_which_of_several_streams(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        runner.prepare(load_settings(ORDERS, {"input": str(tmp_path)}, environ={}))
    assert "--input orders=PATH --input payments=PATH" in refused.value.fix


def test_an_output_without_a_default_sink_is_off_until_given_one(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "catalog.csv").write_text("article_id,title,section,published_at\na1,T,s,\n")
    flags = {"input": [str(tmp_path / "in"), f"catalog={tmp_path / 'catalog.csv'}"]}
    off = runner.prepare(load_settings("trending", flags, environ={}))
    assert "archive" not in off.outputs
    on = runner.prepare(
        load_settings("trending", {**flags, "sink": "archive=parquet:arch"}, environ={})
    )
    assert on.outputs["archive"].ctx.mode == "append"
    assert on.outputs["views"].sink.spec.kind == "sqlite"  # the others keep their default
    missing = {"input": str(tmp_path / "in")}
    with pytest.raises(ConfigError) as refused:
        runner.prepare(load_settings("trending", missing, environ={}))
    assert refused.value.code == "CONFIG_MISSING" and "--input catalog=FILE" in refused.value.fix


def test_a_schema_in_spark_ddl_is_the_struct_it_names() -> None:
    from pyspark.sql.types import (
        DoubleType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    from slipstream.api.schema import parse_ddl
    from slipstream.pipelines import Input, event_stream

    struct = StructType(
        [
            StructField("id", LongType(), False),
            StructField("name", StringType()),
            StructField("x", DoubleType()),
            StructField("ts", TimestampType()),
        ]
    )
    ddl = "id BIGINT NOT NULL, name string, x DOUBLE,\n ts TIMESTAMP"
    assert parse_ddl(ddl) == struct
    assert Input("a", ddl) == Input("a", struct)  # both spellings declare the same input
    stream = event_stream("a", ddl, "ts", ("id", "ts"))
    assert stream == Input(
        "a",
        struct,
        required=("id", "ts"),
        event_time="ts",
        sources=("files", "table", "kafka"),
        help="JSON lines {id, name, x, ts}",
    )
    for wrong in ("id BIGINT, tags ARRAY<STRING>", "id", "id BIGINT NULL"):
        with pytest.raises(ConfigError) as caught:
            parse_ddl(wrong)
        assert caught.value.code == "PIPELINE_INVALID"
