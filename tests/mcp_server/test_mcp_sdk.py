"""Every agency is an MCP server: the official MCP Python SDK (PyPI `mcp`) against a real
`agency serve`, over Streamable HTTP in both revisions it speaks (2026-07-28, stateless; and
2025-11-25, with the `initialize` handshake and a session), and over stdio through
`agency mcp NAME`.

The suite starts what it needs: a fresh SQLite database in a temporary directory, keys made
with the CLI, a slow fake model, and `agency serve` on a free loopback port. It builds
nothing: the binary is `$AGENCY_BIN` (default `target/debug/agency`).

    cargo build -p agency && python -m pytest -q tests/mcp_server
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import re
import signal
import sqlite3
import subprocess
import uuid
import threading
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2
import mcp_types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from slow_model import SlowModel

ROOT = Path(__file__).resolve().parents[2]
STUDIO_YAML = ROOT / "examples" / "studio.yaml"
START_TIMEOUT = 60.0
# The revisions the SDK speaks that the server serves: the stateless one, and the handshake.
MODES = ["2026-07-28", "legacy"]

SLOW_YAML = """
name: slow
protocol: json
manager: thinker
# A late reply (of a cancelled turn's model call) is waited for this long at most.
turn_deadline_secs: 4
providers:
  fake: {{ kind: openai, base_url: "{base_url}" }}
agents:
  - name: thinker
    role: thinks slowly when asked to
    model: fake/slow-model
"""

# A clerk whose every echo waits for a person's approval (docs/approvals.md).
CLERK_YAML = """
name: clerk
manager: clerk
agents:
  - name: clerk
    model: builtin/rules
    tools: [builtin/echo]
    approve: [builtin/echo]
    rules:
      - { when: user, call: builtin/echo, with: { text: "{{message}}" }, do: "Echoed: {{result}}", send_to: user }
