"""A one-node Apache Kafka broker for development and the tests, from Maven Central's jars.

Kafka 4 runs without ZooKeeper (KRaft): one JVM is both broker and controller, listening on
127.0.0.1 on two free ports, its log in a throwaway folder. Nothing is built: the jars of
`org.apache.kafka:kafka_2.13` and its runtime dependencies are copied once by Maven
(`mvn dependency:copy-dependencies` of a small pom written here) into
`~/.cache/slipstream/kafka-<version>/` (SLIPSTREAM_CACHE moves it), then the broker starts as
Kafka's own scripts start it: `kafka.tools.StorageTool format`, then `kafka.Kafka
server.properties`.

    python -m slipstream.tools.kafka_broker fetch         # the jars (make services does it)
    python -m slipstream.tools.kafka_broker start         # a broker until Ctrl-C
    python -m slipstream.tools.kafka_broker start --port 9092 --topic events:4

Measured on a 2-core machine: the jars (43 MB) in about 20 s the first time, the format 3.5 s,
the broker listening about 3.5 s after its start."""

from __future__ import annotations

import argparse
import base64
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

KAFKA_VERSION = "4.1.1"
SCALA = "2.13"
START_TIMEOUT_S = 60.0
#: how long creating a topic may take on a broker just started (its controller's first answer)
CREATE_TIMEOUT_S = 120.0

POM = """<?xml version="1.0" encoding="UTF-8"?>
<!-- written by slipstream.tools.kafka_broker: the jars of a one-node Kafka broker -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>slipstream</groupId>
  <artifactId>kafka-broker-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId><artifactId>kafka_{scala}</artifactId>
      <version>{version}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.kafka</groupId><artifactId>kafka-storage</artifactId>
      <version>{version}</version>
    </dependency>
    <!-- logging: log4j 2 behind SLF4J 2, as Kafka's own distribution ships it -->
    <dependency>
      <groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId><version>2.0.17</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j2-impl</artifactId>
      <version>2.24.3</version>
    </dependency>
  </dependencies>
</project>
"""

LOG4J2 = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <File name="file" fileName="{log}">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Root level="INFO"><AppenderRef ref="file"/></Root>
    <Logger name="kafka.request.logger" level="WARN"/>
  </Loggers>
</Configuration>
"""


class BrokerError(RuntimeError):
    """The broker's jars could not be fetched, or it did not start; the text says why."""


def cache_dir(version: str = KAFKA_VERSION) -> Path:
    root = os.environ.get("SLIPSTREAM_CACHE") or Path.home() / ".cache" / "slipstream"
    return Path(root) / f"kafka-{version}"


