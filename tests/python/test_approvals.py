"""A person's approval before a tool acts (issue 36), through the official `openai` package.

A clerk on the rules model writes the user's message to a file with the stock MCP filesystem
server (`@modelcontextprotocol/server-filesystem`, from `tests/mcp/install`), a call that
needs approval. Through the Responses API the call comes back as an `mcp_approval_request`
item, answered by an `mcp_approval_response` item with `previous_response_id`; through Chat
Completions, which has no shape for it, the request waits while the approval is given through
the management API, and the policy's timeout denies. A server killed (`kill -9`) while an
approved call of the stock server-everything runs does not make the call again when the
request is retried on the restarted server: the agent reads that its outcome is unknown. With
`AGENCY_TEST_SERVERS=3` (and
`AGENCY_TEST_POSTGRES`) three servers on one PostgreSQL answer behind HAProxy, so an approval
is given on another server than the one whose turn waits or paused.

    cargo build -p agency && bash tests/mcp/install && python -m pytest -q tests/python -k approvals
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
import urllib.error
import urllib.request
import uuid
from http.cookiejar import CookieJar
from pathlib import Path

import openai
import pytest
from openai.types.responses import ResponseOutputMessage
from openai.types.responses.response_output_item import McpApprovalRequest

from test_openai_sdk import (
    REQUEST_TIMEOUT,
    ROOT,
    _clean_env,
    agency_bin,
    fresh_postgres_schema,
    servers_wanted,
    start_haproxy,
    start_serve,
    stop_serve,
)

PASSWORD = "correct horse battery"


def mcp_dir() -> Path:
    return Path(os.environ.get("AGENCY_MCP_DIR", ROOT / "target" / "mcp"))


def stock_server(name: str) -> Path:
    """The script of a stock MCP server `tests/mcp/install` put in place (`server-filesystem`,
    `server-everything`)."""
    script = mcp_dir() / "node_modules" / "@modelcontextprotocol" / name / "dist" / "index.js"
    if not script.is_file():
        message = f"{name} is not installed ({script}): run tests/mcp/install"
        if os.environ.get("CI") == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return script


def clerk_yaml(name: str, root: Path, timeout: int | None = None) -> str:
    timeout_line = f"    approve_timeout_secs: {timeout}\n" if timeout else ""
    return f"""name: {name}
manager: clerk
agents:
  - name: clerk
    model: builtin/rules
    tools: [files/write_file]
    approve: [files/write_file]
{timeout_line}    rules:
      - {{ when: user, call: files/write_file,
          with: {{ path: "{root}/{{{{message}}}}.txt", content: "note {{{{message}}}}" }},
          do: "Wrote: {{{{result}}}}", send_to: user }}
