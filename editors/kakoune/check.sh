#!/usr/bin/env bash
# Checks what editors/kakoune/README.md says, on a real Kakoune and
# kakoune-lsp: Kakoune from Debian (apt), kakoune-lsp from crates.io
# (`cargo install kak-lsp --locked`, many minutes of compiling on 2 cores,
# so it is not part of .ci/run; see the README). Drives a headless Kakoune
# session (`kak -d -s`, a client in a tmux of its own, commands sent with `kak -p`)
# against agentfix and the mock model (target/debug/agentfix and
# target/debug/examples/mock_model), with the README's own configuration
# blocks (the ```kak blocks after a `<!-- kakoune-check: NAME -->` line),
# and ends with "kakoune tests: N passed, M failed" (non-zero exit on any
# failure).
#
#   bash editors/kakoune/check.sh      # KAK_LSP=/path/to/kak-lsp to pick one
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
script="editors/kakoune/check.sh"
# shellcheck source=../ci-lib.sh
source "$here/../ci-lib.sh"

KAK_LSP_VERSION="${KAK_LSP_VERSION:-22.0.0}"

# --- Kakoune (Debian) and kakoune-lsp (crates.io) -------------------------------
command -v kak >/dev/null || apt_install kakoune
command -v kak >/dev/null || die "kak missing after install"
command -v perl >/dev/null || apt_install perl # kakoune-lsp's menus use it
command -v tmux >/dev/null || apt_install tmux # the client's terminal
KAK_LSP="${KAK_LSP:-$(command -v kak-lsp || echo "$HOME/.cargo/bin/kak-lsp")}"
if ! [ -x "$KAK_LSP" ]; then
  echo "== cargo install kak-lsp --version $KAK_LSP_VERSION --locked (compiles for many minutes)"
  t0=$(date +%s)
  cargo install kak-lsp --version "$KAK_LSP_VERSION" --locked || die "cargo install kak-lsp failed"
  echo "== kak-lsp installed in $(($(date +%s) - t0)) s"
  KAK_LSP="$HOME/.cargo/bin/kak-lsp"
fi
[ -x "$KAK_LSP" ] || die "$KAK_LSP missing after install"
case "$("$KAK_LSP" --version 2>&1)" in
*"$KAK_LSP_VERSION"*) ;;
*) echo "== note: $KAK_LSP is not kakoune-lsp $KAK_LSP_VERSION, the version the README describes" ;;
esac

debug_binaries

echo "== Kakoune $(kak -version 2>&1 | head -1) ($(dpkg-query -W -f='${Version}' kakoune 2>/dev/null || echo '?')) at $(command -v kak)"
echo "== $("$KAK_LSP" --version 2>&1 | head -1) at $KAK_LSP"
echo "== $("$AGENTFIX_BIN" --version)"

