#!/usr/bin/env bash
# A second Docker engine on this machine, joined as a worker to the Swarm the machine's engine manages: a two-node
# swarm for the swarm driver's placement tests, where no second machine and no Docker-in-Docker (privileged
# containers are refused here) is at hand. Idempotent; `stop` leaves the swarm, removes the node and all its state.
# Usage: scripts/swarm-node2.sh start|stop|status      (as root; prints the node's id on start)
#
# What it takes for two engines to share one host (each learnt the hard way on Docker 20.10):
# - Never `--bridge none`: an engine started so deletes the host's `docker0` (the first engine's default bridge).
#   The second engine gets a bridge of its own instead (svc-n2-br0, made here).
# - Its `docker_gwbridge` is made before it joins, under another interface name (svc-n2-gwbr): otherwise it takes
#   over the first engine's `docker_gwbridge` interface and its address.
# - `--iptables=false`: two engines would rewrite the same DOCKER chains. So its tasks have no NAT to the outside;
#   they run, log and are placed, which is what the tests need.
# - Swarm ports: the manager must listen on 127.0.0.1 (`docker swarm init --advertise-addr 127.0.0.1 --listen-addr
#   127.0.0.1:2377`, as test/support/swarm.ts does), this node on 127.0.0.2 (its gossip port 7946 then binds there).
#   Both engines share the host's VXLAN port (4789) in one network namespace: each sandbox has an overlay network
#   of its own, on one node, so no overlay traffic crosses nodes; traffic across nodes on one network is untested.
# - It pulls from registries on 127.0.0.0/8 over plain HTTP, so SVC_REGISTRY=127.0.0.1:<port> (scripts/registry.sh)
#   gives it the manager's images.
set -euo pipefail
SOCK="${SVC_NODE2_SOCK:-/run/svc-node2.sock}"
DATA="${SVC_NODE2_DATA:-/var/lib/svc-node2}"
EXEC="${SVC_NODE2_EXEC:-/run/svc-node2}"
ADDR="${SVC_NODE2_ADDR:-127.0.0.2}"
BRIDGE=svc-n2-br0
BRIDGE_CIDR="${SVC_NODE2_BRIDGE_CIDR:-10.199.254.1/24}"
GWBRIDGE=svc-n2-gwbr
GWBRIDGE_SUBNET="${SVC_NODE2_GWBRIDGE_SUBNET:-10.199.253.0/24}"
node2() { docker -H "unix://$SOCK" "$@"; }
answers() { node2 info >/dev/null 2>&1; }
state() { node2 info --format '{{.Swarm.LocalNodeState}}' 2>/dev/null || echo down; }
node_id() { node2 info --format '{{.Swarm.NodeID}}' 2>/dev/null; }

start() {
  [ "$(id -u)" -eq 0 ] || { echo "swarm-node2: run as root" >&2; exit 1; }
  if [ "$(docker info --format '{{.Swarm.ControlAvailable}}')" != "true" ]; then
    echo "swarm-node2: the machine's engine is not a Swarm manager: docker swarm init --advertise-addr 127.0.0.1 --listen-addr 127.0.0.1:2377" >&2
    exit 1
  fi
  if ss -Hlnt 'sport = :7946' | awk '{print $4}' | grep -qE '^(\*|0\.0\.0\.0|\[::\]):7946$'; then
    echo "swarm-node2: the manager's gossip port listens on every address: re-init its swarm with --listen-addr 127.0.0.1:2377" >&2
    exit 1
  fi
  if answers && [ "$(state)" = active ]; then
    node_id
    return
  fi
  ip link show "$BRIDGE" >/dev/null 2>&1 || {
    ip link add name "$BRIDGE" type bridge
    ip addr add "$BRIDGE_CIDR" dev "$BRIDGE"
    ip link set "$BRIDGE" up
  }
  if ! answers; then
    mkdir -p "$DATA" "$EXEC"
    setsid dockerd --data-root "$DATA" --exec-root "$EXEC/exec" --pidfile "$EXEC/docker.pid" -H "unix://$SOCK" \
      --bridge "$BRIDGE" --iptables=false --ip-masq=false --ip-forward=false --userland-proxy=false \
      >"$EXEC/dockerd.log" 2>&1 </dev/null &
    for _ in $(seq 1 100); do answers && break; sleep 0.1; done
    answers || { echo "swarm-node2: the engine did not start; see $EXEC/dockerd.log" >&2; exit 1; }
  fi
  node2 network inspect docker_gwbridge >/dev/null 2>&1 ||
    node2 network create --subnet "$GWBRIDGE_SUBNET" \
      --opt com.docker.network.bridge.name="$GWBRIDGE" \
      --opt com.docker.network.bridge.enable_icc=false \
      --opt com.docker.network.bridge.enable_ip_masquerade=false docker_gwbridge >/dev/null
  node2 swarm join --token "$(docker swarm join-token -q worker)" --advertise-addr "$ADDR" \
    --listen-addr "$ADDR:2377" 127.0.0.1:2377 >/dev/null
  local id
  id="$(node_id)"
  for _ in $(seq 1 100); do
    [ "$(docker node inspect "$id" --format '{{.Status.State}}' 2>/dev/null)" = ready ] && break
    sleep 0.1
  done
  echo "$id"
}

stop() {
  local id=""
  if answers; then
    id="$(node_id)"
    node2 swarm leave --force >/dev/null 2>&1 || true
  fi
  # The manager keeps a node that left as `down` until it is removed; find it by its address when this engine is gone.
  [ -n "$id" ] || id="$(docker node ls -q 2>/dev/null | while read -r n; do
    [ "$(docker node inspect "$n" --format '{{.Status.Addr}}')" = "$ADDR" ] && echo "$n"; done | head -1)"
  [ -z "$id" ] || docker node rm --force "$id" >/dev/null 2>&1 || true
  if [ -f "$EXEC/docker.pid" ]; then
    local pid
    pid="$(cat "$EXEC/docker.pid")"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  # Its network namespaces and layers stay mounted after it exits.
  grep -E " ($EXEC|$DATA)[/ ]" /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do umount "$m" || true; done
  rm -rf "$DATA" "$EXEC" "$SOCK"
  for link in "$GWBRIDGE" "$BRIDGE"; do ip link del "$link" 2>/dev/null || true; done
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) if answers; then echo "swarm-node2: $(state) as $(node_id)" >&2; else echo "swarm-node2: not running" >&2; exit 1; fi ;;
  *) echo "usage: scripts/swarm-node2.sh start|stop|status" >&2; exit 2 ;;
esac
