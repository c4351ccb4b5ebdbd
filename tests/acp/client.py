"""An ACP client that drives `agentfix acp` for tests/acp.rs.

It is an independent implementation of the protocol's client side: the
`agent-client-protocol` package from PyPI (tests/acp/install.sh installs
it). Its transport here reads the agent's stdout itself, so every raw
message agentfix sends is kept and checked against the ACP JSON schema the
spec publishes (`schema/v1/schema.json` of the npm `@agentclientprotocol/sdk`,
also installed by tests/acp/install.sh, never vendored): the message as a
whole against the schema's agent messages, its params or result against the
type of its method, strictly (a property the schema does not define is a
violation; extensions belong in `_meta`). The Python package itself accepts
loosely, which is why the raw messages are checked here.

    python3 tests/acp/client.py --schema SCHEMA --script SCRIPT.json -- AGENT ARGS...

The script says what the client offers and does (JSON):

    {"cwd": "/abs/ws",                       # session/new's cwd
     "fs": {"read": true, "write": true},   # the client's fs capabilities
     "buffers": {"/abs/ws/a.py": "text"},   # what fs/read_text_file answers (else the disk)
     "permissions": ["reject"],             # the options picked, in order ("cancelled": no pick)
     "mcpServers": [...],                   # session/new's mcpServers
     "prompts": [{"content": [...], "cancelOn": "agent_message_chunk"}]}

It prints one JSON report on stdout: the initialize result, each prompt's
stop reason (or error) and the raw params of its updates, the permission
requests, the reads and writes, every raw line the agent sent, and the
violations (schema, lines that are not JSON, updates after a prompt's
answer). A written file is kept as the client's buffer: later reads of it
answer the written text, as an editor's would.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import sys
from typing import Any

import acp
import jsonschema
from acp import RequestError
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    Implementation,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)

ENTRY_KEYS = ("$ref", "allOf", "anyOf", "oneOf", "properties")


def strict(node: Any, entry: bool = False) -> Any:
    """The schema with `unevaluatedProperties: false` wherever a new object
    of the instance begins (property values, array items), so that a
    property no branch defines is refused; a subschema that allows any
    property (`additionalProperties`) or says nothing of objects is left
    as it is."""
    if isinstance(node, list):
        return [strict(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key in ("properties", "patternProperties", "$defs") and isinstance(value, dict):
            out[key] = {k: strict(v, entry=(key != "$defs")) for k, v in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = strict(value, entry=True)
        elif key == "prefixItems" and isinstance(value, list):
            out[key] = [strict(v, entry=True) for v in value]
        else:
            out[key] = strict(value)
    if entry and any(k in out for k in ENTRY_KEYS) and "additionalProperties" not in out:
        out["unevaluatedProperties"] = False
    return out


class Checker:
    """Validates the agent's raw messages against the published schema."""

    def __init__(self, path: str) -> None:
        with open(path, encoding="utf-8") as f:
            schema = json.load(f)
        self.defs = strict(schema["$defs"])
        self.envelope = {"$defs": schema["$defs"], **schema["anyOf"][0]}
        self.protocol = {"$defs": schema["$defs"], **schema["anyOf"][2]}
        self.by_method: dict[tuple[str, str], str] = {}
        for name, d in schema["$defs"].items():
            method, side = d.get("x-method"), d.get("x-side")
            if method is None:
                continue
            kind = "response" if name.endswith("Response") else "params"
            self.by_method[(kind, method)] = name
        self.violations: list[str] = []

    def typed(self, name: str, instance: Any, where: str) -> None:
        schema = {"$defs": self.defs, "$ref": f"#/$defs/{name}", "unevaluatedProperties": False}
        v = jsonschema.Draft202012Validator(schema)
        for e in v.iter_errors(instance):
            path = "/".join(str(p) for p in e.absolute_path)
            self.violations.append(f"{where}: {name} at /{path}: {e.message}")

    def message(self, msg: Any, sent_methods: dict[Any, str]) -> None:
        if not isinstance(msg, dict):
            self.violations.append(f"not a JSON object: {msg!r}")
            return
        method = msg.get("method")
        where = method or f"response to {sent_methods.get(msg.get('id'), '?')}"
        whole = self.protocol if isinstance(method, str) and method.startswith("$/") else self.envelope
        for e in jsonschema.Draft202012Validator(whole).iter_errors(msg):
            self.violations.append(f"{where}: the message: {e.message}")
        if method is not None:
            allowed = {"jsonrpc", "method", "params"} | ({"id"} if "id" in msg else set())
            extra = set(msg) - allowed
            if extra:
                self.violations.append(f"{where}: properties the envelope does not define: {sorted(extra)}")
            name = self.by_method.get(("params", method))
            if name is None:
                self.violations.append(f"{method}: a method the schema does not define")
            else:
                self.typed(name, msg.get("params"), where)
            return
        extra = set(msg) - {"jsonrpc", "id", "result", "error"}
        if extra:
            self.violations.append(f"{where}: properties the envelope does not define: {sorted(extra)}")
        if "error" in msg:
            self.typed("Error", msg["error"], where)
            return
        name = self.by_method.get(("response", sent_methods.get(msg.get("id"), "")))
        if name is None:
            self.violations.append(f"{where}: a response to no request the client sent")
        else:
            self.typed(name, msg.get("result"), where)