"""


class Account:
    """A signed-up account speaking to the management API (its session cookie and CSRF token)."""

    def __init__(self, base: str, sign_up: bool = True, email: str = "ada@example.com") -> None:
        self.base = base
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
        self.csrf = ""
        path = "/api/auth/signup" if sign_up else "/api/auth/login"
        status, me = self.call("POST", path, {"email": email, "password": PASSWORD})
        assert status in (200, 201), me
        self.csrf = me["csrf_token"]

    def call(self, method: str, path: str, body=None, yaml: str | None = None) -> tuple[int, object]:
        headers = {"x-csrf-token": self.csrf} if self.csrf else {}
        data = None
        if yaml is not None:
            data, headers["content-type"] = yaml.encode(), "application/yaml"
        elif body is not None:
            data, headers["content-type"] = json.dumps(body).encode(), "application/json"
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with self.opener.open(request, timeout=REQUEST_TIMEOUT) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def import_agency(self, yaml: str) -> None:
        status, body = self.call("POST", "/api/agencies/import", yaml=yaml)
        assert status == 201, body

    def key(self, agency: str) -> str:
        status, body = self.call("POST", f"/api/agencies/{agency}/keys", {"name": "app"})
        assert status == 201, body
        return body["key"]

    def pending(self) -> list[dict]:
        status, body = self.call("GET", "/api/approvals")
        assert status == 200, body
        return body

    def wait_for_one(self) -> dict:
        for _ in range(500):
            pending = self.pending()
            if pending:
                assert len(pending) == 1, pending
                return pending[0]
            threading.Event().wait(0.02)
        pytest.fail("no approval was asked for")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    script = stock_server("server-filesystem")
    work = tmp_path_factory.mktemp("approvals")
    root = work / "files"
    root.mkdir()
    config = work / "config.yaml"
    config.write_text(
        f'mcp_servers:\n  files: {{ command: node, args: ["{script}", "{root}"] }}\n'
    )
    env = _clean_env()
    servers = servers_wanted()
    if servers == 1:
        db = f"sqlite://{work}/a.db"
    else:
        # Behind HAProxy, consecutive requests reach different servers: a turn paused or
        # waiting on one is answered on another.
        db = fresh_postgres_schema()
        env["AGENCY_MASTER_KEY"] = "42" * 32
    running = []
    for i in range(servers):
        log = work / f"serve{i + 1}.log"
        proc, port = start_serve(
            agency_bin(), ["--db", db, "--config", str(config)], work, env, log, []
        )
        running.append((proc, port, log))
    balancer = None
    if servers == 1:
        port = running[0][1]
    else:
        balancer, port = start_haproxy([p for _, p, _ in running])
    base = f"http://127.0.0.1:{port}"
    account = Account(base)
    account.import_agency(clerk_yaml("clerk", root))
    account.import_agency(clerk_yaml("hasty", root, timeout=1))
    keys = {"clerk": account.key("clerk"), "hasty": account.key("hasty")}
    yield base, account, keys, root
    if balancer is not None:
        balancer.kill()
        balancer.wait()
    for proc, _, log in running:
        stop_serve(proc, log)


def client(base: str, key: str) -> openai.OpenAI:
    return openai.OpenAI(api_key=key, base_url=f"{base}/v1", max_retries=0, timeout=REQUEST_TIMEOUT)


def ask_for_approval(c: openai.OpenAI, name: str) -> tuple[str, McpApprovalRequest]:
    response = c.responses.create(model="clerk", input=name)
    assert response.status == "completed"
    assert len(response.output) == 1
    item = response.output[0]
    assert isinstance(item, McpApprovalRequest), item
    assert item.type == "mcp_approval_request"
    assert item.server_label == "files"
    assert item.name == "write_file"
    assert item.id.startswith("mcpr_")
    assert json.loads(item.arguments)["content"] == f"note {name}"
    return response.id, item


def test_an_approved_call_runs_once_and_the_answer_uses_its_result(served) -> None:
    base, _, keys, root = served
    c = client(base, keys["clerk"])
    previous, item = ask_for_approval(c, "approved")
    assert not (root / "approved.txt").exists(), "nothing runs before the approval"
    response = c.responses.create(
        model="clerk",
        previous_response_id=previous,
        input=[{"type": "mcp_approval_response", "approval_request_id": item.id, "approve": True}],
    )
    assert response.previous_response_id == previous
    message = response.output[0]
    assert isinstance(message, ResponseOutputMessage)
    assert response.output_text.startswith("Wrote: Successfully wrote to "), response.output_text
    assert (root / "approved.txt").read_text() == "note approved"
    # Answering again changes nothing: the call is not made a second time.
    (root / "approved.txt").unlink()
    with pytest.raises(openai.BadRequestError):
        c.responses.create(
            model="clerk",
            previous_response_id=previous,
            input=[{"type": "mcp_approval_response", "approval_request_id": item.id, "approve": True}],
        )
    assert not (root / "approved.txt").exists()


def test_a_denied_call_is_never_made(served) -> None:
    base, _, keys, root = served
    c = client(base, keys["clerk"])
    previous, item = ask_for_approval(c, "denied")
    response = c.responses.create(
        model="clerk",
        previous_response_id=previous,
        input=[
            {
                "type": "mcp_approval_response",
                "approval_request_id": item.id,
                "approve": False,
                "reason": "not today",
            }
        ],
    )
    assert response.output_text == "Wrote: Not run: a person denied it. Their reason: not today"
    assert not (root / "denied.txt").exists()


def test_a_chat_completion_waits_for_an_approval_given_through_the_api(served) -> None:
    base, account, keys, root = served
    c = client(base, keys["clerk"])
    done: dict = {}

    def ask() -> None:
        done["completion"] = c.chat.completions.create(
            model="clerk", messages=[{"role": "user", "content": "waited"}]
        )

    asking = threading.Thread(target=ask)
    asking.start()
    approval = account.wait_for_one()
    assert approval["tool"] == "files/write_file"
    assert approval["state"] == "pending"
    assert not (root / "waited.txt").exists()
    status, body = account.call("POST", f"/api/approvals/{approval['id']}/approve")
    assert status == 200, body
    asking.join(timeout=REQUEST_TIMEOUT)
    answer = done["completion"].choices[0].message.content
    assert answer.startswith("Wrote: Successfully wrote to "), answer
    assert (root / "waited.txt").read_text() == "note waited"
    assert account.pending() == []


def test_a_streamed_chat_completion_waits_too_and_the_timeout_denies(served) -> None:
    base, account, keys, root = served
    c = client(base, keys["hasty"])
    stream = c.chat.completions.create(
        model="hasty", messages=[{"role": "user", "content": "late"}], stream=True
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == "Wrote: Not run: nobody approved it in time."
    assert not (root / "late.txt").exists()
    assert account.pending() == []


# --- kill -9 between an approved call and its result ---------------------------------------

SLOW_CLERK = """name: slowclerk
manager: clerk
agents:
  - name: clerk
    model: builtin/rules
    tools: [slow/trigger-long-running-operation]
    approve: [slow/trigger-long-running-operation]
    rules:
      - { when: user, call: slow/trigger-long-running-operation,
          with: { duration: 30, steps: 3 }, do: "Done: {{result}}", send_to: user }
