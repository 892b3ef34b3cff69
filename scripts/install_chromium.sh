#!/usr/bin/env bash
# Install headless Chromium (Debian packages) for the offline-rendering test of HTML reports.
# Idempotent: does nothing when a chromium binary is already on PATH. Needs root (or sudo).
set -euo pipefail

for bin in chromium chromium-browser google-chrome; do
  if command -v "$bin" >/dev/null 2>&1; then
    echo "chromium already installed: $(command -v "$bin")"
    exit 0
  fi
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install_chromium.sh: run as root (or install sudo) to apt-get install chromium" >&2
    exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver fonts-liberation >/dev/null
echo "installed: $(command -v chromium) ($(chromium --version 2>/dev/null || echo 'version unknown'))"
