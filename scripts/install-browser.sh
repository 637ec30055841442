#!/usr/bin/env bash
# Install the headless Chromium that the browser tests drive through Playwright.
# Idempotent: does nothing when /usr/bin/chromium already exists. Needs root (apt-get).
set -euo pipefail

CHROMIUM=/usr/bin/chromium

if [[ -x "$CHROMIUM" ]]; then
  echo "chromium already installed: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
  exit 0
fi

if [[ "$(id -u)" -ne 0 ]]; then
  echo "install-browser.sh: must run as root to apt-get install chromium" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends chromium fonts-dejavu-core

"$CHROMIUM" --version