"""


def answer_for(request: str) -> str:
    """What the demo agency `studio` (examples/studio.yaml) answers, every time."""
    return (
        "Here is your reviewed build. Approved: Please review: "
        f"fn main() {{ /* Please build: {request} */ }}"
    )


def agency_bin() -> Path:
    path = Path(os.environ.get("AGENCY_BIN", ROOT / "target" / "debug" / "agency"))
    if not path.is_absolute():
        path = Path.cwd() / path
    if not path.is_file():
        pytest.exit(f"no agency binary at {path}: run `cargo build -p agency`", returncode=2)
    return path.resolve()


@dataclass
class Server:
    port: int
    keys: dict[str, str]
    db: str
    work: Path
    env: dict[str, str]

    def url(self, agency: str = "studio") -> str:
        return f"http://127.0.0.1:{self.port}/api/agency/{agency}/mcp"


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory):
    binary = agency_bin()
    work = tmp_path_factory.mktemp("agency")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENCY_")}
    env["AGENCY_LOG"] = "info"
    db = f"sqlite://{work}/a.db"
    for var in ("NO_PROXY", "no_proxy"):
        os.environ[var] = ",".join(filter(None, [os.environ.get(var), "127.0.0.1", "localhost"]))
    model = SlowModel()

    def cli(*args: str) -> str:
        done = subprocess.run(
            [str(binary), "--db", db, *args], cwd=work, env=env, capture_output=True,
            text=True, timeout=120,
        )
        assert done.returncode == 0, f"`agency {' '.join(args)}`: {done.stdout}{done.stderr}"
        return done.stdout

    def key(agency: str, name: str) -> str:
        return cli("keys", "create", agency, "--name", name).strip()

    other = re.sub(r"(?m)^name: studio$", "name: other", STUDIO_YAML.read_text())
    (work / "other.yaml").write_text(other)
    cli("import", str(work / "other.yaml"))
    (work / "slow.yaml").write_text(SLOW_YAML.format(base_url=model.base_url))
    cli("import", str(work / "slow.yaml"))
    (work / "clerk.yaml").write_text(CLERK_YAML)
    cli("import", str(work / "clerk.yaml"))
    keys = {
        "clerk": key("clerk", "mcp"),
        "studio": key("studio", "mcp"),
        "other": key("other", "mcp"),
        "slow": key("slow", "mcp"),
        "bad": "agk_" + "0" * 64,
    }
    serve_env = {**env, "AGENCY_ALLOW_PRIVATE_ADDRESSES": "true"}
    log = work / "serve.log"
    with open(log, "wb") as stderr:
        proc = subprocess.Popen(
            [str(binary), "--db", db, "serve", "--listen", "127.0.0.1:0"],
            cwd=work, env=serve_env, stdout=subprocess.PIPE, stderr=stderr, text=True,
        )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    port = None
    deadline = time.monotonic() + START_TIMEOUT
    while port is None:
        line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        assert line is not None, f"`agency serve` ended:\n{log.read_text()}"
        m = re.fullmatch(r"agency: listening on http://127\.0\.0\.1:(\d+)\s*", line)
        port = int(m.group(1)) if m else None
    yield Server(port=port, keys=keys, db=db, work=work, env=serve_env)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 0, log.read_text()
    model.close()


def http(server: Server, key: str = "studio", agency: str = "studio"):
    client = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {server.keys[key]}"},
        timeout=httpx2.Timeout(30.0, read=120.0),
    )
    return streamable_http_client(server.url(agency), http_client=client)


@asynccontextmanager
async def connect(server: Server, mode: str, key: str = "studio", agency: str = "studio"):
    async with Client(http(server, key, agency), mode=mode, cache=None) as client:
        yield client


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 120))


class Progress:
    def __init__(self) -> None:
        self.seen: list[tuple[float, str | None]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((progress, message))


# --- The tool, in each revision --------------------------------------------------------------


async def a_conversation(client: Client, version: str) -> str:
    assert client.protocol_version == version
    listed = await client.list_tools()
    assert [t.name for t in listed.tools] == ["studio"]
    tool = listed.tools[0]
    assert "programmer" in (tool.description or "")
    assert tool.input_schema["required"] == ["message"]
    assert set(tool.output_schema["required"]) >= {"conversation", "turn", "usage", "cost_usd"}

    first = await client.call_tool("studio", {"message": "a todo app"})
    assert not first.is_error, first
    assert first.content[0].text == answer_for("a todo app")
    facts = first.structured_content
    assert facts["turn"] == 1
    assert facts["stopped_by"] == "answered"
    assert facts["usage"]["total_tokens"] >= 0
    conversation = facts["conversation"]

    progress = Progress()
    second = await client.call_tool(
        "studio", {"message": "a clock", "conversation": conversation}, progress_callback=progress
    )
    assert not second.is_error, second
    assert second.content[0].text == answer_for("a clock")
    assert second.structured_content["conversation"] == conversation
    assert second.structured_content["turn"] == 2
    # Each hop and the reviewer's tool call, in order, counting up.
    messages = [m for _, m in progress.seen]
    assert any("manager → programmer" in (m or "") for m in messages), messages
    assert "reviewer calls builtin/echo" in messages, messages
    assert "builtin/echo answered" in messages, messages
    counts = [p for p, _ in progress.seen]
    assert counts == sorted(counts) and len(set(counts)) == len(counts)
    return conversation


@pytest.mark.parametrize("mode,version", [("2026-07-28", "2026-07-28"), ("legacy", "2025-11-25")])
def test_a_conversation_over_http(server: Server, mode: str, version: str):
    async def go():
        async with connect(server, mode) as client:
            conversation = await a_conversation(client, version)
        # The conversation browser shows the face its turns came by.
        assert [face for _, _, face in turns(server, conversation)] == ["mcp", "mcp"]

    run(go())


def test_auto_negotiation_picks_the_stateless_revision(server: Server):
    async def go():
        async with connect(server, "auto") as client:
            assert client.protocol_version == "2026-07-28"
            assert "studio" in (client.instructions or "")
            result = await client.call_tool("studio", {"message": "x"})
            assert result.content[0].text == answer_for("x")

    run(go())


def stdio(server: Server) -> StdioServerParameters:
    return StdioServerParameters(
        command=str(agency_bin()),
        args=["--db", server.db, "mcp", "studio"],
        env=server.env,
        cwd=str(server.work),
    )


@pytest.mark.parametrize("mode,version", [("2026-07-28", "2026-07-28"), ("legacy", "2025-11-25")])
def test_a_conversation_over_stdio(server: Server, mode: str, version: str):
    async def go():
        async with Client(stdio(server), mode=mode, cache=None) as client:
            await a_conversation(client, version)

    run(go())


# --- Approvals: 2026-07-28's input_required ------------------------------------------------


def test_a_call_waiting_for_approval_asks_the_client_with_input_required(server: Server):
    asked: list[mcp_types.ElicitRequestParams] = []
    answers = [
        mcp_types.ElicitResult(action="accept", content={"approve": True}),
        mcp_types.ElicitResult(action="accept", content={"approve": False, "reason": "too much"}),
        mcp_types.ElicitResult(action="decline"),
    ]

    async def elicit(context, params):
        asked.append(params)
        return answers[len(asked) - 1]

    async def go():
        async with Client(http(server, "clerk", "clerk"), mode="2026-07-28", cache=None,
                          elicitation_callback=elicit) as client:
            # The SDK asks through its callback and retries the call with the answer.
            approved = await client.call_tool("clerk", {"message": "pay 5 dollars"})
            assert not approved.is_error, approved
            assert approved.content[0].text == "Echoed: pay 5 dollars"
            assert approved.structured_content["stopped_by"] == "answered"
            conversation = approved.structured_content["conversation"]
            assert "clerk asks to call builtin/echo" in asked[0].message
            assert "pay 5 dollars" in asked[0].message
            assert asked[0].requested_schema["required"] == ["approve"]
            denied = await client.call_tool(
                "clerk", {"message": "pay 6 dollars", "conversation": conversation})
            assert denied.content[0].text == (
                "Echoed: Not run: a person denied it. Their reason: too much")
            declined = await client.call_tool(
                "clerk", {"message": "pay 7 dollars", "conversation": conversation})
            assert declined.content[0].text.startswith("Echoed: Not run: a person denied it")
            assert len(asked) == 3
        # One turn each, paused and resumed: the conversation browser shows them answered.
        assert [why for _, why, _ in turns(server, conversation)] == ["answered"] * 3

    run(go())


def test_a_forged_request_state_answers_nothing(server: Server):
    async def go():
        state = "agency-approvals:" + str(uuid.uuid4())
        async with httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {server.keys['clerk']}",
                     "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "clerk",
                     "Accept": "application/json, text/event-stream"},
            timeout=30,
        ) as h:
            r = await h.post(server.url("clerk"), json={
                "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "clerk", "arguments": {"message": "pay"},
                           "requestState": state,
                           "inputResponses": {str(uuid.uuid4()): {"action": "accept", "content": {"approve": True}}},
                           "_meta": envelope()},
            })
            assert r.status_code == 200, r.text
            result = r.json()["result"]
            assert result["isError"] is True, result
            assert "conversation" in result["content"][0]["text"].lower(), result

    run(go())


# --- Cancelling ------------------------------------------------------------------------------


def turns(server: Server, conversation: str) -> list[tuple[int, str, str]]:
    """The conversation's turns as stored: number, why each stopped, and its face."""
    path = server.db.removeprefix("sqlite://")
    with sqlite3.connect(path) as db:
        return db.execute(
            "SELECT number, stopped_by, face FROM turns WHERE conversation_id = ? ORDER BY number",
            (uuid.UUID(conversation).bytes,),
        ).fetchall()


