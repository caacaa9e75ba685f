#!/usr/bin/env bash
# Docker engine from Debian's packages (no systemd here: dockerd is started in the background), then the
# sandbox base image built locally, since no registry can be reached. Idempotent.
set -euo pipefail
source "$(dirname "$0")/apt.sh"

if ! command -v dockerd >/dev/null 2>&1; then
  apt_install docker.io
fi
apt_install debootstrap
# Compose mode (svc self-host start --mode compose): the v2 plugin when present, else Debian's docker-compose.
if ! docker compose version >/dev/null 2>&1 && ! command -v docker-compose >/dev/null 2>&1; then
  apt_install docker-compose
fi

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
bash "$(dirname "$0")/../images/base-image.sh"
