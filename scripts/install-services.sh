#!/usr/bin/env bash
# Install the real services the test suite uses, from Debian, if they are missing:
# PostgreSQL (the suite starts a throwaway cluster on 127.0.0.1) and headless Chromium.
set -euo pipefail
need=()
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
[ -n "$pg_bin" ] && [ -x "$pg_bin/initdb" ] || need+=(postgresql)
[ -x /usr/bin/chromium ] || need+=(chromium)
command -v java >/dev/null || need+=(openjdk-17-jre-headless)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing from Debian: ${need[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
echo "services ready: postgresql $(ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -n 1), chromium $([ -x /usr/bin/chromium ] && echo yes || echo no)"
