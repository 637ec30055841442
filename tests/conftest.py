from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests import class_archive

os.environ.setdefault("TZ", "UTC")

# the shared models' asserts report their values, as a test module's do
pytest.register_assert_rewrite("tests.join_reference")

# Spark's Python workers are separate processes: let them import this checkout's slipstream (the
# code under test), not whichever copy happens to be installed in the environment.
SRC = str(Path(__file__).resolve().parents[1] / "src")
os.environ["PYTHONPATH"] = os.pathsep.join(
    [SRC, *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != SRC]]
)


# Every JVM of the tests (the session's below, and each `slipstream run`, spark-submit or crash
# chain's restart a test starts in a subprocess) runs with the C1 compiler alone and the serial
# collector: a test's JVM runs many small batches, not one long job. `slipstream run mobile`
# over the samples: about half the CPU of the defaults; the session's JVM on
# test_ads.py's late-clicks test (2 pairs, a quiet machine, 2026-11-29): 104-108 CPU s and
# 62-64 s against 139-186 CPU s and 74-97 s with the defaults (C2, G1). Their classes come from a
# class-data-sharing archive once one is made (tests/class_archive.py). A value the environment
# already has stands.
SUBMIT_OPTS = "SPARK_SUBMIT_OPTS"
OURS = os.environ.get(SUBMIT_OPTS, class_archive.SHORT_LIVED_JVM).startswith(
    class_archive.SHORT_LIVED_JVM
)
if OURS:
    os.environ[SUBMIT_OPTS] = class_archive.jvm_options()

JVM_MARKS = ("spark", "slow", "kafka", "postgres", "cluster", "browser")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `delta` need Delta Lake, which runs on the Spark 4.2 line only: on another
    line (the main environment, 4.3) they are skipped; `make test-delta` runs them in
    .venv-delta (scripts/venv-delta.sh)."""
    from slipstream.core import spark_line

    if spark_line.delta():
        return
    why = pytest.mark.skip(
        reason=f"Delta Lake needs the Spark 4.2 line (pyspark {spark_line.version()} here): "
        "make test-delta"
    )
    for item in items:
        if item.get_closest_marker("delta"):
            item.add_marker(why)


def pytest_collection_finish(session: pytest.Session) -> None:
    """A run that will start JVMs has the archive made (once per machine) in the background."""
    if OURS and any(item.get_closest_marker(m) for item in session.items for m in JVM_MARKS):
        class_archive.start_making()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Once the archive is made, the JVMs started from then on use it."""
    if OURS and "SharedArchiveFile" not in os.environ.get(SUBMIT_OPTS, ""):
        os.environ[SUBMIT_OPTS] = class_archive.jvm_options()


@pytest.fixture(scope="session")
def spark(request: pytest.FixtureRequest) -> Iterator[SparkSession]:
    """One SparkSession for the whole test session; with Spark's Kafka connector, and the JDBC
    drivers of the real-time database writer, when a test marked `kafka` was collected (their
    packages must be there when the JVM starts)."""
    from slipstream.testing import session

    kafka = False
    if any(item.get_closest_marker("kafka") for item in request.session.items):
        from tests.services import kafka_connector

        kafka = request.config.stash[KAFKA_CONNECTOR] = kafka_connector() is None
    # real-time outputs into the databases (Kafka tests) write through the JVM writer
    spark = session(kafka=kafka, jdbc=("sqlite", "postgresql") if kafka else ())
    yield spark
    spark.stop()


KAFKA_CONNECTOR = pytest.StashKey[bool]()


@pytest.fixture(scope="session")
def kafka_server() -> Iterator[object]:
    """A throwaway one-node Kafka broker for the session (slipstream.tools.kafka_broker),
    or the reason it could not start."""
    from tests.services import running_kafka

    with running_kafka() as server:
        yield server


@pytest.fixture(scope="session")
def kafka(kafka_server: object, request: pytest.FixtureRequest) -> object:
    """The session's broker. Under CI one that cannot start fails the test; locally the test
    is skipped with the reason (as PostgreSQL's). Session-wide, so that a module's fixture can
    run its pipelines once for several tests (tests/e2e/kafka/test_kafka_pipelines.py)."""
    from tests.services import unavailable

    if isinstance(kafka_server, str):
        unavailable(kafka_server, "the Kafka broker for the tests")
    return kafka_server


@pytest.fixture(scope="session")
def kafka_spark(spark: SparkSession, kafka: object, request: pytest.FixtureRequest) -> SparkSession:
    """The session's Spark, which has the Kafka connector (or the test fails under CI / skips
    locally, with the reason)."""
    from tests.services import kafka_connector, unavailable

    if not request.config.stash.get(KAFKA_CONNECTOR, False):
        unavailable(
            kafka_connector() or "the session started without it", "Spark's Kafka connector"
        )
    return spark


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[object]:
    """A throwaway PostgreSQL cluster for the session (see tests/services.py). Under CI a server
    that cannot start fails the tests that need it; locally they are skipped with the reason."""
    from tests.services import running_postgres

    with running_postgres() as server:
        yield server


@pytest.fixture
def postgres(postgres_server: object) -> object:
    from tests.services import unavailable

    if isinstance(postgres_server, str):
        unavailable(postgres_server)
    return postgres_server


@pytest.fixture
def pg_database(postgres: object, request: pytest.FixtureRequest) -> str:
    """A fresh database, owned by the application role, for one test."""
    import re

    name = "t_" + re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())[:50]
    return postgres.create_database(name)  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def spark_cluster_or_reason(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A Spark standalone master and one worker (2 cores, 2 GiB) on 127.0.0.1, from the installed
    pyspark (slipstream/tools/standalone.py), for the session; or the reason it could not start."""
    from slipstream.tools.standalone import ClusterError, StandaloneCluster

    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"), cores=2, memory="2g")
    try:
        cluster.start()
    except (ClusterError, OSError) as exc:
        cluster.stop()
        yield str(exc)
        return
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def spark_cluster(spark_cluster_or_reason: object) -> object:
    """The session's standalone cluster. Under CI one that cannot start fails the test; locally
    the test is skipped with the reason."""
    if isinstance(spark_cluster_or_reason, str):
        message = f"the Spark standalone cluster could not start: {spark_cluster_or_reason}"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return spark_cluster_or_reason


#: marks under which a test may start Spark (in this process or in a subprocess it runs)
SPARK_MARKS = ("spark", "cluster")


@pytest.fixture(autouse=True)
def _no_spark_without_the_mark(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test without the `spark` mark cannot start Spark: `make test-fast` runs exactly the
    tests that need none. A JVM here, or in a subprocess the test starts, fails with a message
    naming the mark (JAVA_HOME points nowhere for subprocesses)."""
    if any(request.node.get_closest_marker(m) for m in SPARK_MARKS):
        return
    if "spark" in request.fixturenames:
        pytest.fail(f"{request.node.nodeid} uses the spark fixture: mark it with pytest.mark.spark")

    def refuse(*_: object, **__: object) -> None:
        raise RuntimeError(f"{request.node.nodeid} starts Spark: mark it with pytest.mark.spark")

    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", refuse)
    monkeypatch.setattr("slipstream.settings.session.launch_jvm", refuse)
    monkeypatch.setenv("JAVA_HOME", "/nonexistent-java-home-for-tests-without-the-spark-mark")
