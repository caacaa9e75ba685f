#!/usr/bin/env bash
# Docker engine from Debian's packages (no systemd here: dockerd is started in the background). scripts/setup.sh
# then builds the sandboxes' base image locally (scripts/images/base-image.sh), since no registry can be reached.
# Idempotent.
set -euo pipefail
source "$(dirname "$0")/apt.sh"

# One apt run for the three: each run refreshes the index and runs dpkg's triggers.
packages=(debootstrap)
command -v dockerd >/dev/null 2>&1 || packages+=(docker.io)
# Compose mode (svc self-host start --mode compose): the v2 plugin when present, else Debian's docker-compose.
if ! docker compose version >/dev/null 2>&1 && ! command -v docker-compose >/dev/null 2>&1; then
  packages+=(docker-compose)
fi
apt_install "${packages[@]}"

if ! docker info >/dev/null 2>&1; then
  mkdir -p /var/log
  setsid dockerd >/var/log/svc-dockerd.log 2>&1 < /dev/null &
  for _ in $(seq 1 100); do
    docker info >/dev/null 2>&1 && break
    sleep 0.2
  done
  docker info >/dev/null 2>&1 || { echo "setup: dockerd did not start; see /var/log/svc-dockerd.log" >&2; exit 1; }
fi
echo "setup: docker $(docker version --format '{{.Server.Version}}') ready" >&2
