#!/usr/bin/env bash
# Installs the svc CLI from the svc API that served this script: `curl -fsSL <host>/install.sh | bash`
# (api/install/routes.ts writes the host's public URL below). `svc update` runs it again, from the same host.
#   1. Node.js >= 20.19 must be on the PATH: the CLI is one ESM file that needs nothing else.
#   2. The CLI goes to ${SVC_PREFIX:-~/.svc}/lib/svc.mjs: downloaded into a temporary file beside it, checked
#      against the sha256 the host announces, run once (`node <file> version`), then renamed into place. On any
#      failure the installed one stays as it was.
#   3. A `svc` shim: $SVC_BIN_DIR, else /usr/local/bin when writable, else ~/.local/bin.
#   4. ${SVC_HOME:-~/.svc}/install.json records the installation for `svc update` and `svc uninstall`.
#   5. The host is registered with the CLI (not logged in: the last line says how).
set -euo pipefail
origin='@SVC_ORIGIN@'
say() { echo "install: $*" >&2; }
fail() {
  echo "install: error: $*" >&2
  exit 1
}

# Everything runs from one function, called on the last line: bash has read the whole script before any step
# runs, so a download cut short does nothing and no step can read the rest of the script from stdin.
main() {
  case "$origin" in
    http://* | https://*) ;;
    *) fail "this is the template an svc API fills in; run: curl -fsSL <svc host>/install.sh | bash" ;;
  esac

  # 1. Node.js and curl.
  node_ok() {
    command -v node >/dev/null 2>&1 &&
      node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)'
  }
  found="$(node --version 2>/dev/null || echo none)"
  node_ok || fail "svc needs Node.js >= 20.19 on the PATH (found: $found); get it from https://nodejs.org, then re-run"
  node="$(command -v node)"
  command -v curl >/dev/null 2>&1 || fail "curl is missing; install it, then re-run"

  # Where everything goes, as absolute paths (the shim and the record outlive this shell's directory).
  absolute() { mkdir -p "$1" && (cd "$1" && pwd); }
  prefix="$(absolute "${SVC_PREFIX:-$HOME/.svc}")"
  lib="$(absolute "$prefix/lib")"
  binary="$lib/svc.mjs"
  if [ -n "${SVC_BIN_DIR:-}" ]; then
    bin_dir="$(absolute "$SVC_BIN_DIR")"
  elif [ -w /usr/local/bin ]; then
    bin_dir=/usr/local/bin
  else
    bin_dir="$(absolute "$HOME/.local/bin")"
  fi
  shim="$bin_dir/svc"
  # Checked before anything changes: a file of someone else's is never replaced.
  if [ -e "$shim" ] && ! grep -q "^# svc shim, written by " "$shim" 2>/dev/null; then
    fail "$shim exists and is not an svc shim; remove it, or choose another directory with SVC_BIN_DIR"
  fi

  # 2. The CLI, through a temporary directory beside its place so that the last step is one rename.
  work="$(mktemp -d "$lib/.download.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  kept="the installed svc, if any, is unchanged"
  say "downloading the svc CLI from $origin"
  status=0
  curl -fsSL --retry 2 -D "$work/headers" -o "$work/svc.mjs" "$origin/v1/cli/svc.mjs" || status=$?
  if [ "$status" -ne 0 ]; then
    hint=""
    # curl's 7: nothing listens there; on a loopback URL that is usually this machine, not the host's.
    case "$status $origin" in
      "7 http://127."* | "7 http://localhost"* | "7 http://[::1]"*)
        hint=" ($origin is the host's own loopback address: for other machines its operator sets SVC_PUBLIC_URL)"
        ;;
    esac
    fail "cannot download $origin/v1/cli/svc.mjs (curl exit $status, above)$hint; $kept"
  fi
  header() { tr -d '\r' <"$work/headers" | awk -v name="$1:" 'tolower($1) == name { value = $2 } END { print value }'; }
  want="$(header x-svc-cli-sha256)"
  [ -n "$want" ] || fail "$origin/v1/cli/svc.mjs came without its X-Svc-Cli-Sha256 header; $kept"
  got="$("$node" -e 'process.stdout.write(require("node:crypto").createHash("sha256").update(require("node:fs").readFileSync(process.argv[1])).digest("hex"))' "$work/svc.mjs")"
  [ "$got" = "$want" ] || fail "checksum mismatch: the download's sha256 is $got, the host announced $want; $kept"
  if ! version="$(cd "$work" && "$node" "$work/svc.mjs" version 2>"$work/smoke.log")"; then
    # Node's report of an uncaught error ends with a stack and its own version: the error line says more.
    reason="$(grep -m 1 -E '^[A-Za-z]*Error\b' "$work/smoke.log" || tail -n 1 "$work/smoke.log")"
    fail "the downloaded CLI does not run with node $("$node" --version) (${reason:-no output}); $kept"
  fi
  [ -n "$version" ] || fail "the downloaded CLI printed no version; $kept"
  chmod 644 "$work/svc.mjs"
  mv -f "$work/svc.mjs" "$binary"

  # 3. The shim: this CLI with the node that installed it.
  marker="# svc shim, written by $origin/install.sh"
  printf '#!/bin/sh\n%s\nexec %q %q "$@"\n' "$marker" "$node" "$binary" >"$shim.tmp"
  chmod 755 "$shim.tmp"
  mv -f "$shim.tmp" "$shim"

  # 4. The install record.
  home="${SVC_HOME:-$HOME/.svc}"
  mkdir -p -m 700 "$home"
  "$node" -e '
  const [file, origin, prefix, binary, shim, node, version, sha256] = process.argv.slice(1);
  const record = {
    kind: "served", origin, script: `${origin}/install.sh`, prefix, binary, shim, node, version, sha256,
    installed_at: new Date().toISOString(),
  };
  const fs = require("node:fs");
  fs.writeFileSync(`${file}.tmp`, `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 });
  fs.renameSync(`${file}.tmp`, file);
  ' "$home/install.json" "$origin" "$prefix" "$binary" "$shim" "$node" "$version" "$want"

  # 5. The host, under the name of a host the CLI already has at this URL, else one made from the URL.
  host="$("$node" "$binary" hosts ls --json | "$node" -e '
  const origin = process.argv[1];
  let text = "";
  process.stdin.on("data", (d) => (text += d)).on("end", () => {
    const hosts = JSON.parse(text);
    const known = hosts.find((h) => h.url === origin);
    if (known) return console.log(`known ${known.name} ${known.logged_in}`);
    const url = new URL(origin);
    const name = `${url.hostname}${url.port ? `-${url.port}` : ""}`.toLowerCase().replace(/[^a-z0-9._-]+/g, "-").replace(/^[^a-z0-9]+/, "");
    console.log(`${hosts.some((h) => h.name === name) ? "taken" : "new"} ${name} false`);
  });
  ' "$origin")"
  read -r state name logged_in <<<"$host"
  case "$state" in
    new) "$node" "$binary" hosts add "$name" --url "$origin" ;;
    taken)
      say "the CLI's host '$name' points elsewhere; register this one under another name: svc hosts add <name> --url $origin"
      name="<name>"
      ;;
  esac

  {
    echo
    echo "✓ svc $version installed: $shim runs $binary with $node"
    case ":$PATH:" in
      *":$bin_dir:"*) ;;
      *) echo "! $bin_dir is not on your PATH: add it, e.g. echo 'export PATH=\"$bin_dir:\$PATH\"' >> ~/.profile" ;;
    esac
    if [ "$logged_in" = true ]; then
      echo "✓ host '$name' ($origin) is registered and logged in"
    else
      echo "Next, log in to $origin: svc login --host $name"
    fi
  } >&2
}

main "$@"
