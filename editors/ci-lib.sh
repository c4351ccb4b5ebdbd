# Shared by the editor test scripts (editors/*/ci.sh); source it after setting
# `script` to the caller's name. Defines `repo`, `die` and `apt_install`, and
# moves to the repository root.

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

die() {
  echo "$script: $*" >&2
  exit 1
}

# apt-get update + install, quiet unless it fails (then its output and exit 1).
apt_install() {
  local log
  log="$(mktemp)"
  echo "== apt-get install $*"
  # Wait for a dpkg lock held by another apt run instead of failing at once.
  if ! { apt-get -o DPkg::Lock::Timeout=300 update -q &&
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q "$@"; } >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    die "apt-get install $* failed"
  fi
  rm -f "$log"
}
