"""The session's documented defaults, as pure functions (no Spark)."""

from __future__ import annotations

import os

from slipstream.settings.session import (
    DRIVER_HOST_ENV,
    LOCAL_LISTING,
    MEMORY,
    RETENTION,
    default_driver_memory,
    driver_address,
    is_local,
    streaming_defaults,
    submitted_master,
)
from slipstream.settings.slipstream_jar import driver_classpath


def test_driver_memory_is_a_quarter_of_ram_within_floor_and_ceiling() -> None:
    assert default_driver_memory(24 * 1024) == "6144m"  # this machine: 24 GiB
    assert default_driver_memory(2 * 1024) == "1024m"  # floor: Spark's own default
    assert default_driver_memory(128 * 1024) == "8192m"  # ceiling


def test_driver_memory_and_retention_apply_where_they_belong() -> None:
    local = streaming_defaults(2, "local[2]")
    cluster = streaming_defaults(None, "spark://127.0.0.1:7077")
    assert local["spark.driver.memory"] == default_driver_memory()
    assert "spark.driver.memory" not in cluster  # the cluster's driver runs no tasks
    assert LOCAL_LISTING.items() <= local.items()  # a cluster's object store lists slowly:
    assert not LOCAL_LISTING.keys() & cluster.keys()  # Spark spreads the lookups there
    for key, value in {**MEMORY, **RETENTION}.items():
        assert local[key] == cluster[key] == value
    assert int(local["spark.sql.ui.retainedExecutions"]) < 1000  # Spark's default
    assert local["spark.buffer.pageSize"] == "4m"  # not 64 MiB per broadcast hash relation


def test_only_a_local_master_binds_the_driver_to_the_loopback() -> None:
    local = streaming_defaults(2, "local[2]", environ={})
    assert local["spark.driver.host"] == local["spark.driver.bindAddress"] == "127.0.0.1"
    for master in ("spark://10.0.0.1:7077", "yarn", "k8s://https://10.0.0.1:443"):
        cluster = streaming_defaults(None, master, environ={})
        # executors on other hosts connect back to the driver: Spark's own address stands
        assert "spark.driver.host" not in cluster and "spark.driver.bindAddress" not in cluster


def test_a_cluster_takes_the_driver_host_from_the_environment() -> None:
    env = {DRIVER_HOST_ENV: "10.0.0.7"}
    assert driver_address("spark://10.0.0.1:7077", env) == {"spark.driver.host": "10.0.0.7"}
    assert driver_address("local[*]", env)["spark.driver.host"] == "127.0.0.1"  # local: loopback
    assert driver_address("yarn", {DRIVER_HOST_ENV: " "}) == {}


def test_no_spark_submit_means_no_submitted_master(monkeypatch) -> None:
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    assert submitted_master() is None  # and no JVM was started to find out
    assert is_local("local") and is_local("local[4]") and not is_local("spark://h:7077")


def test_a_url_with_credentials_is_redacted_wherever_spark_lists_settings() -> None:
    import re

    from slipstream.settings.session import SECRETS

    defaults = streaming_defaults(cores=2, master="spark://127.0.0.1:7077", environ={})
    assert defaults["spark.scheduler.listenerbus.logSlowEvent"] == "false"
    pattern = re.compile(defaults["spark.redaction.regex"])  # the same syntax in Java's regex
    assert pattern.pattern == SECRETS["spark.redaction.regex"]
    command = "pyspark-shell run mobile --sink postgresql://app:Zx9%2FKq@db:5432/x"
    assert pattern.search(command)
    assert pattern.search("spark.jdbc.password") and pattern.search("s3a://AKIA:secret@bucket/")
    assert not pattern.search("run mobile --sink postgresql://db:5432/x --input /data/in")
    assert not pattern.search("spark://127.0.0.1:7077")


def test_the_jar_leads_the_drivers_classpath_once_before_the_users_own() -> None:
    jar = driver_classpath({})["spark.driver.extraClassPath"]
    assert jar.endswith("slipstream-parse.jar")
    theirs = {"spark.driver.extraClassPath": f"/opt/a.jar{os.pathsep}{jar}{os.pathsep}/opt/b.jar"}
    assert driver_classpath(theirs)["spark.driver.extraClassPath"].split(os.pathsep) == [
        jar,
        "/opt/a.jar",
        "/opt/b.jar",
    ]
