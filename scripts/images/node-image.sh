#!/usr/bin/env bash
# Packs this machine's node binary as an image, the node the API image copies in when no registry is reachable
# (where one is, the API image takes node from the public node image by build argument instead).
# Usage: scripts/images/node-image.sh [image-name]   (default svc-node:<major>); re-imports when node changed.
set -euo pipefail
node_bin="$(command -v node)"
version="$("$node_bin" -p 'process.versions.node')"
image="${1:-svc-node:${version%%.*}}"
if [ "$(docker image inspect -f '{{index .Config.Labels "dev.svc.node"}}' "$image" 2>/dev/null || true)" = "$version" ]; then
  echo "setup: node image $image ($version) present" >&2
  exit 0
fi
root="$(mktemp -d /tmp/svc-node.XXXXXX)"
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/local/bin"
cp "$node_bin" "$root/usr/local/bin/node"
tar -C "$root" -c . | docker import --change "LABEL dev.svc.node=$version" - "$image" >/dev/null
echo "setup: node image $image ($version) imported" >&2
