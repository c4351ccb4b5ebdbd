#!/usr/bin/env bash
# Batch tests of agentfix with eglot on Debian's Emacs (emacs-nox 28.2 and
# elpa-eglot 1.9 on bookworm). Installs them if missing (fails loudly if it
# cannot), uses target/debug/agentfix (built by `cargo test`) and the mock
# model example (built here if missing), runs editors/emacs/test-eglot.el and
# ends with "emacs tests: N passed, M failed" (non-zero exit on any failure).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
script="editors/emacs/ci.sh"
# shellcheck source=../ci-lib.sh
source "$here/../ci-lib.sh"

need=0
command -v emacs >/dev/null || need=1
ls -d /usr/share/emacs/site-lisp/elpa/eglot-* >/dev/null 2>&1 || need=1
if [ "$need" -eq 1 ]; then
  apt_install emacs-nox elpa-eglot
fi
command -v emacs >/dev/null || die "emacs missing after install"
ls -d /usr/share/emacs/site-lisp/elpa/eglot-* >/dev/null 2>&1 || die "elpa-eglot missing after install"

debug_binaries
export AGENTFIX_BIN MOCK_MODEL_BIN

echo "== $(emacs --version | head -1), eglot $(ls -d /usr/share/emacs/site-lisp/elpa/eglot-* | head -1 | sed 's/.*eglot-//')"
echo "== $("$AGENTFIX_BIN" --version)"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export HOME="$work" XDG_CACHE_HOME="$work/cache"
unset ANTHROPIC_API_KEY OPENAI_API_KEY AGENTFIX_API_KEY || true

start=$(date +%s)
set +e
timeout 300 emacs --batch -Q -l "$here/test-eglot.el" </dev/null >"$work/out.txt" 2>&1
code=$?
set -e
grep -E '^(PASS|FAIL) ' "$work/out.txt" || true
echo "== emacs tests took $(($(date +%s) - start)) s"
summary="$(grep -E '^emacs tests: [0-9]+ passed, [0-9]+ failed$' "$work/out.txt" | tail -1 || true)"
if [ "$code" -ne 0 ] || [ -z "$summary" ]; then
  echo "---- emacs output (exit $code):"
  tail -n 60 "$work/out.txt"
  echo "----"
fi
if [ -z "$summary" ]; then
  # The test file did not get to its summary (crash or timeout): count it as one failure.
  passed="$(grep -c '^PASS ' "$work/out.txt" || true)"
  echo "emacs tests: ${passed:-0} passed, 1 failed"
  exit 1
fi
echo "$summary"
[ "$code" -eq 0 ]
