"""Spark's Kafka connector, which the PyPI pyspark does not carry, found before Spark starts.

`spark-sql-kafka-0-10_2.13` at the installed pyspark's version is added to
`spark.jars.packages`, the way Spark users get it: Spark resolves it with Ivy from Maven Central
into `~/.ivy2.5.2` (`spark.jars.ivy` moves it) the first time and from there after. A session
that reads or writes no Kafka gets nothing added.

Spark resolves packages inside the JVM launch, and when that fails the JVM exits with an Ivy
report and a stack trace on the terminal. So a connector not yet in the Ivy cache is resolved
first by a `spark-submit --packages` of an empty script whose output is captured: a failure
becomes CONNECTOR_UNAVAILABLE, naming the setting that gives Spark a local jar instead.

The version: the running Spark's when the repository serves it, else the newest earlier release
of the same major version that it serves (a connector of Spark 4.2 runs on Spark 4.3), said in one
line. Which versions are served is read from the repository's `maven-metadata.xml` (the
`spark.jars.repositories` given, then Maven Central), only while the running version's jar is
not in the Ivy cache; unreachable, a connector already cached is taken.

What the user set wins: a connector jar in `spark.jars`, or a `spark-sql-kafka` coordinate of
their own (another version, from their mirror) in `spark.jars.packages`. SLIPSTREAM_KAFKA_CONNECTOR
(a Maven coordinate) replaces the default coordinate for every run of this environment."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from slipstream.errors import ConfigError

ARTIFACT = "spark-sql-kafka-0-10_2.13"
GROUP = "org.apache.spark"
CONNECTOR_ENV = "SLIPSTREAM_KAFKA_CONNECTOR"
PACKAGES = "spark.jars.packages"
#: how long the first resolution may take (Maven Central, about 4 MB of jars)
RESOLVE_TIMEOUT_S = 600
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
#: in the Ivy folder: held while a resolution runs (`ivy_lock`)
LOCK_FILE = "slipstream-resolve.lock"
#: how long to wait for a repository's list of versions
METADATA_TIMEOUT_S = 10

log = logging.getLogger("slipstream")


def default_coordinate(environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    if env.get(CONNECTOR_ENV, "").strip():
        return env[CONNECTOR_ENV].strip()
    import pyspark

    return f"{GROUP}:{ARTIFACT}:{pyspark.__version__}"


def user_connector(conf: Mapping[str, str]) -> str | None:
    """The connector the user chose with --conf (a jar or a coordinate), if any."""
    for key in ("spark.jars", PACKAGES):
        for item in conf.get(key, "").split(","):
            if "spark-sql-kafka" in item:
                return item.strip()
    return None


def ivy_root(conf: Mapping[str, str]) -> Path:
    """Spark's Ivy folder (`spark.jars.ivy`, else `~/.ivy2.5.2`)."""
    return Path(conf.get("spark.jars.ivy") or Path.home() / ".ivy2.5.2").expanduser()


def ivy_jar(coordinate: str, conf: Mapping[str, str]) -> Path:
    """Where Spark's Ivy keeps the connector's jar once resolved."""
    group, artifact, version = coordinate.split(":")[:3]
    return ivy_root(conf) / "jars" / f"{group}_{artifact}-{version}.jar"


def resolve(coordinate: str, conf: Mapping[str, str]) -> float:
    """Have Spark's Ivy resolve `coordinate` into its cache, output captured; the seconds it
    took (0 when it was there). Raises CONNECTOR_UNAVAILABLE with Ivy's own reason."""
    return resolve_all([coordinate], conf, unavailable)


def resolve_all(
    coordinates: Sequence[str], conf: Mapping[str, str], fail: Callable[[str, str], Exception]
) -> float:
    """Have Spark's Ivy resolve the `coordinates` not yet in its cache, in one spark-submit
    whose output is captured; the seconds it took (0 when all were there). Raises
    `fail(coordinates, reason)` with Ivy's own reason when one cannot be had.

    One resolution at a time per Ivy folder, across processes: Ivy has no lock of its own, and
    two runs starting at once on a machine whose cache lacks the jars (a fresh one) would
    download into the same files and fail each other ("download failed"). The second waits
    for the first, then finds the jars in the cache."""
    with ivy_lock(conf):  # held for an instant when everything is cached
        return _resolve_locked(coordinates, conf, fail)


