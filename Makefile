# slipstream: two commands on a fresh machine.
#   make demo   the flagship job on embedded defaults (local Spark, files, SQLite)
#   make test   lint (ruff, mypy) + the whole suite (installs and starts what the tests need)
#   make test-fast   lint + every test without Spark or a service (your own loop)
#   make test-delta  the Spark 4.2 line's leg (Delta Lake, real-time refusals) in .venv-delta
#   make chaos / make stress   the fault campaign; every pipeline case under 4x and 8x CPU pressure
#   make docs   the documentation site, strict, into site/ (tests/unit/project/test_docs_site.py builds it too)

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# two stamps: the package alone (all `make demo` needs) and the package with its test and docs
# extras (pytest, ruff, playwright, confluent-kafka, mkdocs: `make test`, `lint`, `docs`)
BASE_STAMP := $(VENV)/.installed-package
STAMP      := $(VENV)/.installed
# slipstream's JVM parser (java/), compiled against the installed pyspark's jars into the package
# (src/slipstream/jvm/slipstream-parse.jar, shipped in the wheel; not in git): `make jvm`
JAR      := src/slipstream/jvm/slipstream-parse.jar
JAVA_SRC := $(wildcard java/src/slipstream/jvm/*.java)

FAST := not spark and not cluster and not postgres and not browser and not slow and not kafka

.PHONY: venv venv-delta test-delta jvm docs demo test test-fast lint format services bench bench-quick bench-peers soak clean check-java wheel chaos stress

# the development environment: the package, its test and docs extras, the JVM parser
venv: $(STAMP) $(JAR)

# the package and its runtime dependencies only (pyspark, pandas, pyarrow, ...)
$(BASE_STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "slipstream needs Python 3.11+"'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $(BASE_STAMP)

$(STAMP): $(BASE_STAMP)
	$(PY) -m pip install -q -e '.[test,docs]'
	touch $(STAMP)

jvm: $(JAR)

$(JAR): $(BASE_STAMP) $(JAVA_SRC)
	@command -v javac >/dev/null || { echo "building slipstream's JVM parser needs a JDK 17+ (apt-get install openjdk-17-jdk-headless)"; exit 1; }
	rm -rf build/jvm && mkdir -p build/jvm/classes
	javac --release 17 -Xlint:-options -d build/jvm/classes \
	  -cp "$$($(PY) -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')/jars/*" $(JAVA_SRC)
	jar --create --file $@.tmp -C build/jvm/classes .
	mv $@.tmp $@

check-java:
	@command -v java >/dev/null || { echo "slipstream needs Java 17+ (apt-get install openjdk-17-jre-headless)"; exit 1; }

# the package and the JVM parser, no test or docs extras; Ctrl-C (exit 130) is a clean end
demo: $(BASE_STAMP) $(JAR) check-java
	$(VENV)/bin/slipstream demo || [ $$? -eq 130 ]

# the documentation site (mkdocs.yml): strict, so a broken link or a missing page fails it
docs: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

lint: venv
	$(VENV)/bin/ruff check src tests bench examples
	$(VENV)/bin/ruff format --check src tests bench examples
	$(VENV)/bin/mypy

format: venv
	$(VENV)/bin/ruff format src tests bench examples
	$(VENV)/bin/ruff check --fix src tests bench examples

# Real services for the tests: PostgreSQL and headless Chromium from Debian (installed if missing).
services:
	bash scripts/install-services.sh

# two pytest workers, a test file each at a time (its module fixtures run once), in the files'
# order: the slow end-to-end files first, the short unit files last to even out the end
TEST_WORKERS ?= 2
# then the load harness's small set alone (its CPU hogs would slow the other worker's tests past
# their bounds), then the Spark 4.2 leg. The 4.2 line's environment (a download and a build of
# pyspark 4.2 on a fresh machine: about 1.5 minutes, mostly the network and the disk) is made in
# the background meanwhile, its output in build/venv-delta.log.
LOAD_SET := tests/e2e/load
test: venv check-java lint services
	@mkdir -p build; \
	$(MAKE) --no-print-directory venv-delta > build/venv-delta.log 2>&1 & delta=$$!; \
	status=0; \
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
	  --ignore=$(LOAD_SET) || status=$$?; \
	if [ $$status -eq 0 ]; then $(PY) -m pytest -p no:cacheprovider $(LOAD_SET) || status=$$?; fi; \
	if ! wait $$delta; then \
	  echo "the 4.2 line's environment failed:"; cat build/venv-delta.log; \
	  [ $$status -ne 0 ] || status=1; \
	fi; \
	exit $$status
	$(MAKE) test-delta

# the second Spark line (core/spark_line.py): .venv-delta holds slipstream[delta], which brings
# pyspark 4.2 with delta-spark, and deltalake (delta-rs) to read the tables back
# (scripts/venv-delta.sh). The JVM parser jar is the one `make jvm` built against the default
# line's jars: it compiles and runs on 4.2 as it is.
DELTA_VENV := .venv-delta
venv-delta: $(DELTA_VENV)/.installed

$(DELTA_VENV)/.installed: pyproject.toml scripts/venv-delta.sh
	PYTHON=$(PYTHON) bash scripts/venv-delta.sh $(DELTA_VENV)

# the 4.2 line's leg: the Delta tests (sink, SIGKILL and restart, source), the rules that
# differ by line, the crash suite's core (mobile into SQLite and PostgreSQL, SIGKILLed), the fault
# campaign's fixed Delta seed and a Kafka input's restart exactly once; `make test` runs it after
# the default line's suite
# Two workers, a file each at a time, the longest files first (as the default line).
DELTA_LEG := tests/e2e/crash/test_chaos.py::test_a_fixed_delta_seed_of_the_campaign_ends_exact \
  'tests/e2e/crash/test_crash.py::test_outputs_survive_sigkills_exactly_once[mobile]' \
  tests/e2e/delta/test_delta_sink.py tests/e2e/delta/test_delta_chain.py \
  tests/e2e/delta/test_delta_records.py tests/e2e/delta/test_delta_source.py \
  tests/e2e/kafka/test_kafka.py::test_a_restart_resumes_from_the_checkpoints_offsets_into_sqlite_exactly_once \
  tests/unit/analysis/test_validate.py tests/unit/core \
  tests/unit/settings/test_delta_package_unit.py tests/unit/sinks/test_delta_sink_unit.py
test-delta: venv-delta check-java
	@test -f $(JAR) || $(MAKE) jvm
	$(DELTA_VENV)/bin/python -m pytest -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile \
	  --no-loadscope-reorder $(DELTA_LEG)

# every test that needs no Spark and no service, in about 2-3 minutes: your own loop
test-fast: venv lint
	$(PY) -m pytest -m "$(FAST)"

# the randomized fault campaign (tests/chaos/, docs/reliability.md): seeds FIRST..FIRST+SEEDS-1,
# each a pipeline, generated input (files or a Kafka topic), a sink and 1-4 faults, judged against
# an independent model; PostgreSQL and a Kafka broker start when a seed needs them, and the seeds
# that write into Delta run on the 4.2 line's .venv-delta; a defect prints the one command that
# reproduces it (`python -m tests.chaos --seed N`). SINK=delta keeps only the seeds of one sink.
SEEDS ?= 20
FIRST ?= 1
SINK ?=
chaos: venv venv-delta check-java services
	$(PY) -m tests.chaos --seeds $(SEEDS) --first $(FIRST) $(if $(SINK),--sink $(SINK)) \
	  --report chaos-report.md

# the load harness (tests/load/, docs/reliability.md): every case at 4x and 8x the cores of
# busy-looping processes, a round's cases all at once (about 30 minutes on 2 cores; one case
# after another takes hours), each table judged against its independent model; the memory and
# disk cases (the smallest heap, a full tmpfs, a throttled loop device) mount as root, as CI runs
stress: venv check-java services
	$(PY) -m tests.load --pressure 4 8 --together --report stress-report.md

bench: venv check-java
	$(PY) -m pip install -q -e '.[test,bench]'
	$(PY) -m bench all

# live trending at 2,000 events/s: 20 min warm-up, then an hour; fails if heap after GC or
# batch time grows
soak: venv check-java
	$(PY) -m pip install -q -e '.[test,bench]'
	$(PY) -m bench soak --minutes 60 --rate 2000

# the wheel spark-submit ships to a cluster (docs/scaling.md): dist/slipstream-VERSION-py3-none-any.whl
wheel: venv
	$(PY) -m pip wheel --no-deps -q -w dist .

bench-quick: venv check-java
	$(PY) -m bench all --quick

# scenario 14: trending on Apache Flink (PyFlink), Pathway and Bytewax beside slipstream, each peer
# in its own environment .venv-peers/NAME pinned by bench/peers/requirements-NAME.txt (never in CI)
PEERS := flink pathway bytewax
# scenario 18 (kafka_latency): Flink's Kafka SQL connector for the installed apache-flink 2.3.0
# (the newest build Maven Central serves is for Flink 2.2; it runs on 2.3 here)
FLINK_KAFKA := .venv-peers/jars/flink-sql-connector-kafka-5.0.0-2.2.jar
# Flink's JDBC connector for Flink 2.x (4.0.0-2.0, the only 2.x build) and the PostgreSQL driver
# (bench/scenarios/realtime_peers.py)
FLINK_JDBC := $(addprefix .venv-peers/jars/,flink-connector-jdbc-core-4.0.0-2.0.jar \
	flink-connector-jdbc-postgres-4.0.0-2.0.jar postgresql-42.7.14.jar)
MAVEN := https://repo1.maven.org/maven2
bench-peers: venv check-java $(foreach p,$(PEERS),.venv-peers/$(p)/.installed) $(FLINK_KAFKA) $(FLINK_JDBC)
	$(PY) -m bench peers

$(FLINK_KAFKA):
	mkdir -p $(@D)
	curl -fsSL -o $@.tmp $(MAVEN)/org/apache/flink/flink-sql-connector-kafka/5.0.0-2.2/flink-sql-connector-kafka-5.0.0-2.2.jar
	mv $@.tmp $@

.venv-peers/jars/flink-connector-jdbc-%-4.0.0-2.0.jar:
	mkdir -p $(@D)
	curl -fsSL -o $@.tmp $(MAVEN)/org/apache/flink/flink-connector-jdbc-$*/4.0.0-2.0/$(@F)
	mv $@.tmp $@

.venv-peers/jars/postgresql-%.jar:
	mkdir -p $(@D)
	curl -fsSL -o $@.tmp $(MAVEN)/org/postgresql/postgresql/$*/$(@F)
	mv $@.tmp $@

.venv-peers/%/.installed: bench/peers/requirements-%.txt
	test -x .venv-peers/$*/bin/python || $(PYTHON) -m venv .venv-peers/$*
	.venv-peers/$*/bin/python -m pip install -q -r bench/peers/requirements-$*.txt
	touch $@

clean:
	rm -rf state demo-state artifacts .pytest_cache dist build/jvm $(JAR)
