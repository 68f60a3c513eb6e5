#!/usr/bin/env bash
# Install the headless browser that the UI test (tests/test_ui.py) drives through Playwright.
#
# Chromium comes from Debian's `chromium` package (/usr/bin/chromium), not from `playwright install`:
# CI and dev machines reach only the PyPI and Debian mirrors, and Playwright's browser download is
# elsewhere. Playwright's Python client drives it over CDP (executable_path=/usr/bin/chromium), so
# `chromium-driver` (WebDriver) is not needed. `fonts-liberation` gives the screenshots real Latin
# glyphs (Arial/Helvetica metrics); fontconfig already brings DejaVu as a fallback.
#
# Idempotent: does nothing when /usr/bin/chromium exists. Needs root (or sudo) for apt-get.
# CHROMIUM overrides the path checked (default /usr/bin/chromium).
set -euo pipefail
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
PACKAGES=(chromium fonts-liberation)

if [ -x "$CHROMIUM" ]; then
  echo "install-browser: $CHROMIUM is there ($("$CHROMIUM" --version 2>/dev/null || echo 'version unknown')), nothing to do"
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1; then
  SUDO=(sudo)
else
  echo "install-browser: $CHROMIUM is missing and this user cannot run apt-get (not root, no sudo)." >&2
  echo "install-browser: run as root: apt-get install -y --no-install-recommends ${PACKAGES[*]}" >&2
  exit 1
fi

# Another apt/dpkg run (unattended upgrades, a parallel CI step) holds the dpkg lock for a while:
# wait for it instead of failing at once.
APT=("${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -q)
echo "install-browser: apt-get install ${PACKAGES[*]}"
"${APT[@]}" update
"${APT[@]}" install -y --no-install-recommends "${PACKAGES[@]}"

if [ ! -x "$CHROMIUM" ]; then
  echo "install-browser: installed ${PACKAGES[*]} but $CHROMIUM is still missing" >&2
  exit 1
fi
echo "install-browser: ok ($("$CHROMIUM" --version))"