@contextlib.contextmanager
def ivy_lock(conf: Mapping[str, str]) -> Iterator[None]:
    """An exclusive lock on `IVY/slipstream-resolve.lock` (flock: released when the process
    dies). An Ivy folder where no lock file can be made is used without one."""
    import fcntl

    path = ivy_root(conf) / LOCK_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = path.open("a")
    except OSError:
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _resolve_locked(
    coordinates: Sequence[str], conf: Mapping[str, str], fail: Callable[[str, str], Exception]
) -> float:
    # asked under the lock: a resolution that held it may have brought them
    missing = [c for c in coordinates if not ivy_jar(c, conf).is_file()]
    if not missing:
        return 0.0
    wanted = ",".join(missing)
    began = time.monotonic()
    extra = [f"--conf=spark.jars.ivy={conf['spark.jars.ivy']}"] if "spark.jars.ivy" in conf else []
    try:
        done = submit_packages(wanted, extra, "")
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise fail(wanted, str(exc)) from None
    if done.returncode != 0 or not all(ivy_jar(c, conf).is_file() for c in missing):
        text = done.stdout + done.stderr
        found = re.search(r"\[((?:unresolved dependency|download failed): [^\]]+)\]", text)
        last = text.strip().splitlines()[-1] if text.strip() else f"exit {done.returncode}"
        reason = found.group(1) if found else last
        raise fail(wanted, reason)
    return time.monotonic() - began


def submit_packages(
    packages: str, conf_args: Sequence[str], script: str
) -> subprocess.CompletedProcess[str]:
    """A local `spark-submit --packages PACKAGES` of the Python `script`, its output captured:
    Spark's Ivy resolves the packages into its cache first (settings/ivy_jars.py reads, from
    the script, the jars they resolved to). Raises OSError or TimeoutExpired."""
    import pyspark

    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    env.setdefault("SPARK_HOME", str(submit.parent.parent))
    with tempfile.TemporaryDirectory(prefix="slipstream-resolve-") as tmp:
        path = Path(tmp) / "script.py"
        path.write_text(script)
        return subprocess.run(
            [str(submit), "--master", "local[1]", "--packages", packages, *conf_args,
             "--conf", "spark.ui.enabled=false", str(path)],
            capture_output=True, text=True, timeout=RESOLVE_TIMEOUT_S, env=env,
        )  # fmt: skip


def unavailable(coordinate: str, reason: str) -> ConfigError:
    version = coordinate.split(":")[2] if coordinate.count(":") >= 2 else "VERSION"
    return ConfigError(
        "CONNECTOR_UNAVAILABLE",
        f"Spark's Kafka connector {coordinate} could not be resolved from Maven Central: {reason}",
        f"give Spark a local copy: --conf spark.jars=/path/{ARTIFACT}-{version}.jar,"
        "/path/spark-token-provider-kafka-0-10_2.13-VERSION.jar,/path/kafka-clients-VERSION.jar,"
        "/path/commons-pool2-VERSION.jar; or a coordinate your repository serves: "
        f"--conf {PACKAGES}={GROUP}:{ARTIFACT}:VERSION (or set {CONNECTOR_ENV})"
        + _earlier(version),
    )


def _earlier(version: str) -> str:
    """A hint: the previous minor release's connector (Spark 4.2.0's ran slipstream's Kafka
    tests on pyspark 4.3.0, whose own connector the machines of November 2026 could not get)."""
    parts = version.split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit() or parts[1] == "0":
        return ""
    earlier = f"{parts[0]}.{int(parts[1]) - 1}.0"
    return f", e.g. {CONNECTOR_ENV}={GROUP}:{ARTIFACT}:{earlier} (the previous release's)"