async def cancel_frees_the_conversation(server: Server, client: Client) -> None:
    first = await client.call_tool("slow", {"message": "hello"})
    conversation = first.structured_content["conversation"]
    started = time.monotonic()
    with pytest.raises((TimeoutError, asyncio.TimeoutError, MCPError)):
        await asyncio.wait_for(
            client.call_tool("slow", {"message": "be slow", "conversation": conversation}), 1.5
        )
    # The turn was cancelled: it ended at once (its model's late reply is waited for a few
    # seconds, the agency's grace, not the 20 it takes), and the next turn is the third.
    third = await client.call_tool("slow", {"message": "again", "conversation": conversation})
    assert not third.is_error, third
    assert third.structured_content["turn"] == 3
    assert third.content[0].text.startswith("echo: ") and "again" in third.content[0].text
    assert time.monotonic() - started < 10, "the cancelled turn held its conversation"
    assert turns(server, conversation) == [
        (1, "answered", "mcp"),
        (2, "cancelled", "mcp"),
        (3, "answered", "mcp"),
    ]


@pytest.mark.parametrize("mode", MODES)
def test_cancelling_a_call_cancels_its_turn_over_http(server: Server, mode: str):
    async def go():
        async with connect(server, mode, key="slow", agency="slow") as client:
            await cancel_frees_the_conversation(server, client)

    run(go())