class RecordingTransport:
    """NDJSON over the agent's pipes, keeping every raw line it sends."""

    def __init__(self, proc: asyncio.subprocess.Process, checker: Checker, report: dict) -> None:
        self.proc = proc
        self.checker = checker
        self.report = report
        self.sent_methods: dict[Any, str] = {}
        self.on_message = None

    async def send(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:
            self.sent_methods[message["id"]] = message["method"]
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        await self.proc.stdin.drain()

    async def receive(self) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                return None
            text = line.decode("utf-8", errors="replace").rstrip("\n")
            self.report["raw"].append(text)
            try:
                msg = json.loads(text)
            except json.JSONDecodeError:
                self.checker.violations.append(f"a line that is not JSON: {text[:200]}")
                continue
            self.checker.message(msg, self.sent_methods)
            if self.on_message:
                self.on_message(msg)
            return msg

    async def close(self) -> None:
        if self.proc.stdin and not self.proc.stdin.is_closing():
            self.proc.stdin.close()


class ScriptedClient:
    """The editor: answers reads from its buffers, permissions as scripted."""

    def __init__(self, script: dict, report: dict) -> None:
        self.script = script
        self.report = report
        self.buffers: dict[str, str] = dict(script.get("buffers", {}))
        self.permissions = list(script.get("permissions", []))
        self.conn = None
        self.cancel_on: str | None = None
        self.session_id: str | None = None

    def on_connect(self, conn) -> None:
        self.conn = conn

    async def request_permission(self, options, session_id, tool_call, **kwargs):
        self.report["permissions"].append(
            {"title": tool_call.title, "options": [o.option_id for o in options], "toolCallId": tool_call.tool_call_id}
        )
        pick = self.permissions.pop(0) if self.permissions else "reject"
        if pick == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=pick))

    async def session_update(self, session_id, update, **kwargs):
        kind = getattr(update, "session_update", None)
        if self.cancel_on and kind == self.cancel_on and self.conn is not None:
            self.cancel_on = None
            await self.conn.cancel(session_id=session_id)

    async def read_text_file(self, session_id, path, line=None, limit=None, **kwargs):
        self.report["reads"].append(path)
        if path in self.buffers:
            return ReadTextFileResponse(content=self.buffers[path])
        try:
            with open(path, encoding="utf-8") as f:
                return ReadTextFileResponse(content=f.read())
        except OSError as e:
            raise RequestError.resource_not_found(path) from e

    async def write_text_file(self, session_id, path, content, **kwargs):
        self.report["writes"].append({"path": path, "content": content})
        self.buffers[path] = content
        return WriteTextFileResponse()

    async def create_terminal(self, *a, **k):
        raise RequestError.method_not_found("terminal/create")

    async def terminal_output(self, *a, **k):
        raise RequestError.method_not_found("terminal/output")

    async def release_terminal(self, *a, **k):
        raise RequestError.method_not_found("terminal/release")

    async def wait_for_terminal_exit(self, *a, **k):
        raise RequestError.method_not_found("terminal/wait_for_exit")

    async def kill_terminal(self, *a, **k):
        raise RequestError.method_not_found("terminal/kill")

    async def ext_method(self, method, params):
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method, params):
        return None


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--schema", required=True)
    parser.add_argument("--script", required=True)
    parser.add_argument("agent", nargs="+")
    args = parser.parse_args()
    with open(args.script, encoding="utf-8") as f:
        script = json.load(f)
    report: dict[str, Any] = {"raw": [], "permissions": [], "reads": [], "writes": [], "prompts": []}
    checker = Checker(args.schema)
    proc = await asyncio.create_subprocess_exec(
        *args.agent,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=64 * 1024 * 1024,
    )
    transport = RecordingTransport(proc, checker, report)
    client = ScriptedClient(script, report)
    conn = acp.connect_to_agent(client, transport)
    updates: list[dict] = []
    answered = {"done": True}

    def on_message(msg: dict) -> None:
        if msg.get("method") == "session/update":
            if answered["done"]:
                checker.violations.append(f"a session/update outside a prompt: {json.dumps(msg)[:200]}")
            updates.append(msg.get("params"))

    transport.on_message = on_message
    fs = script.get("fs", {"read": True, "write": True})
    capabilities = ClientCapabilities(
        fs=FileSystemCapabilities(read_text_file=fs.get("read", False), write_text_file=fs.get("write", False)),
        terminal=False,
    )
    init = await conn.initialize(
        protocol_version=1, client_capabilities=capabilities, client_info=Implementation(name="acp-test", version="1")
    )
    report["initialize"] = init.model_dump(by_alias=True, exclude_none=True)
    session = await conn.new_session(cwd=script["cwd"], mcp_servers=script.get("mcpServers", []))
    report["session"] = session.session_id
    for p in script["prompts"]:
        client.cancel_on = p.get("cancelOn")
        updates.clear()
        answered["done"] = False
        entry: dict[str, Any] = {}
        try:
            response = await conn.prompt(session_id=session.session_id, prompt=copy.deepcopy(p["content"]))
            entry["stopReason"] = response.stop_reason
        except RequestError as e:
            entry["error"] = {"code": e.code, "message": str(e), "data": getattr(e, "data", None)}
        answered["done"] = True
        entry["updates"] = list(updates)
        report["prompts"].append(entry)
    await transport.close()
    try:
        await asyncio.wait_for(proc.wait(), timeout=10)
    except asyncio.TimeoutError:
        proc.kill()
        checker.violations.append("the agent did not exit within 10 s of stdin closing")
    report["exitCode"] = proc.returncode
    report["violations"] = checker.violations
    json.dump(report, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
