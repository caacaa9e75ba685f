#!/usr/bin/env bash
# Installs and starts what svc and its test suite need on a Debian machine: idempotent, safe to re-run.
# Usage: scripts/setup.sh [postgres] [docker] [chromium]   (no argument: everything)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(postgres docker chromium)
for part in "${parts[@]}"; do
  bash "$here/setup/$part.sh"
done