work="$(mktemp -d)"
pids=()
tmux_sock="agentfix-kak-check-$$"
# The kakoune-lsp daemons of this run (their TMPDIR is ours), by process id.
own_kak_lsp() {
  local p
  for p in $(pgrep -x kak-lsp 2>/dev/null || true); do
    if { tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null | grep -qx "TMPDIR=$TMPDIR"; then
      echo "$p"
    fi
  done
}
cleanup() {
  tmux -L "$tmux_sock" kill-server 2>/dev/null || true
  for p in $(own_kak_lsp); do
    kill "$p" 2>/dev/null || true
  done
  for p in "${pids[@]}"; do
    kill "$p" 2>/dev/null || true
  done
  [ -n "${KAKOUNE_CHECK_KEEP:-}" ] && echo "== kept $work" || rm -rf "$work"
}
trap cleanup EXIT
# Away from the user's Kakoune and kakoune-lsp configuration and sessions.
export HOME="$work/home" TMPDIR="$work/tmp" XDG_CONFIG_HOME="$work/home/.config"
unset XDG_RUNTIME_DIR ANTHROPIC_API_KEY OPENAI_API_KEY AGENTFIX_API_KEY KAKOUNE_SESSION KAKOUNE_CLIENT || true
mkdir -p "$HOME" "$TMPDIR" "$XDG_CONFIG_HOME"
lspdir="$(dirname "$KAK_LSP")"
export PATH="$lspdir:$PATH"

# A ```kak block of the README, the one after `<!-- kakoune-check: NAME -->`.
readme_block() {
  awk -v name="$1" '
    $0 == "<!-- kakoune-check: " name " -->" { found = 1; next }
    found && /^```kak$/ { inside = 1; next }
    inside && /^```$/ { exit }
    inside { print }
  ' "$repo/editors/kakoune/README.md"
}
for b in servers review diff message; do
  [ -n "$(readme_block "$b")" ] || die "editors/kakoune/README.md has no \`<!-- kakoune-check: $b -->\` block"
done

# Not ending on an edited line: an edit up to the end of the file (the last
# line replaced) comes out joined to the line before it with Kakoune
# 2022.10.31 and kakoune-lsp 22.0.0 (see the README).
CALC='def add(a, b):
    return a - b


def mul(a, b):
    return a + b


print(add(1, 2), mul(2, 3))
'
FIXED='def add(a, b):
    return a + b


def mul(a, b):
    return a * b


print(add(1, 2), mul(2, 3))
'

passed=0
failed=0
ok() {
  passed=$((passed + 1))
  echo "PASS $1"
}
bad() {
  failed=$((failed + 1))
  echo "FAIL $1: $2"
  if [ -f "$case_dir/kak-lsp.log" ]; then
    echo "---- kak-lsp log (tail):"
    tail -n 30 "$case_dir/kak-lsp.log" || true
  fi
  if [ -f "$case_dir/debug.txt" ]; then
    echo "---- Kakoune *debug* (tail):"
    tail -n 30 "$case_dir/debug.txt" || true
  fi
  echo "----"
}

# Waits up to $2 seconds (default 30) for the command $1 to succeed.
wait_for() {
  local deadline=$(($(date +%s) + ${2:-30}))
  until eval "$1"; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.2
  done
}

# Starts the mock model with the replies in $1 (JSON); sets mock_url, mock_log.
start_mock() {
  printf '%s' "$1" >"$case_dir/replies.json"
  mkfifo "$case_dir/mock.stdin"
  "$MOCK_MODEL_BIN" --replies "$case_dir/replies.json" --log "$case_dir/requests.jsonl" \
    <"$case_dir/mock.stdin" >"$case_dir/mock.url" 2>"$case_dir/mock.err" &
  pids+=($!)
  exec 7>"$case_dir/mock.stdin" # the mock serves until its stdin closes
  wait_for '[ -s "$case_dir/mock.url" ]' 10 || die "the mock model printed no URL"
  mock_url="$(head -1 "$case_dir/mock.url")"
  mock_log="$case_dir/requests.jsonl"
}
stop_mock() {
  exec 7>&- || true
}

# Sends Kakoune commands to the case's session.
kak_send() {
  printf '%s\n' "$1" | kak -p "$session"
}

# Starts a headless session with the README's blocks named in $@, a client
# (client0), and report.py opened in it.
start_kak() {
  session="agentfix-check-$case_n"
  {
    echo 'evaluate-commands %sh{kak-lsp}'
    # kak-lsp's log, for failures.
    echo "set-option global lsp_debug true"
    # Agent fix's settings for the test: the mock model, no retries, and
    # no downstream language servers (hermetic).
    for b in "$@"; do
      readme_block "$b" | sed -e "s|^\\( *\\)command = \"agentfix\"|\\1command = \"$AGENTFIX_BIN\"|"
    done
    # Record the code actions offered and run the one matching agentfix_pick.
    cat <<'EOF'
declare-option str agentfix_pick '^Agent fix: line'
declare-option str agentfix_actions_file
define-command -override lsp-perform-code-action -params 1.. %{
    evaluate-commands %sh{
        [ "$1" = -auto-single ] && shift
        : >"$kak_opt_agentfix_actions_file.tmp"
        picked=
        while [ $# -ge 2 ]; do
            printf '%s\n' "$1" >>"$kak_opt_agentfix_actions_file.tmp"
            if [ -z "$picked" ] && printf '%s' "$1" | grep -Eq -- "$kak_opt_agentfix_pick"; then
                picked=$2
            fi
            shift 2
        done
        mv "$kak_opt_agentfix_actions_file.tmp" "$kak_opt_agentfix_actions_file"
        if [ -n "$picked" ]; then
            printf "evaluate-commands '%s'\n" "$(printf '%s' "$picked" | sed "s/'/''/g")"
        fi
    }
}
lsp-enable
EOF
  } >"$case_dir/kakrc"
  (
    cd "$ws"
    ANTHROPIC_API_KEY=test-key-0123 ANTHROPIC_BASE_URL="$mock_url" AGENTFIX_TRANSCRIPTS=0 \
      AGENTFIX_DEFAULT_LANGUAGE_SERVERS=0 AGENTFIX_LOG=debug \
      exec kak -d -s "$session" -n >"$case_dir/kak.out" 2>&1
  ) &
  pids+=($!)
  wait_for 'kak -l 2>/dev/null | grep -qx "$session"' 10 || die "kak -d -s $session did not start"
  kak_send "try %{ source %{$case_dir/kakrc} } catch %{ echo -to-file %{$case_dir/kakrc.err} %val{error} }"
  # The client: a terminal UI in a tmux of our own (on its own socket).
  tmux -L "$tmux_sock" new-session -d -s "$session" -x 120 -y 40 -c "$ws" "kak -c $session"
  wait_for 'kak_send "evaluate-commands -client client0 %{ echo -to-file %{$case_dir/client.ok} ok }"; [ -s "$case_dir/client.ok" ]' 10 ||
    die "the client did not connect"
  kak_send "evaluate-commands -client client0 %{
    set-option global agentfix_actions_file %{$case_dir/actions.txt}
    edit %{$ws/report.py}
    set-option buffer filetype python
  }"
}

stop_kak() {
  # (Without the README's write alias, which skips writes from no client.)
  kak_send "try %{ unalias global write }
    evaluate-commands -buffer *debug* %{ write -force %{$case_dir/debug.txt} }" 2>/dev/null || true
  sleep 0.3
  # kakoune-lsp runs as a daemon of its own: tell it to stop (it stops its
  # servers), then end the session.
  kak_send 'try %{ lsp-exit }' 2>/dev/null || true
  sleep 0.3
  kak_send 'kill!' 2>/dev/null || true
  tmux -L "$tmux_sock" kill-session -t "$session" 2>/dev/null || true
  stop_mock
}

# The text of report.py's buffer and whether it is modified, in buf.txt / mod.txt.
dump_buffer() {
  rm -f "$case_dir/buf.txt" "$case_dir/mod.txt"
  kak_send "evaluate-commands -buffer %{$ws/report.py} %{
    evaluate-commands -draft %{ execute-keys '%'; echo -to-file %{$case_dir/buf.txt} -- %val{selection} }
    echo -to-file %{$case_dir/mod.txt} -- %val{modified}
  }"
  wait_for '[ -f "$case_dir/mod.txt" ]' 10
}

