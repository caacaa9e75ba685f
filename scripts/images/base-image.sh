#!/usr/bin/env bash
# Builds the Debian base image locally when it cannot be pulled: debootstrap from the machine's own Debian
# mirror, then `docker import`. Users with a registry never need this (Dockerfiles default to the public image).
# Usage: scripts/images/base-image.sh [image-name]   (default svc-debian:bookworm)
set -euo pipefail
image="${1:-svc-debian:bookworm}"
if docker image inspect "$image" >/dev/null 2>&1; then
  echo "setup: base image $image present" >&2
  exit 0
fi
mirror="$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)"
[ -n "$mirror" ] || mirror="$(awk '/^deb / {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)"
[ -n "$mirror" ] || { echo "setup: no Debian mirror configured on this machine" >&2; exit 1; }

root="$(mktemp -d /tmp/svc-rootfs.XXXXXX)"
trap 'rm -rf "$root"' EXIT
echo "setup: debootstrap bookworm from $mirror" >&2
debootstrap --variant=minbase --include=git,ca-certificates,bash,procps,openssh-client,curl,less,tini \
  bookworm "$root" "$mirror" >/tmp/svc-debootstrap.log 2>&1 || { tail -20 /tmp/svc-debootstrap.log >&2; exit 1; }
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | docker import - "$image" >/dev/null
echo "setup: base image $image imported" >&2