def connector_conf(
    conf: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The settings that put the Kafka connector on a new session's classpath (to merge over
    `conf`); {} when the user's own settings already do. Resolves it first (see the module
    docstring): raises CONNECTOR_UNAVAILABLE when it cannot be had."""
    chosen = user_connector(conf)
    if chosen is not None and chosen.count(":") != 2:
        return {}  # a local jar (spark.jars): Spark takes it as it is
    coordinate = chosen or default_coordinate(environ)
    if chosen is None and coordinate == running_coordinate():
        coordinate = served_coordinate(conf)
    resolve(coordinate, conf)
    if chosen is not None:
        return {}
    packages = [p for p in conf.get(PACKAGES, "").split(",") if p.strip()]
    return {PACKAGES: ",".join([*packages, coordinate])}


def running_coordinate() -> str:
    import pyspark

    return f"{GROUP}:{ARTIFACT}:{pyspark.__version__}"


def release(version: str) -> tuple[int, ...] | None:
    """A release's numbers (4.2.0 -> (4, 2, 0)); None for a preview, an RC or a snapshot."""
    return (
        tuple(int(p) for p in version.split(".")) if re.fullmatch(r"\d+(\.\d+)+", version) else None
    )


def pick(running: str, versions: list[str]) -> str | None:
    """The running version if among `versions`, else the newest earlier release of its major
    version among them; None when there is none."""
    if running in versions:
        return running
    now = release(running)
    if now is None:
        return None
    earlier = [
        (r, v) for v in versions if (r := release(v)) is not None and r[0] == now[0] and r < now
    ]
    return max(earlier)[1] if earlier else None


def served_versions(
    conf: Mapping[str, str], group: str = GROUP, artifact: str = ARTIFACT
) -> list[str] | None:
    """The versions of `group:artifact` (the Kafka connector by default) the first repository
    that answers lists (the user's `spark.jars.repositories`, then Maven Central); None when
    none answers."""
    repos = [r.strip().rstrip("/") for r in conf.get("spark.jars.repositories", "").split(",")]
    for repo in [*(r for r in repos if r), MAVEN_CENTRAL]:
        url = f"{repo}/{group.replace('.', '/')}/{artifact}/maven-metadata.xml"
        try:
            with urllib.request.urlopen(url, timeout=METADATA_TIMEOUT_S) as answer:
                text = answer.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            continue
        return re.findall(r"<version>([^<]+)</version>", text)
    return None


def cached_versions(conf: Mapping[str, str]) -> list[str]:
    """The connector's versions already in Spark's Ivy cache."""
    jars = ivy_jar(f"{GROUP}:{ARTIFACT}:0", conf).parent
    prefix = f"{GROUP}_{ARTIFACT}-"
    return [p.name[len(prefix) : -len(".jar")] for p in jars.glob(f"{prefix}*.jar")]


def served_coordinate(conf: Mapping[str, str]) -> str:
    """The running Spark's connector when it is cached or served; else the newest earlier
    release served (or, no repository answering, cached), with one line saying which and why."""
    import pyspark

    running = pyspark.__version__
    wanted = running_coordinate()
    if ivy_jar(wanted, conf).is_file():
        return wanted
    # the choice of an earlier run, while its jar is cached: no repository asked again
    memo = ivy_root(conf) / f"slipstream-kafka-connector-for-{running}"
    known = memo.read_text().strip() if memo.is_file() else ""
    if known and ivy_jar(f"{GROUP}:{ARTIFACT}:{known}", conf).is_file():
        served: list[str] | None = [known]
    else:
        served = served_versions(conf)
    version = pick(running, served if served is not None else cached_versions(conf))
    if version is None or version == running:
        return wanted  # resolved as it is: CONNECTOR_UNAVAILABLE says why when it cannot be
    if served is not None:
        with contextlib.suppress(OSError):
            memo.parent.mkdir(parents=True, exist_ok=True)
            memo.write_text(version + "\n")
    where = "the repository serves" if served is not None else "Spark's Ivy cache holds"
    log.warning(
        "Kafka connector: %s %s, for Spark %s (%s no %s; a connector of the same major "
        "version runs on it)",
        ARTIFACT, version, running, where, running,
    )  # fmt: skip
    return f"{GROUP}:{ARTIFACT}:{version}"