def test_cancelling_a_call_cancels_its_turn_over_stdio(server: Server):
    params = StdioServerParameters(
        command=str(agency_bin()),
        args=["--db", server.db, "mcp", "slow"],
        env=server.env,
        cwd=str(server.work),
    )

    async def go():
        async with Client(params, mode="legacy", cache=None) as client:
            await cancel_frees_the_conversation(server, client)

    run(go())


# --- Refused ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_another_agencys_conversation_is_not_found(server: Server, mode: str):
    async def go():
        async with connect(server, mode, key="other", agency="other") as other:
            theirs = await other.call_tool("other", {"message": "a secret plan"})
            conversation = theirs.structured_content["conversation"]
        async with connect(server, mode) as client:
            result = await client.call_tool(
                "studio", {"message": "more", "conversation": conversation}
            )
            assert result.is_error
            text = result.content[0].text
            assert f"No conversation {conversation}" in text
            assert "secret" not in text
            # The same words as for one that never existed.
            none = "0190c2f5-0000-7000-8000-000000000000"
            missing = await client.call_tool("studio", {"message": "x", "conversation": none})
            assert missing.is_error
            assert missing.content[0].text == text.replace(conversation, none)

    run(go())


@pytest.mark.parametrize("mode", MODES)
def test_bad_arguments_are_tool_errors_and_unknown_tools_protocol_errors(server: Server, mode):
    async def go():
        async with connect(server, mode) as client:
            result = await client.call_tool("studio", {})
            assert result.is_error and "message" in result.content[0].text
            result = await client.call_tool("studio", {"message": "x", "conversation": "nope"})
            assert result.is_error and "conversation" in result.content[0].text
            with pytest.raises(MCPError) as e:
                await client.call_tool("nope", {"message": "x"})
            assert e.value.error.code == -32602

    run(go())


@pytest.mark.parametrize("mode", MODES)
def test_keys_are_checked(server: Server, mode: str):
    async def go():
        # A wrong key; a key of another agency (whose agency does not exist for it).
        for key, agency in (("bad", "studio"), ("other", "studio")):
            with pytest.raises(Exception):
                async with connect(server, mode, key=key, agency=agency) as client:
                    await client.list_tools()

    run(go())


