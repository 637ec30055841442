"""Kafka without a broker or Spark: the kafka:// URL, its options, how it binds an input or a
sink, and the refusals that come before anything starts."""

from __future__ import annotations

import sys

import pytest

from slipstream.core.kafka_url import KafkaTopic
from slipstream.core.specs import SinkSpec
from slipstream.errors import ConfigError
from slipstream.runtime import runner
from slipstream.runtime.explain import explain
from slipstream.settings.config import load_settings

URL = "kafka://127.0.0.1:9092/trending-events"


def test_url_parses_servers_topic_and_spark_options() -> None:
    topic = KafkaTopic.parse(
        "kafka://a.example:9092,10.0.0.2:9093/trending-events?startingOffsets=earliest"
        "&maxOffsetsPerTrigger=5000&failOnDataLoss=false&kafka.security.protocol=SASL_SSL"
    )
    assert topic.servers == "a.example:9092,10.0.0.2:9093"
    assert topic.topic == "trending-events"
    assert topic.spark_options() == {
        "kafka.bootstrap.servers": "a.example:9092,10.0.0.2:9093",
        "subscribe": "trending-events",
        "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": "5000",
        "failOnDataLoss": "false",
        "kafka.security.protocol": "SASL_SSL",
    }
    assert topic.client_config() == {
        "bootstrap.servers": "a.example:9092,10.0.0.2:9093",
        "security.protocol": "SASL_SSL",
    }


def test_per_partition_starting_offsets_are_spark_json() -> None:
    url = URL + '?startingOffsets={"trending-events":{"0":23,"1":-2}}'
    assert KafkaTopic.parse(url).option_map["startingOffsets"] == (
        '{"trending-events":{"0":23,"1":-2}}'
    )


@pytest.mark.parametrize(
    ("url", "said"),
    [
        (URL + "?startingOffset=earliest", "'startingOffset' is not one. Options: startingOffsets"),
        (URL + "?maxOffsetsPerTrigger=0", "maxOffsetsPerTrigger=0: allowed is a whole number"),
        (URL + "?failOnDataLoss=maybe", "failOnDataLoss=maybe: allowed is true or false"),
        (URL + "?startingOffsets=newest", "startingOffsets=newest: allowed is earliest, latest"),
        (URL + "?kafka.auto.offset.reset=earliest", "Spark sets it itself"),
        (URL + "?kafka.bootstrap.servers=x:1", "Spark sets it itself"),
        ("kafka://127.0.0.1/topic", "'127.0.0.1' is not HOST:PORT"),
        ("kafka://127.0.0.1:9092/", "an input reads exactly one of"),
        ("kafka://127.0.0.1:9092/a/b", "is not a Kafka topic name"),
        ("kafka://user:pw@127.0.0.1:9092/t", "security settings go in kafka.* options"),
    ],
)
def test_bad_urls_are_refused_naming_what_is_allowed(url: str, said: str) -> None:
    with pytest.raises(ValueError) as err:
        KafkaTopic.parse(url)
    assert said in str(err.value)


def test_secrets_in_options_are_never_described() -> None:
    topic = KafkaTopic.parse(URL + "?kafka.sasl.jaas.config=x%20password%3D%22hunter2%22")
    assert "hunter2" not in topic.describe()
    assert "hunter2" in topic.spark_options()["kafka.sasl.jaas.config"]


def test_input_flag_binds_a_topic_and_unknown_options_are_a_config_error() -> None:
    settings = load_settings("mobile", {"input": [URL + "?startingOffsets=earliest"]}, environ={})
    assert settings.input[""] == KafkaTopic.parse(URL + "?startingOffsets=earliest")
    named = load_settings("trending", {"input": [f"events={URL}"]}, environ={})
    assert named.input["events"].topic == "trending-events"  # type: ignore[union-attr]
    with pytest.raises(ConfigError) as err:
        load_settings("mobile", {"input": [URL + "?startingOfsets=earliest"]}, environ={})
    assert err.value.code == "CONFIG_BAD_VALUE"
    assert "maxOffsetsPerTrigger" in err.value.message  # the allowed list