# Moves to line $1 of report.py in client0 and asks for code actions (the
# override above records them and runs the one matching agentfix_pick).
code_action() {
  rm -f "$case_dir/actions.txt"
  kak_send "evaluate-commands -client client0 %{
    set-option global agentfix_pick %{${2:-^Agent fix: line}}
    execute-keys ${1}g
    lsp-code-actions
  }"
}

new_case() {
  case_n=$((${case_n:-0} + 1))
  case_dir="$work/case$case_n"
  mkdir -p "$case_dir"
  ws="$case_dir/ws"
  mkdir -p "$ws/.git"
  printf '%s' "$CALC" >"$ws/report.py"
}

TWO_EDITS='[
  {"tools": [
    ["toolu_1", "edit_file", {"path": "report.py", "old_text": "def add(a, b):\n    return a - b", "new_text": "def add(a, b):\n    return a + b"}],
    ["toolu_2", "edit_file", {"path": "report.py", "old_text": "def mul(a, b):\n    return a + b", "new_text": "def mul(a, b):\n    return a * b"}]
  ]},
  {"text": "Fixed add and mul."}
]'

start=$(date +%s)

# (1) kakoune-lsp as it ships: the proposal is applied and report.py written.
new_case
start_mock "$TWO_EDITS"
start_kak servers
name="as shipped: only \"Agent fix: line N\" is offered; the proposal is applied and written to disk"
code_action 2
if ! wait_for '[ -f "$case_dir/actions.txt" ]' 30; then
  bad "$name" "no code actions offered in 30 s"
