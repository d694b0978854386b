"""Every agency is an A2A v1.0 agent (issue 34), driven by the A2A project's own Python SDK
(`a2a-sdk`): its card resolver and its client, over both HTTP bindings (JSON-RPC and
HTTP+JSON), against a real `agency serve`.

The suite starts what it needs: a fresh SQLite database, keys made with the CLI, a slow fake
model (for turns long enough to cancel and to join), and `agency serve` on a free loopback port;
for the tests across servers, two `agency serve` on one fresh PostgreSQL schema
(`AGENCY_TEST_POSTGRES`; skipped without it, failed under `CI=true`). The binary is
`$AGENCY_BIN` (default `target/debug/agency`).

    cargo build -p agency && python -m pytest -q tests/a2a
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import re
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.client.errors import A2AClientError
from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format, struct_pb2
from a2a.utils.errors import (
    InvalidParamsError,
    InvalidRequestError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

ROOT = Path(__file__).resolve().parents[2]
STUDIO_YAML = ROOT / "examples" / "studio.yaml"
START_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0
BINDINGS = ["JSONRPC", "HTTP+JSON"]
# How long the slow model takes to answer.
SLOW_SECS = 3.0


def answer_for(request: str) -> str:
    """What the demo agency `studio` (examples/studio.yaml) answers, every time."""
    return (
        "Here is your reviewed build. Approved: Please review: "
        f"fn main() {{ /* Please build: {request} */ }}"
    )


# --- A slow fake model --------------------------------------------------------------------


class SlowModel:
    """A fake Chat Completions server: it echoes the user's last message in the `json` protocol,
    after `SLOW_SECS` when the message says "slow"."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
                user = next((m for m in reversed(body["messages"]) if m["role"] == "user"), {})
                text = user.get("content") if isinstance(user.get("content"), str) else ""
                if "slow" in text:
                    time.sleep(SLOW_SECS)
                content = json.dumps({"to": 0, "context": f"echo: {text}"})
                usage = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
                if body.get("stream"):
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.end_headers()
                    for payload in (
                        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": content}}]},
                        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                        {"choices": [], "usage": usage},
                    ):
                        payload.update(id="c", object="chat.completion.chunk", created=1, model="m")
                        self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
                    self.wfile.write(b"data: [DONE]\n\n")
                    return
                data = json.dumps({
                    "id": "c", "object": "chat.completion", "created": 1, "model": "m",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                 "finish_reason": "stop"}],
                    "usage": usage,
                }).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def close(self) -> None:
        self._server.shutdown()


