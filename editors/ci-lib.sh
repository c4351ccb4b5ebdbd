# Shared by the editor test scripts (editors/*/ci.sh, editors/kakoune/check.sh);
# source it after setting `script` to the caller's name. Defines `repo`, `die`,
# `apt_install` and `debug_binaries`, and moves to the repository root.

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

die() {
  echo "$script: $*" >&2
  exit 1
}

# apt-get update + install (system-wide), quiet unless it fails (then its
# output and exit 1). As root directly, else through sudo; without either it
# fails saying what to install.
apt_install() {
  local log sudo=()
  command -v apt-get >/dev/null || die "$* not installed and no apt-get to install it: install $* yourself"
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || die "$* not installed: run as root, install sudo, or run: apt-get install $*"
    sudo=(sudo)
  fi
  log="$(mktemp)"
  echo "== ${sudo[*]:+${sudo[*]} }apt-get install $*"
  # Wait for a dpkg lock held by another apt run instead of failing at once.
  if ! { "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=300 update -q &&
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q "$@"; } >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    die "apt-get install $* failed"
  fi
  rm -f "$log"
}

# Sets AGENTFIX_BIN and MOCK_MODEL_BIN to the debug builds of the server and
# of the mock model. By default the server must have been built (`cargo
# build` or `cargo test`) and the mock is built when missing; with `--build`
# both are built (`cargo build --locked`, nothing to do after `cargo test`).
debug_binaries() {
  AGENTFIX_BIN="$repo/target/debug/agentfix"
  MOCK_MODEL_BIN="$repo/target/debug/examples/mock_model"
  if [ "${1:-}" = "--build" ]; then
    echo "== building the server and the mock model (cargo build --bin agentfix --example mock_model)"
    (cd "$repo" && cargo build --locked --bin agentfix --example mock_model) || die "cargo build failed"
  fi
  [ -x "$AGENTFIX_BIN" ] || die "$AGENTFIX_BIN missing: run \`cargo build\` (or \`cargo test\`) first"
  if ! [ -x "$MOCK_MODEL_BIN" ]; then
    echo "== building the mock model (cargo build --example mock_model)"
    (cd "$repo" && cargo build --example mock_model) || die "cargo build --example mock_model failed"
  fi
}