elif ! grep -qx 'Agent fix: line 2' "$case_dir/actions.txt"; then
  bad "$name" "offered: $(tr '\n' '|' <"$case_dir/actions.txt")"
elif grep -v -x 'Agent fix: line 2' "$case_dir/actions.txt" | grep -q .; then
  bad "$name" "other actions offered too: $(tr '\n' '|' <"$case_dir/actions.txt")"
elif ! wait_for '[ "$(cat "$ws/report.py")" = "$(printf %s "$FIXED")" ]' 30; then
  dump_buffer || true
  bad "$name" "report.py on disk not fixed; buffer: $(cat "$case_dir/buf.txt" 2>/dev/null)"
else
  dump_buffer
  if [ "$(cat "$case_dir/mod.txt")" != "false" ]; then
    bad "$name" "buffer modified: $(cat "$case_dir/mod.txt")"
  else
    ok "$name"
  fi
fi
name="a selection of a whole line: \"Agent fix: selection\" is offered too"
rm -f "$case_dir/actions.txt"
kak_send "evaluate-commands -client client0 %{
  set-option global agentfix_pick '^nothing to run$'
  execute-keys 2gx
  lsp-code-actions
}"
if ! wait_for '[ -f "$case_dir/actions.txt" ]' 30; then
  bad "$name" "no code actions offered in 30 s"
elif ! grep -qx 'Agent fix: selection' "$case_dir/actions.txt"; then
  bad "$name" "offered: $(tr '\n' '|' <"$case_dir/actions.txt")"
else
  ok "$name ($(tr '\n' '|' <"$case_dir/actions.txt" | sed 's/|$//'))"
fi
stop_kak

# (2) With the README's write alias: the proposal stays in the buffer,
# unsaved; each hunk is one undo step (kakoune-lsp applies them one by one,
# the last one first).
new_case
start_mock "$TWO_EDITS"
start_kak servers review diff
name="write alias: the proposal stays in the buffer, unsaved; u undoes one hunk at a time"
code_action 2
if ! wait_for 'dump_buffer && [ "$(cat "$case_dir/buf.txt")" = "$(printf %s "$FIXED")" ]' 30; then
  bad "$name" "buffer not fixed: $(cat "$case_dir/buf.txt" 2>/dev/null)"
elif [ "$(cat "$case_dir/mod.txt")" != "true" ]; then
  bad "$name" "buffer not modified: $(cat "$case_dir/mod.txt")"
elif [ "$(cat "$ws/report.py")" != "$(printf %s "$CALC")" ]; then
  bad "$name" "report.py written to disk: $(cat "$ws/report.py")"
else
  ONE_UNDONE="$(printf %s "$FIXED" | sed 's/return a + b/return a - b/')"
  kak_send "evaluate-commands -client client0 %{ execute-keys u }"
  if ! wait_for 'dump_buffer && [ "$(cat "$case_dir/buf.txt")" = "$ONE_UNDONE" ]' 10; then
    bad "$name" "after one u: $(cat "$case_dir/buf.txt" 2>/dev/null)"
  else
    kak_send "evaluate-commands -client client0 %{ execute-keys u }"
    if ! wait_for 'dump_buffer && [ "$(cat "$case_dir/buf.txt")" = "$(printf %s "$CALC")" ]' 10; then
      bad "$name" "after two u: $(cat "$case_dir/buf.txt" 2>/dev/null)"
    else
      ok "$name"
    fi
  fi