SLOW_YAML = """
name: slow
protocol: json
manager: sleeper
providers:
  fake: {{ kind: openai, base_url: "{base_url}" }}
agents:
  - name: sleeper
    model: fake/fake-model
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


# --- Servers ------------------------------------------------------------------------------


def agency_bin() -> Path:
    path = Path(os.environ.get("AGENCY_BIN") or ROOT / "target" / "debug" / "agency")
    if not path.is_absolute():
        path = Path.cwd() / path
    if not path.is_file():
        pytest.exit(f"no agency binary at {path}: run `cargo build -p agency`", returncode=2)
    return path.resolve()


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENCY_")}
    env["AGENCY_LOG"] = "info"
    env["AGENCY_ALLOW_PRIVATE_ADDRESSES"] = "true"
    return env


def start_serve(binary: Path, db: str, work: Path, env: dict, log: Path):
    with open(log, "ab") as stderr:
        proc = subprocess.Popen(
            [str(binary), "--db", db, "serve", "--listen", "127.0.0.1:0"],
            cwd=work, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True,
        )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            line = None
        if line is None:
            proc.kill()
            pytest.fail(f"`agency serve` did not start:\n{log.read_text()}", pytrace=False)
        m = re.fullmatch(r"agency: listening on http://127\.0\.0\.1:(\d+)\s*", line)
        if m:
            return proc, int(m.group(1))


def stop_serve(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@dataclass
class Deployment:
    """Servers on one database, and the keys made for it."""

    binary: Path
    db: str
    work: Path
    env: dict
    keys: dict[str, str]
    ports: list[int]
    procs: list

    def base(self, agency: str = "studio", server: int = 0) -> str:
        return f"http://127.0.0.1:{self.ports[server]}/api/agency/{agency}/a2a"

    def auth(self, key: str = "good") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[key]}"}

    def restart(self, server: int = 0) -> None:
        stop_serve(self.procs[server])
        self.procs[server], self.ports[server] = start_serve(
            self.binary, self.db, self.work, self.env, self.work / f"serve{server}.log"
        )

    def stop(self) -> None:
        for proc in self.procs:
            stop_serve(proc)


def deploy(work: Path, db: str, servers: int, model: SlowModel) -> Deployment:
    binary = agency_bin()
    env = clean_env()
    env["AGENCY_MASTER_KEY"] = "42" * 32
    for var in ("NO_PROXY", "no_proxy"):
        os.environ[var] = ",".join(filter(None, [os.environ.get(var), "127.0.0.1", "localhost"]))

    def cli(*args: str) -> str:
        done = subprocess.run([str(binary), "--db", db, *args], cwd=work, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"`agency {' '.join(args)}`:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def key(agency: str, name: str, *extra: str) -> str:
        return cli("keys", "create", agency, "--name", name, *extra).strip().splitlines()[0]

    keys = {"good": key("studio", "good"), "limited": key("studio", "limited", "--rate-limit", "1")}
    other = re.sub(r"(?m)^name: studio$", "name: other", STUDIO_YAML.read_text())
    (work / "other.yaml").write_text(other)
    cli("import", str(work / "other.yaml"))
    keys["other"] = key("other", "good")
    (work / "slow.yaml").write_text(SLOW_YAML.format(base_url=model.base_url))
    cli("import", str(work / "slow.yaml"))
    keys["slow"] = key("slow", "good")
    (work / "clerk.yaml").write_text(CLERK_YAML)
    cli("import", str(work / "clerk.yaml"))
    keys["clerk"] = key("clerk", "good")
    keys["bad"] = "agk_" + "0" * 64
    procs, ports = [], []
    for i in range(servers):
        proc, port = start_serve(binary, db, work, env, work / f"serve{i}.log")
        procs.append(proc)
        ports.append(port)
    return Deployment(binary, db, work, env, keys, ports, procs)


@pytest.fixture(scope="session")
def model():
    m = SlowModel()
    yield m
    m.close()


@pytest.fixture(scope="session")
def dep(tmp_path_factory, model):
    work = tmp_path_factory.mktemp("a2a")
    d = deploy(work, f"sqlite://{work}/a.db", 1, model)
    yield d
    d.stop()


def fresh_postgres_schema() -> str:
    server = os.environ.get("AGENCY_TEST_POSTGRES")
    if not server:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true: AGENCY_TEST_POSTGRES must name a PostgreSQL server")
        pytest.skip("AGENCY_TEST_POSTGRES is not set")
    schema = f"a2a_{os.getpid()}_{int(time.time() * 1000)}"
    subprocess.run(["psql", server, "-q", "-v", "ON_ERROR_STOP=1", "-c", f"CREATE SCHEMA {schema}"],
                   check=True, timeout=30)
    sep = "&" if "?" in server else "?"
    return f"{server}{sep}options=-c%20search_path%3D{schema}"


@pytest.fixture(scope="module")
def pg(tmp_path_factory, model):
    work = tmp_path_factory.mktemp("a2a_pg")
    d = deploy(work, fresh_postgres_schema(), 2, model)
    yield d
    d.stop()


# --- The SDK's client ---------------------------------------------------------------------


async def client_for(d: Deployment, binding: str, agency: str = "studio", key: str = "good",
                     server: int = 0, streaming: bool = False, polling: bool = False):
    http = httpx.AsyncClient(headers=d.auth(key), timeout=60)
    config = ClientConfig(
        streaming=streaming,
        polling=polling,
        httpx_client=http,
        supported_protocol_bindings=[binding],
    )
    return await create_client(d.base(agency, server), client_config=config,
                               resolver_http_kwargs={"headers": d.auth(key)})


def message(text: str, context: str = "", task: str = "") -> pb.SendMessageRequest:
    m = pb.Message(message_id=f"m-{time.time_ns()}", role=pb.ROLE_USER,
                   parts=[pb.Part(text=text)], context_id=context, task_id=task)
    return pb.SendMessageRequest(message=m)


def artifact_text(task: pb.Task) -> str:
    return "".join(p.text for a in task.artifacts for p in a.parts)


async def send(d, binding, text, **kw) -> pb.Task:
    client = await client_for(d, binding, **{k: v for k, v in kw.items() if k != "context"})
    async with client:
        events = [e async for e in client.send_message(message(text, kw.get("context", "")))]
    assert len(events) == 1 and events[0].HasField("task")
    return events[0].task


def run(coro):
    return asyncio.run(coro)


# --- The card -----------------------------------------------------------------------------


def test_card_is_resolved_with_the_key(dep: Deployment):
    async def go():
        async with httpx.AsyncClient() as http:
            resolver = A2ACardResolver(http, dep.base())
            card = await resolver.get_agent_card(http_kwargs={"headers": dep.auth()})
            assert card.name == "studio"
            assert card.capabilities.streaming
            assert {i.protocol_binding for i in card.supported_interfaces} == set(BINDINGS)
            assert all(i.url == dep.base() and i.protocol_version == "1.0"
                       for i in card.supported_interfaces)
            assert "agencyKey" in card.security_schemes
            assert card.security_schemes["agencyKey"].http_auth_security_scheme.scheme == "Bearer"
            names = {s.name for s in card.skills}
            assert {"studio", "manager", "programmer", "reviewer"} <= names
            bare = await http.get(dep.base() + "/.well-known/agent-card.json")
            assert bare.status_code == 401
            other = await http.get(dep.base("other") + "/.well-known/agent-card.json",
                                   headers=dep.auth())
            assert other.status_code == 404
            assert "studio" not in other.text

    run(go())


# --- Send, stream, get, list --------------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
def test_send_message_completes_with_the_answer(dep: Deployment, binding: str):
    task = run(send(dep, binding, "a todo app"))
    assert task.status.state == pb.TASK_STATE_COMPLETED
    assert artifact_text(task) == answer_for("a todo app")
    assert task.context_id and task.id
    assert task.history[0].role == pb.ROLE_USER
    assert task.history[0].parts[0].text == "a todo app"


@pytest.mark.parametrize("binding", BINDINGS)
def test_stream_shows_each_hop_then_the_answer(dep: Deployment, binding: str):
    async def go():
        client = await client_for(dep, binding, streaming=True)
        async with client:
            return [e async for e in client.send_message(message("a blog"))]

    events = run(go())
    assert events[0].HasField("task")
    assert events[0].task.status.state == pb.TASK_STATE_WORKING
    task_id = events[0].task.id
    hops = [e.status_update for e in events if e.HasField("status_update")
            and e.status_update.status.state == pb.TASK_STATE_WORKING]
    said = [h.status.message.parts[0].text for h in hops]
    assert any(s.startswith("manager → programmer") for s in said), said
    assert any(s.startswith("reviewer → manager") for s in said), said
    pieces = [e.artifact_update for e in events if e.HasField("artifact_update")]
    assert pieces and pieces[-1].last_chunk
    assert "".join(p.text for a in pieces for p in a.artifact.parts) == answer_for("a blog")
    last = events[-1]
    assert last.HasField("status_update")
    assert last.status_update.status.state == pb.TASK_STATE_COMPLETED
    assert all(e.status_update.task_id == task_id for e in events if e.HasField("status_update"))


@pytest.mark.parametrize("binding", BINDINGS)
def test_get_and_list_tasks(dep: Deployment, binding: str):
    async def go():
        first = await send(dep, binding, "one")
        second = await send(dep, binding, "two", context=first.context_id)
        assert second.context_id == first.context_id and second.id != first.id
        client = await client_for(dep, binding)
        async with client:
            got = await client.get_task(pb.GetTaskRequest(id=first.id))
            assert got.status.state == pb.TASK_STATE_COMPLETED
            assert artifact_text(got) == answer_for("one")
            short = await client.get_task(pb.GetTaskRequest(id=first.id, history_length=1))
            assert len(short.history) == 1 and short.history[0].role == pb.ROLE_AGENT
            listed = await client.list_tasks(pb.ListTasksRequest(context_id=first.context_id))
            assert [t.id for t in listed.tasks] == [second.id, first.id]
            assert listed.total_size == 2
            page = await client.list_tasks(
                pb.ListTasksRequest(context_id=first.context_id, page_size=1))
            assert [t.id for t in page.tasks] == [second.id] and page.next_page_token
            rest = await client.list_tasks(pb.ListTasksRequest(
                context_id=first.context_id, page_size=1, page_token=page.next_page_token))
            assert [t.id for t in rest.tasks] == [first.id] and not rest.next_page_token
            done = await client.list_tasks(pb.ListTasksRequest(
                context_id=first.context_id, status=pb.TASK_STATE_WORKING))
            assert list(done.tasks) == []

    run(go())


# --- Approvals: input required -----------------------------------------------------------


def data_part(value: dict) -> pb.Part:
    return pb.Part(data=json_format.ParseDict(value, struct_pb2.Value()))


async def answer_task(client, task: pb.Task, *parts: pb.Part) -> pb.Task:
    m = pb.Message(message_id=f"m-{time.time_ns()}", role=pb.ROLE_USER, parts=list(parts),
                   context_id=task.context_id, task_id=task.id)
    events = [e async for e in client.send_message(pb.SendMessageRequest(message=m))]
    assert len(events) == 1 and events[0].HasField("task")
    return events[0].task


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_call_waiting_for_approval_is_input_required_until_answered(dep: Deployment,
                                                                       binding: str):
    async def go():
        client = await client_for(dep, binding, agency="clerk", key="clerk")
        async with client:
            [event] = [e async for e in client.send_message(message("pay 5 dollars"))]
            task = event.task
            assert task.status.state == pb.TASK_STATE_INPUT_REQUIRED
            said, data = task.status.message.parts
            assert said.text.startswith("Waiting for your approval: builtin/echo")
            [asked] = json_format.MessageToDict(data.data)["approvals"]
            assert asked["tool"] == "builtin/echo"
            assert asked["arguments"] == {"text": "pay 5 dollars"}
            assert asked["approval_id"] in said.text
            # Read again, the task asks the same.
            got = await client.get_task(pb.GetTaskRequest(id=task.id))
            assert got.status.state == pb.TASK_STATE_INPUT_REQUIRED
            assert json_format.MessageToDict(got.status.message.parts[1].data)["approvals"] == [asked]
            # An answer that is none: refused, and the task still waits.
            with pytest.raises((InvalidParamsError, InvalidRequestError)):
                await answer_task(client, task, pb.Part(text="maybe later"))
            with pytest.raises((InvalidParamsError, InvalidRequestError)):
                await answer_task(client, task, data_part(
                    {"approval_id": "0190f4a3-b1c2-7d8e-9f00-112233445566", "approve": True}))
            # Approved as a data part: the call runs, the task completes with its answer.
            done = await answer_task(client, task, data_part(
                {"approval_id": asked["approval_id"], "approve": True}))
            assert done.id == task.id
            assert done.status.state == pb.TASK_STATE_COMPLETED
            assert artifact_text(done) == "Echoed: pay 5 dollars"

            # Denied in a word: the agent reads that it was not run.
            [event] = [e async for e in client.send_message(
                message("pay 6 dollars", context=task.context_id))]
            assert event.task.status.state == pb.TASK_STATE_INPUT_REQUIRED
            denied = await answer_task(client, event.task, pb.Part(text="Deny"))
            assert denied.status.state == pb.TASK_STATE_COMPLETED
            assert artifact_text(denied).startswith("Echoed: Not run: a person denied it")
            # Answered, the task takes no more messages.
            with pytest.raises(UnsupportedOperationError):
                await answer_task(client, event.task, pb.Part(text="approve"))

            # A new message in the context instead of the answer: the waiting task is cancelled,
            # saying why, and the message has a task of its own.
            [event] = [e async for e in client.send_message(
                message("pay 7 dollars", context=task.context_id))]
            left = event.task
            assert left.status.state == pb.TASK_STATE_INPUT_REQUIRED
            [event] = [e async for e in client.send_message(
                message("never mind", context=task.context_id))]
            assert event.task.id != left.id
            got = await client.get_task(pb.GetTaskRequest(id=left.id))
            assert got.status.state == pb.TASK_STATE_CANCELED
            assert "went on without" in got.status.message.parts[0].text

    run(go())


# --- Cancel and subscribe -----------------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
def test_cancel_a_running_task(dep: Deployment, binding: str):
    async def go():
        client = await client_for(dep, binding, agency="slow", key="slow", polling=True)
        async with client:
            [event] = [e async for e in client.send_message(message("slow please"))]
            assert event.task.status.state == pb.TASK_STATE_WORKING
            cancelled = await client.cancel_task(pb.CancelTaskRequest(id=event.task.id))
            assert cancelled.status.state == pb.TASK_STATE_CANCELED
            got = await client.get_task(pb.GetTaskRequest(id=event.task.id))
            assert got.status.state == pb.TASK_STATE_CANCELED
            with pytest.raises(TaskNotCancelableError):
                await client.cancel_task(pb.CancelTaskRequest(id=event.task.id))

    run(go())


async def subscribe_from(d: Deployment, binding: str, run_on: int, watch_on: int):
    starter = await client_for(d, binding, agency="slow", key="slow", polling=True, server=run_on)
    watcher = await client_for(d, binding, agency="slow", key="slow", streaming=True,
                               server=watch_on)
    async with starter, watcher:
        [event] = [e async for e in starter.send_message(message("slow subscribe"))]
        task_id = event.task.id
        events = [e async for e in watcher.subscribe(pb.SubscribeToTaskRequest(id=task_id))]
        assert events[0].HasField("task") and events[0].task.id == task_id
        assert events[-1].status_update.status.state == pb.TASK_STATE_COMPLETED
        text = "".join(p.text for e in events if e.HasField("artifact_update")
                       for p in e.artifact_update.artifact.parts)
        # The slow model echoes the manager's context (the message, framed by the protocol).
        assert text.startswith("echo: ") and "slow subscribe" in text
        # Ended, there is nothing to join.
        with pytest.raises(UnsupportedOperationError):
            [e async for e in watcher.subscribe(pb.SubscribeToTaskRequest(id=task_id))]


@pytest.mark.parametrize("binding", BINDINGS)
def test_subscribe_joins_a_running_task(dep: Deployment, binding: str):
    run(subscribe_from(dep, binding, 0, 0))


@pytest.mark.parametrize("binding", BINDINGS)
def test_subscribe_from_another_server(pg: Deployment, binding: str):
    run(subscribe_from(pg, binding, 0, 1))


def test_a_task_is_read_from_any_server_and_after_a_restart(pg: Deployment):
    async def go():
        task = await send(pg, "JSONRPC", "kept", server=0)
        pg.restart(0)
        for server in (0, 1):
            client = await client_for(pg, "HTTP+JSON", server=server)
            async with client:
                got = await client.get_task(pb.GetTaskRequest(id=task.id))
                assert got.status.state == pb.TASK_STATE_COMPLETED
                assert artifact_text(got) == answer_for("kept")

    run(go())


# --- Bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
def test_another_agencys_task_and_context_are_not_found(dep: Deployment, binding: str):
    async def go():
        theirs = await send(dep, binding, "secret", agency="other", key="other")
        client = await client_for(dep, binding)
        async with client:
            with pytest.raises(TaskNotFoundError) as e:
                await client.get_task(pb.GetTaskRequest(id=theirs.id))
            assert "secret" not in str(e.value)
            with pytest.raises(TaskNotFoundError):
                await client.cancel_task(pb.CancelTaskRequest(id=theirs.id))
            with pytest.raises(TaskNotFoundError):
                [e async for e in client.send_message(message("hi", context=theirs.context_id))]
            listed = await client.list_tasks(pb.ListTasksRequest(context_id=theirs.context_id))
            assert list(listed.tasks) == [] and listed.total_size == 0
            with pytest.raises(TaskNotFoundError):
                await client.get_task(pb.GetTaskRequest(id="not-a-task"))

    run(go())


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("key", ["bad", "other"])
def test_wrong_keys_are_refused(dep: Deployment, binding: str, key: str):
    async def go():
        http = httpx.AsyncClient(headers=dep.auth(key))
        card = await A2ACardResolver(http, dep.base()).get_agent_card(
            http_kwargs={"headers": dep.auth()})
        from a2a.client import ClientFactory
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=http,
                                            supported_protocol_bindings=[binding])).create(card)
        async with client:
            with pytest.raises((A2AClientError, TaskNotFoundError)):
                [e async for e in client.send_message(message("hello"))]

    run(go())


def test_rate_limited_key_is_a_429(dep: Deployment):
    statuses = []
    with httpx.Client(headers={**dep.auth("limited"), "A2A-Version": "1.0"}) as http:
        for _ in range(3):
            statuses.append(http.get(dep.base() + "/tasks").status_code)
    assert 429 in statuses


def rpc(dep: Deployment, body, version: str | None = "1.0", key: str = "good") -> httpx.Response:
    headers = dep.auth(key)
    if version is not None:
        headers["A2A-Version"] = version
    return httpx.post(dep.base(), json=body, headers=headers, timeout=30)


def test_jsonrpc_errors_as_the_protocol_says(dep: Deployment):
    unknown = rpc(dep, {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {}})
    assert unknown.status_code == 200
    assert unknown.json() == {"jsonrpc": "2.0", "id": 1, "error": unknown.json()["error"]}
    assert unknown.json()["error"]["code"] == -32601
    for version in (None, "0.3", "2.0"):
        r = rpc(dep, {"jsonrpc": "2.0", "id": "v", "method": "GetTask", "params": {"id": "x"}},
                version=version)
        assert r.json()["error"]["code"] == -32009, (version, r.text)
    parse = httpx.post(dep.base(), content=b"{not json", headers={**dep.auth(), "A2A-Version": "1.0"})
    assert parse.json()["error"]["code"] == -32700 and parse.json()["id"] is None
    invalid = rpc(dep, {"id": 2, "method": "GetTask"})
    assert invalid.json()["error"]["code"] == -32600
    params = rpc(dep, {"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": {}})
    assert params.json()["error"]["code"] == -32602
    push = rpc(dep, {"jsonrpc": "2.0", "id": 4, "method": "CreateTaskPushNotificationConfig",
                     "params": {}})
    assert push.json()["error"]["code"] == -32003
    missing = rpc(dep, {"jsonrpc": "2.0", "id": 5, "method": "GetTask",
                        "params": {"id": "0190c0de-0000-7000-8000-000000000000"}})
    assert missing.json()["error"]["code"] == -32001
    file_part = rpc(dep, {"jsonrpc": "2.0", "id": 6, "method": "SendMessage", "params": {
        "message": {"messageId": "f", "role": "ROLE_USER",
                    "parts": [{"url": "https://example.com/a.pdf", "mediaType": "application/pdf"}]}}})
    assert file_part.json()["error"]["code"] == -32005
    unauthenticated = rpc(dep, {"jsonrpc": "2.0", "id": 7, "method": "GetTask"}, key="bad")
    assert unauthenticated.status_code == 401
    assert unauthenticated.headers["www-authenticate"] == "Bearer"


def test_rest_errors_as_the_protocol_says(dep: Deployment):
    with httpx.Client(headers=dep.auth()) as http:
        r = http.get(dep.base() + "/tasks")
        assert r.status_code == 400
        assert r.json()["error"]["details"][0]["reason"] == "VERSION_NOT_SUPPORTED"
        http.headers["A2A-Version"] = "1.0"
        r = http.get(dep.base() + "/tasks/0190c0de-0000-7000-8000-000000000000")
        assert r.status_code == 404
        assert r.json()["error"]["details"][0]["reason"] == "TASK_NOT_FOUND"
        r = http.post(dep.base() + "/nothing:here", json={})
        assert r.status_code == 404
        assert r.json()["error"]["details"][0]["reason"] == "METHOD_NOT_FOUND"
        r = http.post(dep.base() + "/message:send", content=b"[")
        assert r.status_code == 400
        r = http.post(dep.base() + "/message:send", json={"message": {
            "messageId": "a", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]}})
        assert r.status_code == 400
        assert r.json()["error"]["details"][0]["reason"] == "INVALID_PARAMS"
