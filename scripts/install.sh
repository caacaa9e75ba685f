#!/usr/bin/env bash
# Installs svc from this checkout and leaves the stack running: README's first command, and what `svc update`
# re-runs. Idempotent; a re-run on a machine that has everything takes a second or two.
#   1. what the stack and the test suite need (scripts/setup.sh: PostgreSQL, Docker and the base image, Chromium;
#      as root, through sudo otherwise). The stack itself needs only Docker, but a checkout is also where
#      README's second command, `npm test`, runs, and that fails without the other two.
#   2. Node.js >= 20.19 (installed from the distribution when it offers one that recent), then `npm ci`
#      (which builds dist/) unless node_modules already matches package-lock.json, else only the build.
#   3. a `svc` shim on the PATH: $SVC_BIN_DIR, else /usr/local/bin when writable, else ~/.local/bin.
#   4. $SVC_HOME/install.json (default ~/.svc): where svc was installed from, for `svc update` and `svc uninstall`.
#   5. `svc self-host start` (port $SVC_INSTALL_PORT when set, else the remembered one, default 7700).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
script="$root/scripts/install.sh"
cd "$root"
started="$(date +%s%N)"
say() { echo "install: $*" >&2; }
fail() { echo "install: error: $*" >&2; exit 1; }
as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; return; fi
  command -v sudo >/dev/null 2>&1 || fail "installing system packages needs root: run this script as root or install sudo"
  sudo "$@"
}

# 1. System packages and services.
# Root re-checks everything (half a second); a user skips sudo when the services already answer.
services_up() {
  docker image inspect svc-debian:bookworm >/dev/null 2>&1 && command -v chromium >/dev/null 2>&1 &&
    pg_isready -q -h 127.0.0.1 -p 5432 >/dev/null 2>&1
}
# As root, setup runs beside step 2 (both mostly wait on downloads; their apt runs take turns, setup/apt.sh); through
# sudo it runs first, so a password prompt is not lost in npm's output. From /: the postgres user may not enter the
# checkout.
setup=""
if [ "$(id -u)" -eq 0 ]; then
  (cd / && bash "$root/scripts/setup.sh") &
  setup="$!"
  trap '[ -z "$setup" ] || wait "$setup" || true' EXIT # a failed step 2 still leaves no apt run behind it
elif ! services_up; then
  (cd / && as_root bash "$root/scripts/setup.sh")
fi

# 2. Node.js and the dependencies.
node_ok() {
  command -v node >/dev/null 2>&1 &&
    node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)'
}
if ! node_ok; then
  candidate="$(apt-cache policy nodejs 2>/dev/null | awk '/Candidate:/ {print $2}')"
  if [ -n "$candidate" ] && [ "$candidate" != "(none)" ] && dpkg --compare-versions "$candidate" ge 20.19; then
    as_root bash -c 'source "$1" && apt_install nodejs' _ "$root/scripts/setup/apt.sh"
    command -v npm >/dev/null 2>&1 || as_root bash -c 'source "$1" && apt_install npm' _ "$root/scripts/setup/apt.sh"
  fi
  node_ok || fail "svc needs Node.js >= 20.19 on the PATH (found: $(node --version 2>/dev/null || echo none)) and \
the package sources offer ${candidate:-none}; install it from https://nodejs.org/en/download, then re-run"
fi
node="$(command -v node)"
command -v npm >/dev/null 2>&1 || fail "npm is missing next to $node; install npm, then re-run"

# npm ci wipes node_modules; skip it when the lock file (and the node that ran it) are those of the last install.
stamp="node_modules/.svc-install-stamp"
want="$(sha256sum package-lock.json | cut -d' ' -f1) $("$node" --version)"
if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  say "dependencies up to date; building dist/"
  npm run --silent build >&2
else
  say "npm ci (dependencies and dist/)"
  npm ci --prefer-offline --no-audit --no-fund >&2
  echo "$want" >"$stamp"
fi

if [ -n "$setup" ]; then
  status=0
  wait "$setup" || status=$?
  setup=""
  [ "$status" -eq 0 ] || fail "setting up the system packages failed (above)"
fi

# 3. The shim: this checkout's CLI with the node that installed it.
if [ -n "${SVC_BIN_DIR:-}" ]; then
  bin_dir="$SVC_BIN_DIR"
elif [ -w /usr/local/bin ]; then
  bin_dir=/usr/local/bin
else
  bin_dir="$HOME/.local/bin"
fi
shim="$bin_dir/svc"
marker="# svc shim, written by $script"
if [ -e "$shim" ] && ! grep -q "^# svc shim, written by " "$shim" 2>/dev/null; then
  fail "$shim exists and is not an svc shim; remove it, or choose another directory with SVC_BIN_DIR"
fi
mkdir -p "$bin_dir"
# The bundle straight away when there is one (bin/svc.js would only look for it): `svc version` costs start-up alone.
{
  printf '#!/bin/sh\n%s\n' "$marker"
  printf '[ "${SVC_FROM_SOURCE:-}" != 1 ] && [ -f %q ] && exec %q %q "$@"\n' "$root/dist/svc.cjs" "$node" "$root/dist/svc.cjs"
  printf 'exec %q %q "$@"\n' "$node" "$root/bin/svc.js"
} >"$shim.tmp"
chmod 755 "$shim.tmp"
mv "$shim.tmp" "$shim"

# 4. The install record.
home="${SVC_HOME:-$HOME/.svc}"
mkdir -p -m 700 "$home"
"$node" -e '
const [file, checkout, script, shim, node] = process.argv.slice(1);
const record = { kind: "checkout", checkout, script, shim, node, installed_at: new Date().toISOString() };
require("node:fs").writeFileSync(file, `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 });
' "$home/install.json" "$root" "$script" "$shim" "$node"

# 5. The stack.
origin="$("$node" "$root/bin/svc.js" self-host start ${SVC_INSTALL_PORT:+--port "$SVC_INSTALL_PORT"})"

elapsed="$(( ($(date +%s%N) - started) / 1000000 ))"
{
  echo
  echo "✓ svc $("$node" "$root/bin/svc.js" version) installed: $shim runs $root/bin/svc.js with $node"
  echo "✓ the stack runs at $origin (data in $home); the CLI is logged in to it as host 'selfhost'"
  case ":$PATH:" in
    *":$bin_dir:"*) ;;
    *) echo "! $bin_dir is not on your PATH: add it, e.g. echo 'export PATH=\"$bin_dir:\$PATH\"' >> ~/.profile" ;;
  esac
  echo
  echo "Next, in a git repository: svc init, commit, svc ship, svc sessions new (README: Set up and start)"
  echo "Tests: npm test   Logs: svc self-host logs   Update: svc update   Remove: svc uninstall"
  echo "(install took $((elapsed / 1000)).$(printf '%03d' $((elapsed % 1000))) s)"
} >&2