"""


def test_an_approved_call_cut_by_kill_9_is_never_made_again(tmp_path: Path) -> None:
    script = stock_server("server-everything")
    calls = tmp_path / "calls"
    counter = Path(__file__).with_name("count_calls.py")
    config = tmp_path / "config.yaml"
    config.write_text(
        "mcp_servers:\n  slow: { command: " + json.dumps(sys.executable) + ", args: ["
        + ", ".join(json.dumps(str(a)) for a in [counter, calls, "node", script, "stdio"])
        + "], timeout_secs: 120 }\n"
    )
    env = _clean_env()
    args = ["--db", f"sqlite://{tmp_path}/a.db", "--config", str(config)]
    log = tmp_path / "serve.log"
    proc, port = start_serve(agency_bin(), args, tmp_path, env, log, [])
    try:
        account = Account(f"http://127.0.0.1:{port}")
        account.import_agency(SLOW_CLERK)
        key = account.key("slowclerk")
        c = client(f"http://127.0.0.1:{port}", key)
        asked = c.responses.create(model="slowclerk", input="go")
        [item] = asked.output
        assert isinstance(item, McpApprovalRequest), item
        approval = [{"type": "mcp_approval_response", "approval_request_id": item.id, "approve": True}]

        # Approved: the call goes out (the server counts it) and runs for 30 s; the agency
        # is killed meanwhile.
        def approve() -> None:
            try:
                c.responses.create(model="slowclerk", previous_response_id=asked.id, input=approval)
            except openai.APIError:
                pass

        threading.Thread(target=approve, daemon=True).start()
        for _ in range(600):
            if calls.exists() and calls.read_bytes().count(b"\n") == 1:
                break
            threading.Event().wait(0.05)
        else:
            pytest.fail(f"the approved call never reached the tool server:\n{log.read_text()}")
        proc.kill()
        proc.wait()

        # Restarted on the same database, the client's retry of the same answer: the call is
        # not made again, and the agent reads that its outcome is unknown.
        proc, port = start_serve(agency_bin(), args, tmp_path, env, log, [])
        c = client(f"http://127.0.0.1:{port}", key)
        retried = c.responses.create(model="slowclerk", previous_response_id=asked.id, input=approval)
        assert retried.output_text.startswith("Done: Outcome unknown"), retried.output_text
        threading.Event().wait(1.0)
        assert calls.read_bytes().count(b"\n") == 1, calls.read_text()
    finally:
        stop_serve(proc, log)


def test_calls_left_waiting_by_a_killed_server_are_withdrawn_by_the_next_turn(tmp_path: Path) -> None:
    script = stock_server("server-filesystem")
    root = tmp_path / "files"
    root.mkdir()
    config = tmp_path / "config.yaml"
    config.write_text(f'mcp_servers:\n  files: {{ command: node, args: ["{script}", "{root}"] }}\n')
    env = _clean_env()
    args = ["--db", f"sqlite://{tmp_path}/a.db", "--config", str(config)]
    log = tmp_path / "serve.log"
    proc, port = start_serve(agency_bin(), args, tmp_path, env, log, [])
    try:
        account = Account(f"http://127.0.0.1:{port}")
        account.import_agency(clerk_yaml("clerk", root, timeout=5))
        key = account.key("clerk")

        # A chat completion waits for the approval; the server is killed meanwhile.
        def ask() -> None:
            try:
                client(f"http://127.0.0.1:{port}", key).chat.completions.create(
                    model="clerk", messages=[{"role": "user", "content": "left"}]
                )
            except openai.APIError:
                pass

        threading.Thread(target=ask, daemon=True).start()
        left = account.wait_for_one()
        proc.kill()
        proc.wait()

        # Restarted, nothing runs that turn: the call is still listed, waiting for nothing.
        proc, port = start_serve(agency_bin(), args, tmp_path, env, log, [])
        account = Account(f"http://127.0.0.1:{port}", sign_up=False)
        assert [a["id"] for a in account.pending()] == [left["id"]]
        # The conversation's next message withdraws it; its own call waits, and its 5 s pass.
        answer = client(f"http://127.0.0.1:{port}", key).chat.completions.create(
            model="clerk",
            messages=[{"role": "user", "content": "again"}],
            extra_headers={"x-agency-conversation": left["conversation_id"]},
        )
        # The left call's agent read that it had no result, then the new call's timeout.
        assert answer.choices[0].message.content.split("\n\n") == [
            "Wrote: No result: the turn ended before the tool answered.",
            "Wrote: Not run: nobody approved it in time.",
        ]
        assert account.pending() == []
        with sqlite3.connect(tmp_path / "a.db") as db:
            state = db.execute(
                "SELECT state, answered_by, started_at FROM approvals WHERE id = ?",
                (uuid.UUID(left["id"]).bytes,),
            ).fetchone()
        assert state == ("denied", "turn ended", None), state
        assert not (root / "left.txt").exists()
    finally:
        stop_serve(proc, log)
