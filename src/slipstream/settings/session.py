"""The one place that builds the SparkSession. Everything else takes it as an argument.

Streaming defaults, each deliberate (see docs/design.md and docs/benchmarks.md):

- `spark.sql.shuffle.partitions` = 2-3x the cores (here: 2 x cores, at least 2), unless the run
  chooses (runtime/partitions.py: on a local master, by its trigger). Spark's 200 is
  sized for large batch jobs; a micro-batch of thousands of rows split 200 ways spends its time
  scheduling empty tasks, and every stateful operator keeps one state store per partition. The
  number is fixed into the checkpoint on first start, so it is chosen once, up front. Measured
  (docs/benchmarks.md): 200 partitions take 15-26x the time per batch of 4; 2 (= cores) is
  faster in the bare engine (0.8x) but no faster for `trending` (0.99), and 2x keeps room to
  give the same checkpoint more cores.
- RocksDB state store with changelog checkpointing: state lives off the JVM heap (no GC pauses
  as state grows), and each batch uploads only a changelog, not a snapshot. Measured against
  the HDFS-backed store: same throughput (0.97), 0.48x the live heap, 0.76x the batch time.
  A live run on a local master makes its checkpoints with the HDFS-backed store instead
  (runtime/partitions.py): at 1,000 events a batch its batches take 0.8-0.9x RocksDB's.
- A local master looks up a batch's files on the driver (`parallelPartitionDiscovery.threshold`):
  over Spark's 32 a job of a task per file did it, 0.6 s of CPU for 500 local files. Clusters
  keep Spark's 32 (an object store's lookups are slow, and worth spreading).
- A local master's `file:` paths go through slipstream's jar: no `chmod` or `readlink` process
  per checkpoint file written (settings/slipstream_jar.py).
- Session time zone UTC: event times, windows and the ISO text in sinks never depend on the host.
- `spark.sql.streaming.noDataProgressEventInterval` 10 s: idle queries still report, so a stalled
  query is told apart from an idle one.
- Adaptive query execution off: Structured Streaming disables it anyway, and saying so avoids a
  warning on every start.
- Spark UI off by default (a server nobody asked for);
  `--conf spark.ui.enabled=true` brings it back.
- Spark's log is quiet: slipstream prints its own one line per batch instead. Every JVM started
  here reads the package's `log4j2.properties` (`-Dlog4j2.configurationFile`, which must reach
  the JVM's command line, so it is set in `spark.driver.extraJavaOptions` before the JVM starts;
  the user's own options follow ours and win). Its level is the command's: ERROR, WARN with
  `--verbose`; a failed query's own ERROR lines (its task, stage, file job, query) only with
  `--verbose`, since the run says the failure once, with its code. The JVM's standard error
  passes through a filter that drops the one line no option turns off, the module system's
  `WARNING: Using incubator modules` (Spark 4 adds the vector module); every other line passes.
- `spark.sql.debug.maxToStringFields` 1000 (Spark: 25): slipstream reads each output's shape from
  the analyzed plan's text, which Spark would otherwise cut ("Truncated the string
  representation of a plan") for a wide record.
- Driver memory follows the machine for local masters (where the driver JVM also runs the
  executors): a quarter of physical RAM, at least 1 GiB and at most 8 GiB (6 GiB on a 24 GiB
  machine instead of Spark's 1 GiB). It must be set before the JVM starts, so it applies only to
  the session that launches the JVM; `--conf spark.driver.memory=4g` overrides it. Clusters keep
  Spark's default (the driver runs no tasks there). A heap under Spark's floor (450 MiB) is
  refused before the JVM starts, and the JVM's own refusal is said with a code
  (settings/driver_memory.py).
- Tungsten pages of 4 MiB (`spark.buffer.pageSize`) and a cleaner GC every 5 minutes
  (`spark.cleaner.periodicGC.interval`, Spark: 30 min). Spark sizes pages from the heap: 64 MiB
  with a 6 GiB heap, and every broadcast hash relation takes at least one page, even for a
  catalog of a few hundred rows. Trending broadcasts its catalog in every batch; each copy stays
  in the driver's block manager until a GC finds it unreachable and the ContextCleaner removes
  it, which on a large, rarely collected heap took long enough for 20 copies (1.28 GB, read from
  a heap dump of the soak) to pile up. Smaller pages make each copy 16x smaller; the periodic GC
  bounds how many accumulate.
- What Spark keeps about finished work is bounded for an application that runs for days: SQL
  executions 100 (Spark: 1,000), jobs and stages 200 (1,000), tasks 10,000 (100,000), root RDDs
  of stage graphs 200 (unbounded). They feed the Spark UI and the status store, which stay in the
  driver heap even with the UI off; slipstream's own monitoring reads progress events instead.
  These are ceilings for runs of weeks, not the cause of issue 16's leak: with the leak fixed and
  Spark's limits, trending's live heap was 202, 174 and 158 MiB at batches 50, 100 and 150 while
  it held 453 executions (3 per batch). Streaming progress keeps Spark's 100 recent updates per
  query (`recentProgress`, which the runner reads).
- Under Spark Connect (`remote`, `--remote sc://HOST:PORT`) no JVM starts here: the session
  takes only the session-level (`spark.sql.*`, `spark.hadoop.*`) defaults above, minus the
  static retention ones; memory, UI, retention and log level belong to the server's start
  (see slipstream.settings.connect).
- Python workers use the driver's interpreter (PYSPARK_PYTHON defaults to `sys.executable`; on
  a local master to a launcher of it, settings/python_workers.py), so code that runs on
  executors sees the same packages as the driver. On a cluster whose hosts keep Python
  elsewhere, set `spark.pyspark.python` (it wins over PYSPARK_PYTHON).
- Where the driver listens (docs/scaling.md). A `local` master binds the driver to 127.0.0.1
  (`spark.driver.host`, `spark.driver.bindAddress`, SPARK_LOCAL_IP): nothing outside this host
  needs to reach it. Any other master (`spark://`, `yarn`, `k8s://`) needs executors on other
  hosts to connect back to the driver, so slipstream pins nothing: `--conf spark.driver.host=`
  wins, then SLIPSTREAM_DRIVER_HOST, then Spark's own choice (SPARK_LOCAL_IP,
  SPARK_LOCAL_HOSTNAME, else the address of this host's name).
- Under `spark-submit` (client mode) the master is spark-submit's `--master` unless the command
  gives its own; slipstream's defaults still apply, except those that need a JVM not yet started
  (driver memory: give spark-submit `--driver-memory`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypedDict

from pyspark.sql import SparkSession

from slipstream.errors import SlipstreamError
from slipstream.settings.connect import session_conf, wait_for_server
from slipstream.settings.delta_package import delta_conf
from slipstream.settings.driver_jvm import launch_jvm
from slipstream.settings.driver_memory import memory_refusal, refuse_small_heap
from slipstream.settings.ivy_jars import as_local_jars
from slipstream.settings.jdbc_drivers import JdbcDriver, driver_conf
from slipstream.settings.kafka_connector import connector_conf
from slipstream.settings.python_workers import python_for_workers
from slipstream.settings.slipstream_jar import LOCAL_FILES, driver_classpath, with_parser_jar

DEFAULT_MASTER = "local[*]"
STATE_PROVIDER = "spark.sql.streaming.stateStore.providerClass"
#: a local master lists a batch's files on the driver, however many (see the module docstring)
LOCAL_LISTING = {"spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000"}
#: Spark's log configuration for every JVM started here (see the module docstring)
LOG4J2 = Path(__file__).with_name("log4j2.properties")
#: the driver's advertised host on a cluster master, when `--conf spark.driver.host` is not given
DRIVER_HOST_ENV = "SLIPSTREAM_DRIVER_HOST"
LOOPBACK = "127.0.0.1"


def is_local(master: str) -> bool:
    """Whether `master` runs the executors inside the driver's JVM (`local`, `local[N]`)."""
    return master == "local" or master.startswith("local[")