def fetch_jars(version: str = KAFKA_VERSION, quiet: bool = False) -> Path:
    """The folder holding the broker's jars, copied there by Maven if they are not yet."""
    folder = cache_dir(version)
    if (folder / "jars" / f"kafka_{SCALA}-{version}.jar").is_file():
        return folder / "jars"
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BrokerError(
            "Maven (mvn) is needed once to fetch the Kafka broker's jars: apt-get install maven"
        )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pom.xml").write_text(POM.format(scala=SCALA, version=version))
    staging = folder / "jars.partial"
    shutil.rmtree(staging, ignore_errors=True)
    if not quiet:
        print(f"fetching the jars of Kafka {version} into {folder} (once)...", file=sys.stderr)
    done = subprocess.run(
        [mvn, "-q", "-B", "-f", str(folder / "pom.xml"), "dependency:copy-dependencies",
         "-DincludeScope=runtime", f"-DoutputDirectory={staging}"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip()[-1500:]
        raise BrokerError(f"mvn could not fetch the Kafka {version} jars:\n{tail}")
    shutil.rmtree(folder / "jars", ignore_errors=True)
    staging.rename(folder / "jars")
    return folder / "jars"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


class KafkaBroker:
    """One throwaway KRaft broker on 127.0.0.1. `start()`/`stop()` may be repeated: a restart
    keeps its ports and its data (the fault tests need both)."""

    def __init__(
        self,
        port: int | None = None,
        base: Path | None = None,
        version: str = KAFKA_VERSION,
        heap: str = "512m",
    ) -> None:
        self.version = version
        self.jars = fetch_jars(version)
        self.owns_base = base is None
        self.base = Path(base or tempfile.mkdtemp(prefix="slipstream-kafka-"))
        self.base.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.controller_port = free_port()
        self.heap = heap
        self.process: subprocess.Popen[bytes] | None = None
        self.formatted = False

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def url(self, topic: str, **options: str) -> str:
        """`kafka://127.0.0.1:PORT/TOPIC?options`, as a user passes it to --input or --sink."""
        from urllib.parse import urlencode

        query = f"?{urlencode(options)}" if options else ""
        return f"kafka://{self.bootstrap}/{topic}{query}"

    @property
    def log(self) -> Path:
        return self.base / "server.log"

    def _java(self, main: str, *args: str) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise BrokerError("the Kafka broker needs Java 17+: apt-get install openjdk-17-jdk")
        return [
            java, f"-Xmx{self.heap}", "-Xms128m", "-XX:+UseG1GC",
            f"-Dlog4j2.configurationFile={self.base / 'log4j2.xml'}",
            "-cp", f"{self.jars}/*", main, *args,
        ]  # fmt: skip

    def _properties(self) -> Path:
        data = self.base / "data"
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}"
            ),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(data),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # a topic that does not exist is an error, not a new empty topic
            "auto.create.topics.enable": "false",
        }
        path = self.base / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.base / "log4j2.xml").write_text(LOG4J2.format(log=self.log))
        return path

    def start(self) -> KafkaBroker:
        props = self._properties()
        if not self.formatted:
            # a cluster id is a UUID in URL-safe base64 without padding (22 characters; it
            # may start with '-', hence --cluster-id=ID)
            cluster = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            command = self._java(
                "kafka.tools.StorageTool", "format", f"--cluster-id={cluster}", "-c", str(props)
            )
            done = subprocess.run(command, capture_output=True, text=True, timeout=120)
            if done.returncode != 0:
                raise BrokerError(f"kafka-storage format failed: {done.stdout}{done.stderr}")
            self.formatted = True
        out = (self.base / "stdout.log").open("ab")
        self.process = subprocess.Popen(
            self._java("kafka.Kafka", str(props)),
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        out.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _listening(self.port):
            if time.monotonic() > deadline:
                self.stop()
                raise BrokerError(f"the Kafka broker did not listen in {START_TIMEOUT_S:.0f} s")
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=0.1)  # a bounded wait on the process itself
                raise BrokerError(f"the Kafka broker exited at start: {self._tail()}")
        return self

    def _tail(self) -> str:
        texts = [p.read_text(errors="replace") for p in (self.base / "stdout.log", self.log)
                 if p.exists()]  # fmt: skip
        return "\n".join(texts)[-2000:]

    def stop(self, kill: bool = False) -> None:
        """Stop the broker (SIGTERM, a clean shutdown; `kill`: SIGKILL, a crash)."""
        if self.process is None:
            return
        if self.process.poll() is None:
            if kill:
                self.process.kill()
            else:
                self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None

    def destroy(self) -> None:
        self.stop(kill=True)
        if self.owns_base:
            shutil.rmtree(self.base, ignore_errors=True)

    # -- topics, through the Python client (confluent-kafka) ----------------------------------
    def admin(self):  # noqa: ANN201 - confluent_kafka.admin.AdminClient
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap})

    def create_topic(self, name: str, partitions: int = 1) -> str:
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import NewTopic

        admin = self.admin()  # kept referenced until the answer: a freed client cancels it
        # a broker just started listens before its controller answers: a busy machine has
        # kept it from answering in 30 s, so the creation is asked again until CREATE_TIMEOUT_S
        # (a request that went through meanwhile made the topic: then, and only then, a topic
        # that already exists is this one)
        deadline = time.monotonic() + CREATE_TIMEOUT_S
        asked_before = False
        while True:
            try:
                admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
                break
            except KafkaException as exc:
                if asked_before and exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    break
                raise
            except TimeoutError:
                asked_before = True
                if time.monotonic() > deadline:
                    raise BrokerError(
                        f"the broker did not create topic {name!r} in {CREATE_TIMEOUT_S:.0f} s"
                    ) from None
        # the controller's answer comes before the broker's metadata has the topic: a client
        # asking at once may be told it does not exist. Returned once every partition has a leader.
        deadline = time.monotonic() + 30
        while True:
            found = admin.list_topics(topic=name, timeout=10).topics.get(name)
            if (
                found is not None
                and found.error is None
                and len(found.partitions) == partitions
                and all(p.leader >= 0 for p in found.partitions.values())
            ):
                return name
            if time.monotonic() > deadline:
                raise BrokerError(f"topic {name!r} had no leader 30 s after its creation")


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m slipstream.tools.kafka_broker",
        description="A one-node Kafka broker (KRaft) on 127.0.0.1 for development and tests.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("fetch", help="fetch the broker's jars from Maven Central (once)")
    start = sub.add_parser("start", help="run a broker in the foreground until Ctrl-C")
    start.add_argument("--port", type=int, default=9092, help="its port (default 9092; 0: free)")
    start.add_argument("--data", type=Path, help="keep its data here (default: a temp folder)")
    start.add_argument(
        "--topic", action="append", default=[], metavar="NAME[:PARTITIONS]",
        help="create a topic once started (repeatable)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    try:
        if args.command == "fetch":
            print(fetch_jars())
            return 0
        broker = KafkaBroker(port=args.port or None, base=args.data)
        began = time.monotonic()
        broker.start()
    except BrokerError as exc:
        print(f"kafka: {exc}", file=sys.stderr)
        return 1
    try:
        for topic in args.topic:
            name, _, parts = topic.partition(":")
            broker.create_topic(name, int(parts or 1))
        print(
            f"Kafka {broker.version} listening on {broker.bootstrap} "
            f"(started in {time.monotonic() - began:.1f} s; data in {broker.base}; log "
            f"{broker.log}). Ctrl-C stops it.",
            flush=True,
        )
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
        with contextlib.suppress(KeyboardInterrupt):
            broker.process.wait()  # type: ignore[union-attr]
    finally:
        broker.destroy() if args.data is None else broker.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
