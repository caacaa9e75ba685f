#!/usr/bin/env bash
# Installs and starts what svc and its test suite need on a Debian machine: idempotent, safe to re-run.
# Usage: scripts/setup.sh [docker] [postgres] [chromium]   (no argument: everything)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(docker postgres chromium)
base_image=""
for part in "${parts[@]}"; do
  [ -f "$here/setup/$part.sh" ] || { echo "setup: no part '$part' (docker, postgres, chromium)" >&2; exit 2; }
  bash "$here/setup/$part.sh"
  # The sandboxes' base image is most of a clean machine's setup (debootstrap): it downloads and unpacks while the
  # other parts' packages install.
  if [ "$part" = docker ]; then
    bash "$here/images/base-image.sh" &
    base_image="$!"
  fi
done
[ -z "$base_image" ] || wait "$base_image"
