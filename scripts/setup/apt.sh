# Sourced by the setup scripts: install Debian packages that are missing, refreshing the index first. The setup
# scripts run side by side (scripts/setup.sh), so their apt runs take turns on one lock rather than fail on dpkg's.
apt_install() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}" >&2
  (
    flock 9
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  ) 9>"${TMPDIR:-/tmp}/svc-setup-apt.lock"
}