def test_toml_path_takes_a_kafka_url(tmp_path) -> None:  # noqa: ANN001
    config = tmp_path / "run.toml"
    config.write_text(f'[inputs.events]\npath = "{URL}?maxOffsetsPerTrigger=100"\n')
    settings = load_settings("trending", {}, config_file=config, environ={})
    topic = settings.input["events"]
    assert isinstance(topic, KafkaTopic) and topic.option_map == {"maxOffsetsPerTrigger": "100"}


def test_prepare_picks_the_kafka_source_and_checks_the_topic_first(monkeypatch) -> None:  # noqa: ANN001
    checked = []
    monkeypatch.setattr("slipstream.sources.kafka.check_topic", checked.append)
    settings = load_settings("mobile", {"input": [URL], "sink": "console"}, environ={})
    prepared = runner.prepare(settings)
    bound = prepared.inputs["actions"]
    assert bound.source is not None and bound.source.kind == "kafka"
    assert bound.quarantine is not None  # parsed, guarded and quarantined as files are
    assert checked == [KafkaTopic.parse(URL)]
    assert "kafka topic trending-events at 127.0.0.1:9092" in explain(prepared)


def test_a_topic_cannot_bind_a_static_table_or_another_source(monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr("slipstream.sources.kafka.check_topic", lambda topic: 1)
    settings = load_settings("trending", {"input": [f"events={URL}", f"catalog={URL}"]}, environ={})
    with pytest.raises(ConfigError) as err:
        runner.prepare(settings)
    assert err.value.code == "CONFIG_BAD_VALUE" and "table" in err.value.message
    settings = load_settings("mobile", {"input": [URL], "source": "files"}, environ={})
    with pytest.raises(ConfigError) as err:
        runner.prepare(settings)
    assert err.value.code == "CONFIG_BAD_VALUE" and "--source files" in err.value.message


def test_no_broker_is_refused_before_spark_starts(monkeypatch) -> None:  # noqa: ANN001
    from tests.services import free_port

    monkeypatch.setattr("slipstream.sources.kafka.CHECK_TIMEOUT_S", 1.0)
    url = f"kafka://127.0.0.1:{free_port()}/actions"
    settings = load_settings("mobile", {"input": [url]}, environ={})
    with pytest.raises(ConfigError) as err:
        runner.prepare(settings)
    assert err.value.code == "KAFKA_UNREACHABLE"
    assert "kafka_broker start" in err.value.fix


def test_without_the_python_client_the_fix_says_what_to_install(monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)
    settings = load_settings("mobile", {"input": [URL]}, environ={})
    with pytest.raises(ConfigError) as err:
        runner.prepare(settings)
    assert err.value.code == "SOURCE_NOT_AVAILABLE"
    assert "slipstream[kafka]" in err.value.fix


def test_sink_url_and_its_at_least_once_description() -> None:
    from slipstream.sinks import make_sink
    from slipstream.sinks.base import SinkContext

    spec = SinkSpec.parse("kafka://127.0.0.1:9092/mobile-counts")
    assert spec.kind == "kafka" and spec.describe() == "kafka://127.0.0.1:9092/mobile-counts"
    sink = make_sink(spec, default_database=None)  # type: ignore[arg-type]
    ctx = SinkContext("mobile", "mobile.counts", "t", ("window_start",), "update", None)  # type: ignore[arg-type]
    assert "at-least-once" in sink.describe(ctx)
    with pytest.raises(ValueError, match="a Kafka sink option"):
        SinkSpec.parse("kafka://127.0.0.1:9092/t?startingOffsets=earliest")


def test_the_connector_is_the_users_when_they_name_one(tmp_path) -> None:  # noqa: ANN001
    from slipstream.settings.kafka_connector import connector_conf, default_coordinate

    assert connector_conf({"spark.jars": "/opt/spark-sql-kafka-0-10_2.13-4.3.0.jar"}) == {}
    import pyspark

    assert default_coordinate({}) == (
        f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"
    )
    assert default_coordinate({"SLIPSTREAM_KAFKA_CONNECTOR": "g:a:1"}) == "g:a:1"
    # already in Spark's Ivy cache: added without a resolution run
    ivy = tmp_path / "ivy"
    (ivy / "jars").mkdir(parents=True)
    (ivy / "jars" / "org.apache.spark_spark-sql-kafka-0-10_2.13-9.9.9.jar").touch()
    conf = {"spark.jars.ivy": str(ivy), "spark.jars.packages": "io.delta:delta-spark_2.13:4.0.0"}
    added = connector_conf(
        conf, {"SLIPSTREAM_KAFKA_CONNECTOR": "org.apache.spark:spark-sql-kafka-0-10_2.13:9.9.9"}
    )
    assert added == {
        "spark.jars.packages": "io.delta:delta-spark_2.13:4.0.0,"
        "org.apache.spark:spark-sql-kafka-0-10_2.13:9.9.9"
    }


@pytest.mark.slow
@pytest.mark.spark  # spark-submit starts a JVM to resolve
def test_a_connector_that_cannot_be_resolved_is_one_line_not_a_jvm_trace(tmp_path) -> None:  # noqa: ANN001
    """The session builder resolves the connector first (a spark-submit of an empty script,
    its output captured): Ivy's reason in one line and the --conf to use, before any JVM of
    a session starts."""
    from slipstream.settings.session import build_session

    conf = {"spark.jars.ivy": str(tmp_path / "ivy")}
    missing = "org.apache.spark:spark-sql-kafka-0-10_2.13:0.0.1-none"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SLIPSTREAM_KAFKA_CONNECTOR", missing)
        with pytest.raises(ConfigError) as err:
            build_session("local[1]", conf, kafka=True)
    assert err.value.code == "CONNECTOR_UNAVAILABLE"
    assert err.value.message.endswith(
        "unresolved dependency: org.apache.spark#spark-sql-kafka-0-10_2.13;0.0.1-none: not found"
    )
    assert "--conf spark.jars=/path/spark-sql-kafka-0-10_2.13-0.0.1-none.jar" in err.value.fix
    from slipstream.settings.kafka_connector import unavailable

    hint = unavailable("org.apache.spark:spark-sql-kafka-0-10_2.13:4.3.0", "not found").fix
    assert hint.endswith(
        "SLIPSTREAM_KAFKA_CONNECTOR=org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0 "
        "(the previous release's)"
    )
    assert "Exception" not in err.value.render() and "\tat " not in err.value.render()


# a Kafka source's progress as Spark 4 reports it (offsets per topic and partition)
KAFKA_PROGRESS = {
    "batchId": 3,
    "numInputRows": 200,
    "sources": [
        {
            "description": "KafkaV2[Subscribe[actions]]",
            "startOffset": {"actions": {"0": 100, "1": 100}},
            "endOffset": {"actions": {"0": 200, "1": 200}},
            "latestOffset": {"actions": {"0": 1000, "1": 200}},
            "numInputRows": 200,
            "metrics": {"maxOffsetsBehindLatest": "800", "avgOffsetsBehindLatest": "400.0"},
        }
    ],
}


def test_consumer_lag_per_partition_from_a_batchs_progress() -> None:
    from slipstream.monitor.kafka_lag import partition_lag, total_lag
    from slipstream.monitor.listener import ConsoleReporter, progress_summary

    assert partition_lag(KAFKA_PROGRESS) == {"actions:0": 800, "actions:1": 0}
    assert progress_summary(KAFKA_PROGRESS)["kafka_lag"] == 800
    files = {"sources": [{"description": "FileStreamSource[file:/in]", "endOffset": {}}]}
    assert total_lag(files) is None and progress_summary(files)["kafka_lag"] is None
    only_metric = {"sources": [{**KAFKA_PROGRESS["sources"][0], "latestOffset": None}]}
    assert total_lag(only_metric) == 800
    import io

    out = io.StringIO()
    ConsoleReporter(out)(
        {"event": "progress", "query": "mobile.counts", "progress": KAFKA_PROGRESS}
    )
    assert out.getvalue().rstrip().endswith("| kafka lag 800")


def test_metrics_show_the_consumer_lag_per_query_and_partition() -> None:
    from prometheus_client import CollectorRegistry

    from slipstream.monitor.metrics import SlipstreamMetrics

    registry = CollectorRegistry()
    metrics = SlipstreamMetrics(registry)
    record = {
        "event": "progress",
        "ts": "2026-11-26T10:00:00Z",
        "pipeline": "mobile",
        "query": "mobile.counts",
        "query_id": "q1",
        "run_id": "r1",
        "progress": {**KAFKA_PROGRESS, "timestamp": "2026-11-26T10:00:00.000Z"},
    }
    metrics.handle(record)
    name = "slipstream_kafka_consumer_lag_records"
    labels = {"pipeline": "mobile", "query": "mobile.counts"}
    assert registry.get_sample_value(name, {**labels, "partition": "actions:0"}) == 800
    assert registry.get_sample_value(name, {**labels, "partition": "actions:1"}) == 0


def test_a_sink_urls_secret_reaches_spark_and_is_never_shown() -> None:
    from slipstream.sinks import make_sink
    from slipstream.sinks.base import SinkContext

    url = "kafka://127.0.0.1:9092/out?kafka.sasl.jaas.config=user%3D%22u%22%20password%3D%22pw9%22"
    spec = SinkSpec.parse(url)
    sink = make_sink(spec, default_database=None)  # type: ignore[arg-type]
    ctx = SinkContext("mobile", "mobile.counts", "t", (), "update", None)  # type: ignore[arg-type]
    assert 'password="pw9"' in sink.topic.spark_options()["kafka.sasl.jaas.config"]  # type: ignore[attr-defined]
    for shown in (spec.describe(), sink.describe(ctx), sink.location(ctx)):
        assert "pw9" not in str(shown)


# --- run-time faults, from what Spark said on a real broker (tests/e2e/kafka/test_kafka_faults.py)

RECREATED = (
    "[STREAM_FAILED] Query [id = 2f4c, runId = 24b6] terminated with exception: Some data may "
    "have been lost because they are not available in Kafka any more;\neither the data was aged "
    "out by Kafka or the topic may have been deleted before all the data in the\ntopic was "
    "processed.\nIf you don't want your streaming query to fail on such cases, set the source "
    "option failOnDataLoss to false.\nReason: Partition acts-0 offset was changed from 200 to "
    "10.\nThis could be either 1) a user error that the start offset is set beyond available "
    "offset when starting query, or 2) the kafka topic-partition is deleted and re-created."
)
TRUNCATED_IN_FOREACH = (
    "[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function in "
    "foreach batch sink. Reason: An exception was raised by the Python Proxy. Return Message: "
    'Traceback (most recent call last):\n  File "sqlite.py", line 157, in merge\n'
    "py4j.protocol.Py4JJavaError: An error occurred while calling o376.getResult.\nCaused by: "
    "org.apache.spark.sql.kafka010.KafkaIllegalStateException: Some data may have been lost "
    "because they are not available in Kafka any more;\nReason: Could not read records in "
    "offset [200, 400) for topic partition acts-0\nwith consumer group spark-kafka-source-1."
)
DELETED = (
    "java.util.concurrent.ExecutionException: org.apache.kafka.common.errors."
    "UnknownTopicOrPartitionException: This server does not host this topic-partition."
)
BROKER_GONE = (
    "java.util.concurrent.ExecutionException: org.apache.kafka.common.errors.TimeoutException: "
    "Timed out waiting for a node assignment. Call: listNodes"
)


@pytest.mark.parametrize(
    ("text", "code", "said"),
    [
        (RECREATED, "KAFKA_DATA_LOST", "Partition acts-0 offset was changed from 200 to 10"),
        (TRUNCATED_IN_FOREACH, "KAFKA_DATA_LOST", "offset [200, 400) for topic partition acts-0"),
        (DELETED, "KAFKA_TOPIC_NOT_FOUND", "was deleted while the run read it"),
        (BROKER_GONE, "KAFKA_UNREACHABLE", "Timed out waiting for a node assignment"),
    ],
)
def test_a_kafka_failure_at_run_time_has_a_code_the_topic_and_the_fix(
    text: str, code: str, said: str
) -> None:
    from slipstream.sources.kafka_faults import as_kafka_failure

    other = KafkaTopic.parse("kafka://127.0.0.1:9092/other")
    acts = KafkaTopic.parse("kafka://127.0.0.1:9092/acts?startingOffsets=earliest")
    # Spark names the partition of lost records; the others name none: the run's one input
    inputs = [other, acts] if code == "KAFKA_DATA_LOST" else [acts]
    error = as_kafka_failure(RuntimeError(text), "mobile.counts", inputs)
    assert error is not None and error.code == code
    assert said in error.message and "topic acts at 127.0.0.1:9092" in error.message
    if code == "KAFKA_DATA_LOST":
        assert "kafka://127.0.0.1:9092/acts?startingOffsets=earliest&failOnDataLoss=false" in (
            error.fix
        )
    sink = KafkaTopic.parse("kafka://127.0.0.1:9092/acts", role="sink")
    assert as_kafka_failure(RuntimeError(text), "mobile.counts", [sink]) is None  # no input
    assert as_kafka_failure(RuntimeError("division by zero"), "q", [acts]) is None


def test_a_topic_read_in_bounded_batches_keeps_its_batches_through_the_ingest_stage() -> None:
    """With `maxOffsetsPerTrigger` the ingest stage writes and the outputs read one bronze batch
    per batch, so lateness is judged at the source's batch boundaries (ingest_stage.per_batch)."""
    from types import SimpleNamespace

    from slipstream.core.kafka_url import KafkaTopic
    from slipstream.runtime.ingest_stage import per_batch

    def bound(url: str) -> SimpleNamespace:
        binding = SimpleNamespace(topic=KafkaTopic.parse(url))
        return SimpleNamespace(binding=binding, source_options={})

    assert per_batch(bound("kafka://127.0.0.1:9092/t?maxOffsetsPerTrigger=60"))  # type: ignore[arg-type]
    assert not per_batch(bound("kafka://127.0.0.1:9092/t"))  # type: ignore[arg-type]


def test_the_connector_is_the_running_sparks_else_the_newest_earlier_one_served(
    tmp_path,
    monkeypatch,
    caplog,  # noqa: ANN001
) -> None:
    """issue 41: the commands run as typed where the repository serves no connector for the
    running Spark: the newest earlier release of the same major version, said in one line."""
    from slipstream.settings import kafka_connector as kc

    versions = ["3.5.6", "4.1.2", "4.2.0", "4.2.0-preview5", "4.2.1", "5.0.0"]
    assert kc.pick("4.3.0", versions) == "4.2.1"
    assert kc.pick("4.2.1", versions) == "4.2.1"
    assert kc.pick("4.0.0", ["3.5.6"]) is None  # another major version is never taken
    assert kc.pick("4.3.0-preview1", versions) is None

    conf = {"spark.jars.ivy": str(tmp_path / "ivy")}
    monkeypatch.setattr("pyspark.__version__", "4.3.0")
    monkeypatch.setattr(kc, "served_versions", lambda conf: ["4.1.2", "4.2.0"])
    with caplog.at_level("WARNING", logger="slipstream"):
        chosen = kc.served_coordinate(conf)
    assert chosen == "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"
    assert [r.getMessage() for r in caplog.records] == [
        "Kafka connector: spark-sql-kafka-0-10_2.13 4.2.0, for Spark 4.3.0 (the repository "
        "serves no 4.3.0; a connector of the same major version runs on it)"
    ]
    # served: taken as it is, without a word
    monkeypatch.setattr(kc, "served_versions", lambda conf: ["4.2.0", "4.3.0"])
    caplog.clear()
    assert kc.served_coordinate(conf).endswith(":4.3.0") and not caplog.records
    # no repository answers: what Spark's Ivy cache holds
    monkeypatch.setattr(kc, "served_versions", lambda conf: None)
    jars = tmp_path / "ivy" / "jars"
    jars.mkdir(parents=True)
    (jars / "org.apache.spark_spark-sql-kafka-0-10_2.13-4.1.2.jar").touch()
    assert kc.served_coordinate(conf).endswith(":4.1.2")