def raw(server: Server, body: dict, headers: dict[str, str], key: str = "studio"):
    base = {
        "Authorization": f"Bearer {server.keys[key]}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    return httpx2.post(server.url(), content=json.dumps(body), headers={**base, **headers})


def envelope(version: str = "2026-07-28") -> dict:
    return {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
    }


def test_the_wire_refuses_as_the_protocol_says(server: Server):
    modern = {"MCP-Protocol-Version": "2026-07-28"}
    # An unknown method: -32601, HTTP 404.
    r = raw(server, {"jsonrpc": "2.0", "id": 1, "method": "foo/bar", "params": {"_meta": envelope()}},
            {**modern, "Mcp-Method": "foo/bar"})
    assert r.status_code == 404 and r.json()["error"]["code"] == -32601
    # An unknown version: -32022 naming those served.
    r = raw(server, {"jsonrpc": "2.0", "id": 2, "method": "tools/list",
                     "params": {"_meta": envelope("2099-01-01")}},
            {"MCP-Protocol-Version": "2099-01-01", "Mcp-Method": "tools/list"})
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["code"] == -32022
    assert error["data"]["requested"] == "2099-01-01"
    assert "2026-07-28" in error["data"]["supported"] and "2025-11-25" in error["data"]["supported"]
    # Headers that disagree with the body: -32020.
    r = raw(server, {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": envelope()}},
            {**modern, "Mcp-Method": "tools/call"})
    assert r.status_code == 400 and r.json()["error"]["code"] == -32020
    # No envelope at the stateless revision: -32602.
    r = raw(server, {"jsonrpc": "2.0", "id": 4, "method": "tools/list"}, {**modern, "Mcp-Method": "tools/list"})
    assert r.status_code == 400 and r.json()["error"]["code"] == -32602
    # Not JSON: -32700.
    r = httpx2.post(server.url(), content=b"{", headers={"Authorization": f"Bearer {server.keys['studio']}"})
    assert r.status_code == 400 and r.json()["error"]["code"] == -32700
    # A handshake asking for a version not served gets the newest handshake one.
    r = raw(server, {"jsonrpc": "2.0", "id": 5, "method": "initialize",
                     "params": {"protocolVersion": "1999-01-01", "capabilities": {},
                                "clientInfo": {"name": "t", "version": "1"}}}, {})
    assert r.status_code == 200 and r.json()["result"]["protocolVersion"] == "2025-11-25"
    session = r.headers["mcp-session-id"]
    # The session is its key's alone, and a session that does not exist is not found.
    r = raw(server, {"jsonrpc": "2.0", "id": 6, "method": "tools/list"},
            {"Mcp-Session-Id": session}, key="other")
    assert r.status_code in (404,)
    r = raw(server, {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}, {"Mcp-Session-Id": "nope"})
    assert r.status_code == 404
    r = raw(server, {"jsonrpc": "2.0", "id": 8, "method": "tools/list"},
            {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})
    assert r.status_code == 200 and r.json()["result"]["tools"][0]["name"] == "studio"
    # A browser page of another origin (DNS rebinding): 403.
    r = raw(server, {"jsonrpc": "2.0", "id": 10, "method": "tools/list", "params": {"_meta": envelope()}},
            {**modern, "Mcp-Method": "tools/list", "Origin": "http://evil.example"})
    assert r.status_code == 403
    # A wrong key: 401 with a Bearer challenge.
    r = raw(server, {"jsonrpc": "2.0", "id": 9, "method": "tools/list"}, modern, key="bad")
    assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
    assert "studio" not in r.text


# --- The TypeScript SDK ----------------------------------------------------------------------


def test_the_typescript_sdk(server: Server, tmp_path: Path):
    """The TypeScript SDK's client (the version tests/mcp/install puts in target/mcp, which the
    stock servers there run on), at 2025-11-25."""
    modules = Path(os.environ.get("AGENCY_MCP_DIR", ROOT / "target" / "mcp")) / "node_modules"
    sdk = modules / "@modelcontextprotocol" / "sdk"
    if not sdk.is_dir() or subprocess.run(["node", "--version"], capture_output=True).returncode:
        if os.environ.get("CI") == "true":
            pytest.fail(f"no TypeScript MCP SDK at {sdk} (bash tests/mcp/install) or no node")
        pytest.skip("no TypeScript MCP SDK (bash tests/mcp/install) or no node")
    # Node finds the SDK from the script's directory up: a folder of the test's, whose
    # node_modules is those.
    (tmp_path / "node_modules").symlink_to(modules.resolve())
    script = tmp_path / "ts_client.mjs"
    script.write_text((Path(__file__).parent / "ts_client.mjs").read_text())
    done = subprocess.run(
        ["node", str(script), server.url(), server.keys["studio"]],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["version"] == "2025-11-25" and seen["session"]
    assert seen["tools"] == ["studio"]
    assert seen["answer"] == answer_for("a todo app")
    assert seen["first"]["turn"] == 1
    assert seen["second"]["turn"] == 2
    assert seen["second"]["conversation"] == seen["first"]["conversation"]
    assert "reviewer calls builtin/echo" in seen["progress"]
    assert seen["unknown"] == -32602