fi

# (3) agentfix-diff shows the buffer against the disk (same session, redone).
name="agentfix-diff: the unsaved proposal as a diff against the file on disk"
kak_send "evaluate-commands -client client0 %{ execute-keys UU }"
wait_for 'dump_buffer && [ "$(cat "$case_dir/buf.txt")" = "$(printf %s "$FIXED")" ]' 10 || true
rm -f "$case_dir/diff.txt"
kak_send "evaluate-commands -client client0 %{
  agentfix-diff
  evaluate-commands -draft %{ execute-keys '%'; echo -to-file %{$case_dir/diff.txt} -- %val{selection} }
}"
if ! wait_for '[ -f "$case_dir/diff.txt" ]' 10; then
  bad "$name" "no diff buffer"
elif ! grep -qx -- '-    return a - b' "$case_dir/diff.txt" || ! grep -qx -- '+    return a \* b' "$case_dir/diff.txt"; then
  bad "$name" "diff: $(cat "$case_dir/diff.txt")"
else
  ok "$name"
fi
stop_kak

# (4) A diagnostic's message as the problem: agentfix-fix-message.
new_case
start_mock "$TWO_EDITS"
start_kak servers review message
name="agentfix-fix-message: a diagnostic-based run from Kakoune"
kak_send "evaluate-commands -client client0 %{ execute-keys 2g; agentfix-fix-message %{add() subtracts its arguments} }"
if ! wait_for 'dump_buffer && [ "$(cat "$case_dir/buf.txt")" = "$(printf %s "$FIXED")" ]' 30; then
  bad "$name" "buffer not fixed: $(cat "$case_dir/buf.txt" 2>/dev/null)"
elif ! wait_for '[ -s "$mock_log" ] && grep -q "line 2.*add() subtracts its arguments" "$mock_log"' 10; then
  bad "$name" "the message is not in the model's prompt: $(head -c 2000 "$mock_log" 2>/dev/null)"
elif [ "$(cat "$ws/report.py")" != "$(printf %s "$CALC")" ]; then
  bad "$name" "report.py written to disk"
else
  ok "$name"
fi
stop_kak

# (5) A file the proposal creates is left out of the edit (kakoune-lsp would
# write it to disk unreviewed, whatever the write alias), and said; the open
# buffer still gets its hunk, unsaved.
new_case
start_mock '[
  {"tools": [
    ["toolu_1", "edit_file", {"path": "report.py", "old_text": "def add(a, b):\n    return a - b", "new_text": "def add(a, b):\n    return a + b"}],
    ["toolu_2", "write_file", {"path": "test_report.py", "content": "from report import add\n\nassert add(1, 2) == 3\n"}]
  ]},
  {"text": "Fixed add, added a test."}
]'
start_kak servers review
name="a new file of the proposal is left out (kakoune-lsp would write it unreviewed); the buffer gets its hunk"
ONE_FIXED="$(printf %s "$CALC" | sed '0,/return a - b/s//return a + b/')"
code_action 2
if ! wait_for 'dump_buffer && [ "$(cat "$case_dir/buf.txt")" = "$ONE_FIXED" ]' 30; then
  bad "$name" "buffer not fixed: $(cat "$case_dir/buf.txt" 2>/dev/null)"
elif sleep 1 && [ -e "$ws/test_report.py" ]; then
  bad "$name" "test_report.py created on disk: $(cat "$ws/test_report.py")"
elif [ "$(cat "$ws/report.py")" != "$(printf %s "$CALC")" ]; then
  bad "$name" "report.py written to disk"
else
  ok "$name"
fi
stop_kak

echo "== kakoune tests took $(($(date +%s) - start)) s"
echo "kakoune tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