def driver_address(master: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Where the driver listens: the loopback for a local master (no one else needs to reach
    it); on a cluster, SLIPSTREAM_DRIVER_HOST if set, else Spark's own choice."""
    if is_local(master):
        return {"spark.driver.host": LOOPBACK, "spark.driver.bindAddress": LOOPBACK}
    host = (os.environ if environ is None else environ).get(DRIVER_HOST_ENV, "").strip()
    return {"spark.driver.host": host} if host else {}


def default_shuffle_partitions(cores: int | None = None) -> int:
    """2 x cores, at least 2: enough parallelism without hundreds of near-empty tasks."""
    return max(2, 2 * (cores or os.cpu_count() or 2))


# Driver heap of a local run: a fraction of physical memory, within a floor and a ceiling.
DRIVER_MEMORY_FRACTION = 0.25
DRIVER_MEMORY_FLOOR_MIB = 1024
DRIVER_MEMORY_CEILING_MIB = 8192

# Bounds on what Spark retains about finished work (status store; see the module docstring).
# Memory pages and the cleaner (see the module docstring): 4 MiB pages instead of Spark's
# heap-derived size (64 MiB with a 6 GiB heap), and a driver GC every 5 minutes so that the
# ContextCleaner frees the blocks of broadcasts no batch uses any more.
MEMORY = {
    "spark.buffer.pageSize": "4m",
    "spark.cleaner.periodicGC.interval": "5min",
}

RETENTION = {
    "spark.sql.ui.retainedExecutions": "100",
    "spark.ui.retainedJobs": "200",
    "spark.ui.retainedStages": "200",
    "spark.ui.retainedTasks": "10000",
    "spark.ui.dagGraph.retainedRootRDDs": "200",
}

# Secrets. Spark replaces a setting by "*********(redacted)" in its event log, UI and environment
# listings when its key or its value matches `spark.redaction.regex`; Spark's pattern looks for
# names (password, token, ...). Under spark-submit the driver's command line, with a `--sink
# postgresql://user:password@host/db` in it, is a value (`sun.java.command`): a URL that carries
# credentials matches too. Spark's warning about a slow listener event prints the event itself,
# unredacted (the environment update, with that command line, took over 1 s under load in
# tests/e2e/cluster/test_cluster.py): off.
SECRETS = {
    "spark.redaction.regex": r"(?i)secret|password|token|access[.]?key|://[^/\s:@]+:[^/\s@]*@",
    "spark.scheduler.listenerbus.logSlowEvent": "false",
}


def physical_memory_mib() -> int | None:
    """Physical RAM of this machine in MiB (None where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    except (ValueError, OSError, AttributeError):
        return None


def default_driver_memory(total_mib: int | None = None) -> str:
    """A quarter of RAM within [1 GiB, 8 GiB], as Spark's `NNNNm`: 24 GiB -> 6144m."""
    total = total_mib if total_mib is not None else physical_memory_mib()
    if total is None:
        return f"{DRIVER_MEMORY_FLOOR_MIB}m"
    share = int(total * DRIVER_MEMORY_FRACTION)
    return f"{min(DRIVER_MEMORY_CEILING_MIB, max(DRIVER_MEMORY_FLOOR_MIB, share))}m"


def streaming_defaults(
    cores: int | None = None, master: str = DEFAULT_MASTER, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    return {
        **({"spark.driver.memory": default_driver_memory()} if is_local(master) else {}),
        **(LOCAL_LISTING if is_local(master) else {}),
        **MEMORY,
        **RETENTION,
        **SECRETS,
        "spark.sql.shuffle.partitions": str(default_shuffle_partitions(cores)),
        "spark.sql.session.timeZone": "UTC",
        STATE_PROVIDER: (
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
        ),
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.streaming.noDataProgressEventInterval": "10000",
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.debug.maxToStringFields": "1000",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        **driver_address(master, environ),
        # Keep the metadata of completed batches short on local disks; enough to recover.
        "spark.sql.streaming.minBatchesToRetain": "50",
        # Hadoop's file system sets permissions itself (umask 022 by default, whatever the
        # process umask): checkpoints, quarantined raw records and file outputs stay private.
        "spark.hadoop.fs.permissions.umask-mode": "077",
    }


class SessionOptions(TypedDict):
    """`build_session`'s arguments, as a run chooses them (runtime/launch.py)."""

    master: str | None
    conf: dict[str, str]
    app_name: str
    log_level: str
    remote: str | None
    connect_wait: float
    kafka: bool
    delta: bool
    jdbc: Sequence[JdbcDriver]


def session_for(spark: SparkSession | None, options: SessionOptions) -> tuple[SparkSession, bool]:
    """The caller's session, or the one built with `options`; and whether it was started
    here (a session that was already running is the caller's, and the caller stops it)."""
    if spark is not None:
        return spark, False
    from pyspark import SparkContext

    # process-wide (getActiveSession is per thread); no public API says "a context exists"
    ours = SparkContext._active_spark_context is None
    return build_session(**options), ours


def build_session(
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    app_name: str = "slipstream",
    log_level: str = "WARN",
    remote: str | None = None,
    kafka: bool = False,
    jdbc: Iterable[JdbcDriver] = (),
    delta: bool = False,
    connect_wait: float = 300.0,
) -> SparkSession:
    """Build (or return the running) SparkSession with slipstream's streaming defaults.

    `master` None: spark-submit's `--master` when this process runs under spark-submit, else
    local[*]. `conf` wins over the defaults, so every default can be overridden with `--conf`.
    With `remote` (sc://HOST:PORT) the session is a Spark Connect client: no JVM starts here;
    a server that does not accept connections yet is waited for up to `connect_wait` seconds.
    `kafka`: a Kafka input or sink is used; Spark's Kafka connector joins `spark.jars.packages`
    (resolved first: CONNECTOR_UNAVAILABLE when it cannot be had; settings/kafka_connector.py),
    which reach Spark as the local jars they resolve to once listed (ivy_jars.py).
    `jdbc`: the JDBC drivers of the sinks a real-time output writes through slipstream's JVM
    writer (`Sink.jdbc`); they join `spark.jars.packages` the same way (jdbc_drivers.py).
    `delta`: a Delta input or output is used: Delta's jar joins them, with its SQL extension and
    catalog (delta_package.py; DELTA_UNAVAILABLE off the Spark 4.2 line, before the JVM)."""
    if remote is not None:
        return remote_session(remote, conf or {}, connect_wait)
    submitted = submitted_master() if master is None else None
    master = master or submitted or DEFAULT_MASTER
    if is_local(master):
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    cores = cores_of(master)
    settings = {**streaming_defaults(cores, master), **dict(conf or {})}
    if is_local(master) and not submitted:  # the JVM starts here, with the jar on its classpath
        settings = {**LOCAL_FILES, **settings, **driver_classpath(settings)}
    # Python workers run the driver's interpreter (its packages: psycopg, pandas, slipstream),
    # not whatever `python3` is first on PATH; locally through a launcher that lets the
    # workers Spark waits 10 s for connect back before they import (python_workers.py). Set
    # PYSPARK_PYTHON or spark.pyspark.python to choose another.
    local_python = python_for_workers(settings) if is_local(master) else None
    os.environ.setdefault("PYSPARK_PYTHON", local_python or sys.executable)
    settings["spark.jars"] = with_parser_jar(settings.get("spark.jars", ""))
    if kafka:
        settings.update(connector_conf(settings))
    settings.update(driver_conf(jdbc, settings))
    if delta:
        local_cores = (cores or os.cpu_count() or 1) if is_local(master) else None
        settings.update(delta_conf(settings, local_cores))
    if not submitted:  # no Ivy at the JVM's start once listed (ivy_jars.py)
        settings = as_local_jars(settings)
    settings |= java_log_options(log_level, settings)
    builder = SparkSession.builder.appName(app_name)
    if not submitted:  # spark-submit's own master stands as it is
        refuse_small_heap(settings)  # before the JVM; driver_memory.py
        builder = builder.master(master)
        launch_jvm({**settings, "spark.master": master, "spark.app.name": app_name})
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:
        refused = memory_refusal(str(exc))  # a heap the collector left under Spark's floor
        if refused is None:
            raise
        raise refused from None
    spark.sparkContext.setLogLevel(log_level)
    return spark


def java_log_options(log_level: str, settings: Mapping[str, str]) -> dict[str, str]:
    """`spark.driver.extraJavaOptions` that point the JVM at slipstream's log configuration at
    `log_level`, before the options `settings` already holds (a -D given twice: the last wins,
    so a user's own -Dlog4j2.configurationFile stands)."""
    stack = "none" if log_level == "ERROR" else "full"  # Java stacks with --verbose only
    failures = "OFF" if log_level == "ERROR" else log_level  # a failed query's own lines
    ours = (
        f"-Dlog4j2.configurationFile={LOG4J2.as_uri()} -Dslipstream.log.level={log_level} "
        f"-Dslipstream.log.stack={stack} -Dslipstream.log.failures={failures}"
    )
    theirs = settings.get("spark.driver.extraJavaOptions", "").strip()
    return {"spark.driver.extraJavaOptions": f"{ours} {theirs}".strip()}


def submitted_master() -> str | None:
    """spark-submit's `--master` when this Python process was started by spark-submit (its JVM
    is up and waiting: PYSPARK_GATEWAY_PORT), read from that JVM; None otherwise (no JVM is
    started here: driver memory must reach the JVM's command line first)."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return None
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's JVM, starts nothing
    return SparkConf().get("spark.master", None)


def driver_memory(conf: Mapping[str, str]) -> str:
    """The driver heap a local run's JVM has or will have: the run's `--conf
    spark.driver.memory`; under spark-submit, what its JVM was given (Spark's 1g by default);
    else slipstream's default for a local session (default_driver_memory)."""
    given = conf.get("spark.driver.memory")
    if given:
        return given
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()  # spark-submit's JVM, already up
        return str(SparkConf().get("spark.driver.memory", "1g"))
    return default_driver_memory()


def remote_session(url: str, conf: Mapping[str, str], connect_wait: float = 300.0) -> SparkSession:
    """A Spark Connect session on the server at `url` with the session-level defaults (the
    server's own settings, memory and UI included, are the server's to choose; its log level
    too). A setting the server refuses fails here, naming it, instead of being ignored. A
    server that does not accept connections yet is waited for, saying so (connect.py)."""
    wait_for_server(url, connect_wait, lambda line: print(line, file=sys.stderr, flush=True))

    defaults = {k: v for k, v in streaming_defaults().items() if k not in RETENTION}
    # pyspark's builder: it also switches this process to Connect mode, which `functions`
    # (F.col, ...) follow; a process is either classic or Connect (a classic session already
    # running here makes it refuse, SESSION_ALREADY_EXIST).
    spark = SparkSession.builder.remote(url).getOrCreate()
    for key, value in session_conf(defaults, conf).items():
        try:
            spark.conf.set(key, value)
        except Exception as exc:  # noqa: BLE001 - Spark's error names the config
            spark.stop()
            raise SlipstreamError(
                "CONNECT_NOT_SUPPORTED",
                f"the Spark Connect server at {url} refused --conf {key}: "
                f"{str(exc).splitlines()[0]}",
                f"set {key} where the server starts (spark-submit ... --conf {key}=VALUE)",
            ) from None
    return spark


def cores_of(master: str) -> int | None:
    """Cores implied by a local master URL (local[2] -> 2); None for clusters and local[*]."""
    if master.startswith("local[") and master.endswith("]"):
        inner = master[6:-1].split(",")[0]
        if inner.isdigit():
            return int(inner)
    if master == "local":
        return 1
    return None
