#!/usr/bin/env bash
# Install the real services the test suite uses, from Debian, if they are missing:
# PostgreSQL (the suite starts a throwaway cluster on 127.0.0.1), Java 17 (JDK) for Spark, and the
# headless Chromium (with a font, for readable screenshots) that the browser tests drive
# through Playwright at /usr/bin/chromium, and Maven, which fetches the Kafka broker's jars.
# Idempotent; needs root or sudo only to install.
set -euo pipefail
need=()
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
[ -n "$pg_bin" ] && [ -x "$pg_bin/initdb" ] || need+=(postgresql)
[ -x /usr/bin/chromium ] || need+=(chromium fonts-dejavu-core)
# the JDK, not only the JRE: the leak test counts live JVM objects with jcmd
{ command -v java >/dev/null && command -v jcmd >/dev/null; } || need+=(openjdk-17-jdk-headless)
# Maven fetches the Kafka broker's jars from Maven Central (once, into ~/.cache/slipstream)
command -v mvn >/dev/null || need+=(maven)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing from Debian: ${need[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "install-services.sh: run as root to install ${need[*]}" >&2; exit 1; }
    SUDO="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# The Kafka tests' broker jars, and Spark's Kafka connector in Spark's Ivy cache (the tests
# fall back to an earlier Spark's connector when pyspark's own version is not served).
PY=${PY:-.venv/bin/python}
kafka="not fetched (no $PY)"
if [ -x "$PY" ]; then
  "$PY" -m slipstream.tools.kafka_broker fetch >/dev/null
  kafka="broker jars in $("$PY" -m slipstream.tools.kafka_broker fetch)"
  connector=$(PYTHONPATH=. "$PY" -c 'from tests.services import kafka_connector; print(kafka_connector() or "resolved")' | tr '\n' ' ')
  kafka="$kafka; Spark's connector: $connector"
fi
chromium_version=$([ -x /usr/bin/chromium ] && /usr/bin/chromium --version 2>/dev/null || echo no)
echo "services ready: postgresql $(ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -n 1), chromium: ${chromium_version:-yes}, kafka: $kafka"
