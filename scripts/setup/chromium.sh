#!/usr/bin/env bash
# Debian's Chromium for the browser tests (driven by playwright-core, which downloads nothing).
set -euo pipefail
source "$(dirname "$0")/apt.sh"
apt_install chromium fonts-dejavu-core
echo "setup: $(chromium --version 2>/dev/null || echo chromium) ready at $(command -v chromium)" >&2
