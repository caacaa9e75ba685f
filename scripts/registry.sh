#!/usr/bin/env bash
# An image registry for the swarm sandbox driver (SVC_REGISTRY): the manager pushes sandbox images to it and every
# node of the swarm pulls them from it. Debian's docker-registry (the CNCF distribution registry 2.8), run on demand,
# not by setup.sh: a one-node swarm needs none. Idempotent: a registry already answering is left as it is.
# Usage: scripts/registry.sh start|stop|status [--addr HOST:PORT] [--dir DIR]
#   --addr  where it listens (default 127.0.0.1:5000); SVC_REGISTRY is the same HOST:PORT
#   --dir   its config, pid file, log and images (default /var/lib/svc-registry)
# The engine talks plain HTTP to registries on 127.0.0.0/8 only. Nodes on other machines reach it at an address of
# this one, which each of their engines must list in "insecure-registries" (/etc/docker/daemon.json) unless the
# registry gets TLS (its config's http.tls).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
action="${1:-}"
shift || true
addr="127.0.0.1:5000"
dir="/var/lib/svc-registry"
while [ $# -gt 0 ]; do
  case "$1" in
    --addr) addr="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    *) echo "registry: unknown argument $1" >&2; exit 2 ;;
  esac
done
pidfile="$dir/registry.pid"

answers() { curl -fsS -o /dev/null --max-time 2 "http://$addr/v2/"; }
running_pid() {
  local pid
  pid="$(cat "$pidfile" 2>/dev/null)" || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

case "$action" in
  start)
    if running_pid >/dev/null && answers; then
      echo "registry: already running at $addr" >&2
      echo "$addr"
      exit 0
    fi
    if ! command -v docker-registry >/dev/null 2>&1; then
      source "$here/setup/apt.sh"
      apt_install docker-registry
    fi
    mkdir -p "$dir/data"
    cat >"$dir/config.yml" <<YAML
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $dir/data
  delete:
    enabled: true
http:
  addr: $addr
YAML
    setsid docker-registry serve "$dir/config.yml" >"$dir/registry.log" 2>&1 </dev/null &
    echo $! >"$pidfile"
    for _ in $(seq 1 50); do
      answers && break
      sleep 0.1
    done
    answers || { echo "registry: it did not answer at $addr; see $dir/registry.log" >&2; exit 1; }
    echo "registry: running at $addr (images in $dir/data)" >&2
    echo "$addr"
    ;;
  stop)
    if pid="$(running_pid)"; then
      kill "$pid"
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      echo "registry: stopped" >&2
    fi
    rm -f "$pidfile"
    ;;
  status)
    if running_pid >/dev/null && answers; then echo "registry: running at $addr" >&2; else echo "registry: not running" >&2; exit 1; fi
    ;;
  *)
    echo "usage: scripts/registry.sh start|stop|status [--addr HOST:PORT] [--dir DIR]" >&2
    exit 2
    ;;
esac
