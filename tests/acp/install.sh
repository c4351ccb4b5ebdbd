#!/usr/bin/env bash
# Installs what tests/acp.rs drives `agentfix acp` with, at pinned versions:
#   - the Python ACP client `agent-client-protocol` and `jsonschema` (PyPI);
#   - the ACP JSON schema (`schema/v1/schema.json`) from the npm package of
#     the TypeScript SDK, `@agentclientprotocol/sdk` (never vendored here),
#     into "${XDG_CACHE_HOME:-$HOME/.cache}/agentfix/acp-sdk-<version>/".
# Prints the schema's path. .ci/run runs it; so can a developer.
set -euo pipefail
ACP_PY=0.12.1
JSONSCHEMA=4.26.0
ACP_NPM=2.4.0
installed() {
  python3 -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$1" 2>/dev/null || true
}
if [ "$(installed agent-client-protocol)" != "$ACP_PY" ] || [ "$(installed jsonschema)" != "$JSONSCHEMA" ]; then
  python3 -m pip install -q "agent-client-protocol==$ACP_PY" "jsonschema==$JSONSCHEMA" >&2
fi
dir="${XDG_CACHE_HOME:-$HOME/.cache}/agentfix/acp-sdk-$ACP_NPM"
if [ ! -s "$dir/schema.json" ]; then
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "@agentclientprotocol/sdk@$ACP_NPM" >/dev/null &&
    tar xzf "agentclientprotocol-sdk-$ACP_NPM.tgz" package/schema/v1/schema.json)
  mkdir -p "$dir"
  mv "$tmp/package/schema/v1/schema.json" "$dir/schema.json"
  rm -rf "$tmp"
fi
echo "$dir/schema.json"
