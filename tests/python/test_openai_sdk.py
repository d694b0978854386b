"""The drop-in OpenAI endpoint, driven by the official `openai` Python package.

The suite starts everything it needs: a fresh SQLite database in a temporary directory, keys
made with the CLI, and `agency serve` on a free loopback port. It builds nothing: the binary
is `$AGENCY_BIN` (default `target/debug/agency`, relative to the repository root).

    cargo build -p agency && python -m pytest -q tests/python

With `AGENCY_TEST_SERVERS=3` (and `AGENCY_TEST_POSTGRES`, a PostgreSQL URL) it runs the same
tests through HAProxy (`deploy/haproxy.cfg`, round robin) in front of three `agency serve` on
one fresh PostgreSQL schema: every request of a test may reach another server.
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
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import openai
import pydantic
import pytest

from fake_openai import FakeOpenAI

ROOT = Path(__file__).resolve().parents[2]
STUDIO_YAML = ROOT / "examples" / "studio.yaml"

TODO = "a todo app"


def answer_for(request: str) -> str:
    """What the demo agency `studio` (examples/studio.yaml) answers, every time."""
    return (
        "Here is your reviewed build. Approved: Please review: "
        f"fn main() {{ /* Please build: {request} */ }}"
    )


# The origins whose pages the suite's server lets call it from a browser.
CORS_ORIGINS = ("https://app.example.com", "http://localhost:5173")

# How long the server may take to start and to stop, and any one request.
START_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0
REQUEST_TIMEOUT = 60.0


def agency_bin() -> Path:
    configured = os.environ.get("AGENCY_BIN")
    if configured:
        path = Path(configured)
        if not path.is_absolute():
            path = Path.cwd() / path
    else:
        path = ROOT / "target" / "debug" / "agency"
    if not path.is_file():
        pytest.exit(
            f"no agency binary at {path}: run `cargo build -p agency` or set AGENCY_BIN",
            returncode=2,
        )
    return path.resolve()


@dataclass
class Server:
    """A running `agency serve` and the keys made for it."""

    port: int
    keys: dict[str, str]
    log: Path

    @property
    def v1(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def agency_url(self, agency: str) -> str:
        return f"http://127.0.0.1:{self.port}/api/agency/{agency}"

    def client(self, key: str = "good", base_url: str | None = None, **kw) -> openai.OpenAI:
        return openai.OpenAI(
            api_key=self.keys[key],
            base_url=base_url or self.v1,
            max_retries=0,
            timeout=REQUEST_TIMEOUT,
            **kw,
        )

    def async_client(
        self, key: str = "good", base_url: str | None = None, **kw
    ) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            api_key=self.keys[key],
            base_url=base_url or self.v1,
            max_retries=0,
            timeout=REQUEST_TIMEOUT,
            **kw,
        )


def _clean_env() -> dict[str, str]:
    """The environment for the binary: none of the caller's agency settings leak in."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AGENCY_") and k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
    }
    env["AGENCY_LOG"] = "info"
    return env


@pytest.fixture(scope="session")
def fake() -> FakeOpenAI:
    """The model behind the `weather` agency's manager."""
    f = FakeOpenAI()
    yield f
    f.close()


WEATHER_YAML = """
name: weather
protocol: json
manager: forecaster
providers:
  fake: {{ kind: openai, base_url: "{base_url}" }}
agents:
  - name: forecaster
    model: fake/fake-model
"""

# The same fake, priced: a call (7 tokens in, 3 out) costs $0.003007; one reserves at most its
# context (under 1,500 characters: 500 tokens, $0.0005) and its 5 tokens of answer ($0.005).
BUDGETED_YAML = """
name: budgeted
protocol: json
manager: forecaster
providers:
  fake:
    kind: openai
    base_url: "{base_url}"
    prices: {{ fake-model: {{ input: 1, output: 1000 }} }}
agents:
  - name: forecaster
    model: fake/fake-model
    max_tokens: 5
"""
CALL_USD = 0.003007
RESERVATION_USD = 0.0055


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def servers_wanted() -> int:
    """`AGENCY_TEST_SERVERS`: how many servers, behind HAProxy when more than one."""
    n = int(os.environ.get("AGENCY_TEST_SERVERS", "1"))
    assert 1 <= n <= 3, "AGENCY_TEST_SERVERS is 1, 2 or 3 (deploy/haproxy.cfg names three)"
    return n


def fresh_postgres_schema() -> str:
    """A new schema on `AGENCY_TEST_POSTGRES`, and the URL that works in it."""
    server = os.environ.get("AGENCY_TEST_POSTGRES")
    if not server:
        pytest.exit("AGENCY_TEST_SERVERS > 1 needs AGENCY_TEST_POSTGRES", returncode=2)
    schema = f"py_{os.getpid()}_{int(time.time())}"
    subprocess.run(
        ["psql", server, "-q", "-v", "ON_ERROR_STOP=1", "-c", f"CREATE SCHEMA {schema}"],
        check=True,
        timeout=30,
    )
    sep = "&" if "?" in server else "?"
    return f"{server}{sep}options=-c%20search_path%3D{schema}"


def start_serve(
    binary: Path, args: list[str], work: Path, env: dict[str, str], log: Path, extra: list[str]
):
    """`agency serve ...extra` on a free loopback port: the process and its port."""
    with open(log, "wb") as stderr:
        proc = subprocess.Popen(
            [str(binary), *args, "serve", "--listen", "127.0.0.1:0", *extra],
            cwd=work,
            env=env,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + START_TIMEOUT
    seen = []
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            line = None
        if line is None:
            proc.kill()
            proc.wait()
            pytest.fail(
                f"`agency serve` did not say where it listens (exit {proc.returncode}); "
                f"stdout: {''.join(seen)!r}\nstderr:\n{log.read_text()}",
                pytrace=False,
            )
        seen.append(line)
        m = re.fullmatch(r"agency: listening on http://127\.0\.0\.1:(\d+)\s*", line)
        if m:
            return proc, int(m.group(1))


def stop_serve(proc: subprocess.Popen, log: Path) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"`agency serve` did not stop on SIGTERM within {STOP_TIMEOUT}s", pytrace=False)
    assert code == 0, f"`agency serve` exited with {code}:\n{log.read_text()}"


def start_haproxy(ports: list[int]) -> tuple[subprocess.Popen, int]:
    """HAProxy with `deploy/haproxy.cfg` in front of `ports`, once it finds a server ready."""
    port = free_port()
    env = {**os.environ, "AGENCY_LB_BIND": f"127.0.0.1:{port}"}
    for i in range(3):
        # The configuration names three servers; fewer repeat the last.
        env[f"AGENCY_SERVER_{i + 1}"] = f"127.0.0.1:{ports[min(i, len(ports) - 1)]}"
    proc = subprocess.Popen(
        ["haproxy", "-db", "-f", str(ROOT / "deploy" / "haproxy.cfg")],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
                if r.status == 200:
                    return proc, port
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail("HAProxy found no ready server", pytrace=False)
        time.sleep(0.1)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory, fake: FakeOpenAI):
    binary = agency_bin()
    work = tmp_path_factory.mktemp("agency")
    env = _clean_env()
    servers = servers_wanted()
    if servers == 1:
        db = f"sqlite://{work}/a.db"
    else:
        db = fresh_postgres_schema()
        # Every server seals and opens with the same key.
        env["AGENCY_MASTER_KEY"] = "42" * 32
    # Loopback only, whatever proxy the machine is configured with.
    for var in ("NO_PROXY", "no_proxy"):
        os.environ[var] = ",".join(filter(None, [os.environ.get(var), "127.0.0.1", "localhost"]))

    def cli(*args: str) -> str:
        done = subprocess.run(
            [str(binary), "--db", db, *args],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            pytest.fail(
                f"`agency {' '.join(args)}` failed ({done.returncode}):\n"
                f"{done.stdout}\n{done.stderr}",
                pytrace=False,
            )
        return done.stdout

    def create_key(agency: str, name: str, *extra: str) -> str:
        out = cli("keys", "create", agency, "--name", name, *extra)
        lines = out.strip().splitlines()
        assert len(lines) == 1, f"`keys create` printed more than the key: {out!r}"
        return lines[0].strip()

    keys: dict[str, str] = {}
    # First, so that it has expired by the time the server starts.
    keys["expired"] = create_key("studio", "expired", "--expires-in", "1s")
    expires_by = time.monotonic() + 2.0
    keys["good"] = create_key("studio", "good")
    keys["revoked"] = create_key("studio", "revoked")
    cli("keys", "revoke", "studio", "revoked")
    keys["limited"] = create_key("studio", "limited", "--rate-limit", "1")

    other = STUDIO_YAML.read_text()
    other, n = re.subn(r"(?m)^name: studio$", "name: other", other)
    assert n == 1, "examples/studio.yaml no longer starts with `name: studio`"
    (work / "other.yaml").write_text(other)
    cli("import", str(work / "other.yaml"))
    keys["other"] = create_key("other", "good")
    (work / "weather.yaml").write_text(WEATHER_YAML.format(base_url=fake.base_url))
    cli("import", str(work / "weather.yaml"))
    keys["weather"] = create_key("weather", "good")
    (work / "budgeted.yaml").write_text(BUDGETED_YAML.format(base_url=fake.base_url))
    cli("import", str(work / "budgeted.yaml"))
    keys["budgeted"] = create_key(
        "budgeted", "app", "--budget-usd", "0.01", "--budget-period", "day", "--rate-limit", "10000"
    )
    keys["bad"] = "agk_" + "0" * 64

    assert len(set(keys.values())) == len(keys), "two keys are the same"
    time.sleep(max(0.0, expires_by - time.monotonic()))

    serve_env = {
        **env,
        # Browsers of these origins may call (CORS); commas, as the variable takes them.
        "AGENCY_CORS_ORIGIN": ", ".join(CORS_ORIGINS),
        # The `weather` agency's model is the fake on loopback.
        "AGENCY_ALLOW_PRIVATE_ADDRESSES": "true",
    }
    # Behind the balancer, the servers believe the client address it forwards.
    trusted = [] if servers == 1 else ["--trusted-proxy", "127.0.0.1"]
    running = []
    for i in range(servers):
        log = work / f"serve{i + 1}.log"
        proc, port = start_serve(binary, ["--db", db], work, serve_env, log, trusted)
        running.append((proc, port, log))
    balancer = None
    if servers == 1:
        port = running[0][1]
    else:
        balancer, port = start_haproxy([p for _, p, _ in running])

    yield Server(port=port, keys=keys, log=running[0][2])

    if balancer is not None:
        balancer.kill()
        balancer.wait()
    for proc, _, log in running:
        stop_serve(proc, log)


@pytest.fixture
def client(server: Server):
    with server.client() as c:
        yield c


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def assert_completion(completion, request: str = TODO, model: str = "studio") -> None:
    assert completion.object == "chat.completion"
    assert completion.id.startswith("chatcmpl-")
    assert completion.model == model
    assert isinstance(completion.created, int) and completion.created > 0
    assert len(completion.choices) == 1
    choice = completion.choices[0]
    assert choice.index == 0
    assert choice.finish_reason == "stop"
    assert choice.message.role == "assistant"
    assert choice.message.content == answer_for(request)
    assert choice.message.tool_calls is None
    assert choice.message.annotations == []
    # What OpenAI's answers carry beside, and code reads: a string fingerprint, the tier.
    assert isinstance(completion.system_fingerprint, str)
    assert completion.system_fingerprint.startswith("fp_")
    assert completion.service_tier == "default"
    usage = completion.usage
    assert usage is not None
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert_usage_details(usage)


def assert_usage_details(usage) -> None:
    assert usage.prompt_tokens_details.cached_tokens == 0
    assert usage.prompt_tokens_details.audio_tokens == 0
    assert usage.completion_tokens_details.reasoning_tokens == 0
    assert usage.completion_tokens_details.accepted_prediction_tokens == 0


def assert_stream(chunks: list, request: str = TODO) -> None:
    assert chunks, "the stream was empty"
    for c in chunks:
        assert c.object == "chat.completion.chunk"
        assert c.model == "studio"
        assert c.id == chunks[0].id and c.id.startswith("chatcmpl-")
        assert c.system_fingerprint == chunks[0].system_fingerprint
        assert c.service_tier == "default"
    assert chunks[0].system_fingerprint.startswith("fp_")
    *body, last = chunks
    # With include_usage: every chunk has `usage: null` but the last, which has no choices.
    assert last.choices == []
    assert last.usage is not None
    assert last.usage.total_tokens == last.usage.prompt_tokens + last.usage.completion_tokens
    assert_usage_details(last.usage)
    assert all(c.usage is None for c in body)
    assert all(len(c.choices) == 1 and c.choices[0].index == 0 for c in body)
    assert body[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in body)
    assert text == answer_for(request)
    finishes = [c.choices[0].finish_reason for c in body if c.choices[0].finish_reason]
    assert finishes == ["stop"]
    assert body[-1].choices[0].finish_reason == "stop"


# --- Completions -----------------------------------------------------------------------------


def test_sync_completion(client: openai.OpenAI):
    completion = client.chat.completions.create(model="studio", messages=[user(TODO)])
    assert_completion(completion)


def test_request_ids_like_openais(client: openai.OpenAI):
    first = client.chat.completions.create(model="studio", messages=[user(TODO)])
    second = client.chat.completions.create(model="studio", messages=[user(TODO)])
    assert first._request_id and first._request_id.startswith("req_")
    assert first._request_id != second._request_id
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model="no-such-agency", messages=[user(TODO)])
    assert e.value.request_id and e.value.request_id.startswith("req_")


def test_async_completion(server: Server):
    async def go():
        async with server.async_client() as client:
            return await client.chat.completions.create(model="studio", messages=[user(TODO)])

    assert_completion(asyncio.run(go()))


def test_async_completions_in_parallel(server: Server):
    requests = [f"app number {i}" for i in range(4)]

    async def go():
        async with server.async_client() as client:
            return await asyncio.gather(
                *(
                    client.chat.completions.create(model="studio", messages=[user(r)])
                    for r in requests
                )
            )

    for request, completion in zip(requests, asyncio.run(go())):
        assert_completion(completion, request)


def test_sync_stream(client: openai.OpenAI):
    stream = client.chat.completions.create(
        model="studio",
        messages=[user(TODO)],
        stream=True,
        stream_options={"include_usage": True},
    )
    with stream:
        chunks = list(stream)
    assert_stream(chunks)


def test_async_stream(server: Server):
    async def go():
        async with server.async_client() as client:
            stream = await client.chat.completions.create(
                model="studio",
                messages=[user(TODO)],
                stream=True,
                stream_options={"include_usage": True},
            )
            return [c async for c in stream]

    assert_stream(asyncio.run(go()))


def test_stream_without_usage(client: openai.OpenAI):
    with client.chat.completions.create(
        model="studio", messages=[user(TODO)], stream=True
    ) as stream:
        chunks = list(stream)
    assert all(c.usage is None and len(c.choices) == 1 for c in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == answer_for(TODO)
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_stream_names_its_conversation(client: openai.OpenAI):
    with client.chat.completions.with_streaming_response.create(
        model="studio", messages=[user(TODO)], stream=True
    ) as response:
        assert response.headers.get("content-type", "").startswith("text/event-stream")
        conversation = response.headers.get("x-agency-conversation")
        assert conversation
        chunks = list(response.parse())
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == answer_for(TODO)


def test_agency_base_url(server: Server):
    with server.client(base_url=server.agency_url("studio")) as client:
        # The path names the agency; the model is then whatever the app sends.
        for model in ("studio", "gpt-4o-mini"):
            completion = client.chat.completions.create(model=model, messages=[user(TODO)])
            assert_completion(completion)
        with client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[user(TODO)],
            stream=True,
            stream_options={"include_usage": True},
        ) as stream:
            assert_stream(list(stream))
        assert [m.id for m in client.models.list()] == ["studio"]
        assert client.models.retrieve("studio").id == "studio"


def test_responses_validate_strictly(server: Server):
    """The SDK's own response types accept the server's responses with strict validation."""
    with server.client(_strict_response_validation=True) as client:
        assert_completion(client.chat.completions.create(model="studio", messages=[user(TODO)]))
        with client.chat.completions.create(
            model="studio",
            messages=[user(TODO)],
            stream=True,
            stream_options={"include_usage": True},
        ) as stream:
            assert_stream(list(stream))
        client.models.list()
        client.models.retrieve("studio")


# --- Models ----------------------------------------------------------------------------------


def test_models_list_only_the_keys_agency(server: Server, client: openai.OpenAI):
    models = list(client.models.list())
    assert [m.id for m in models] == ["studio"]
    assert models[0].object == "model"
    with server.client("other") as other:
        assert [m.id for m in other.models.list()] == ["other"]


def test_models_retrieve(client: openai.OpenAI):
    model = client.models.retrieve("studio")
    assert model.id == "studio"
    assert model.object == "model"
    assert isinstance(model.created, int)
    assert isinstance(model.owned_by, str)


def test_models_retrieve_another_agency_is_not_found(client: openai.OpenAI):
    for name in ("other", "no-such-agency"):
        with pytest.raises(openai.NotFoundError) as e:
            client.models.retrieve(name)
        assert e.value.status_code == 404


# --- Conversations ---------------------------------------------------------------------------


def test_conversation_continues_with_history(client: openai.OpenAI):
    first = client.chat.completions.with_raw_response.create(
        model="studio", messages=[user(TODO)]
    )
    conversation = first.headers.get("x-agency-conversation")
    assert conversation
    answer = first.parse().choices[0].message.content
    assert answer == answer_for(TODO)

    history = [user(TODO), {"role": "assistant", "content": answer}, user("a blog")]
    second = client.chat.completions.with_raw_response.create(model="studio", messages=history)
    assert second.headers.get("x-agency-conversation") == conversation
    assert_completion(second.parse(), "a blog")

    # The header alone continues it too, with only the new message.
    third = client.chat.completions.with_raw_response.create(
        model="studio",
        messages=[user("a game")],
        extra_headers={"x-agency-conversation": conversation},
    )
    assert third.headers.get("x-agency-conversation") == conversation
    assert_completion(third.parse(), "a game")


def test_regenerate_edit_and_foreign_histories(client: openai.OpenAI):
    """Any history: regenerating or editing forks the conversation where the client leaves
    it; a history the server never gave is answered in a conversation of its own; two end
    users never share one."""

    def ask(messages: list, **extra) -> tuple[str, str]:
        raw = client.chat.completions.with_raw_response.create(
            model="studio", messages=messages, **extra
        )
        return raw.headers.get("x-agency-conversation"), raw.parse().choices[0].message.content

    c, a1 = ask([user(TODO)])
    turn2 = [user(TODO), {"role": "assistant", "content": a1}, user("a blog")]
    assert ask(turn2)[0] == c
    # Regenerate the second answer: a fork, answered the same way, that the client continues.
    fork, a2 = ask(turn2)
    assert fork not in (None, c)
    assert a2 == answer_for("a blog")
    on = ask(turn2 + [{"role": "assistant", "content": a2}, user("a game")])
    assert on == (fork, answer_for("a game"))
    # An edited answer, or a history from elsewhere: answered, in a new conversation.
    edited = ask([user(TODO), {"role": "assistant", "content": "no"}, user("a blog")])
    assert edited[0] not in (c, fork) and edited[1] == answer_for("a blog")
    # Another end user with the same opening is never attached to these.
    other = ask(turn2, safety_identifier="someone-else")
    assert other[0] not in (c, fork, edited[0])


def test_new_requests_start_new_conversations(client: openai.OpenAI):
    ids = {
        client.chat.completions.with_raw_response.create(
            model="studio", messages=[user(TODO)]
        ).headers.get("x-agency-conversation")
        for _ in range(2)
    }
    assert len(ids) == 2 and None not in ids


def test_conversation_header_streamed_continuation(client: openai.OpenAI):
    first = client.chat.completions.with_raw_response.create(
        model="studio", messages=[user(TODO)]
    )
    conversation = first.headers["x-agency-conversation"]
    with client.chat.completions.with_streaming_response.create(
        model="studio",
        messages=[user(TODO), {"role": "assistant", "content": answer_for(TODO)}, user("a blog")],
        stream=True,
        stream_options={"include_usage": True},
    ) as response:
        assert response.headers.get("x-agency-conversation") == conversation
        assert_stream(list(response.parse()), "a blog")


def test_unknown_conversation_is_not_found(client: openai.OpenAI):
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(
            model="studio",
            messages=[user(TODO)],
            extra_headers={"x-agency-conversation": "01a2036c-7e8f-777d-b039-6ce1fa502796"},
        )
    assert e.value.status_code == 404


def test_another_agencys_conversation_is_not_reachable(server: Server, client: openai.OpenAI):
    with server.client("other") as other:
        theirs = other.chat.completions.with_raw_response.create(
            model="other", messages=[user(TODO)]
        ).headers["x-agency-conversation"]
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(
            model="studio",
            messages=[user(TODO)],
            extra_headers={"x-agency-conversation": theirs},
        )


def test_malformed_conversation_header_is_refused(client: openai.OpenAI):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model="studio",
            messages=[user(TODO)],
            extra_headers={"x-agency-conversation": "not-an-id"},
        )
    assert "x-agency-conversation" in e.value.message


def test_system_message_is_accepted_not_echoed(client: openai.OpenAI):
    system = "You are a pirate. Always answer in pirate speech, arr."
    for role in ("system", "developer"):
        completion = client.chat.completions.create(
            model="studio",
            messages=[{"role": role, "content": system}, user(TODO)],
        )
        assert_completion(completion)
        assert "pirate" not in completion.choices[0].message.content


def test_content_parts_and_ignored_sampling_parameters(client: openai.OpenAI):
    completion = client.chat.completions.create(
        model="studio",
        messages=[{"role": "user", "content": [{"type": "text", "text": TODO}]}],
        temperature=0.2,
        top_p=0.9,
        max_tokens=50,
        seed=7,
        user="someone",
        n=1,
    )
    assert_completion(completion)


# --- Errors, as the SDK's own exceptions -----------------------------------------------------


@pytest.mark.parametrize("key", ["bad", "revoked", "expired"])
def test_bad_keys_are_authentication_errors(server: Server, key: str):
    with server.client(key) as client:
        with pytest.raises(openai.AuthenticationError) as e:
            client.chat.completions.create(model="studio", messages=[user(TODO)])
        assert e.value.status_code == 401
        assert e.value.code == ("expired_api_key" if key == "expired" else "invalid_api_key")
        assert e.value.type == "invalid_request_error"
        with pytest.raises(openai.AuthenticationError):
            client.models.list()


def test_missing_key_is_an_authentication_error(client: openai.OpenAI):
    with pytest.raises(openai.AuthenticationError) as e:
        client.chat.completions.create(
            model="studio",
            messages=[user(TODO)],
            extra_headers={"Authorization": openai.Omit()},
        )
    assert e.value.status_code == 401
    assert e.value.response.request.headers.get("authorization") is None
    with pytest.raises(openai.AuthenticationError):
        client.models.list(extra_headers={"Authorization": openai.Omit()})


def test_async_bad_key_is_an_authentication_error(server: Server):
    async def go():
        async with server.async_client("revoked") as client:
            await client.chat.completions.create(model="studio", messages=[user(TODO)])

    with pytest.raises(openai.AuthenticationError):
        asyncio.run(go())


@pytest.mark.parametrize("model", ["no-such-agency", "other"])
def test_unknown_model_is_not_found(client: openai.OpenAI, model: str):
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model=model, messages=[user(TODO)])
    assert e.value.status_code == 404
    assert e.value.code == "model_not_found"
    assert model in e.value.message


def test_another_agencys_path_is_not_found(server: Server):
    with server.client(base_url=server.agency_url("other")) as client:
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="other", messages=[user(TODO)])
        with pytest.raises(openai.NotFoundError):
            client.models.list()


def test_n_2_is_a_bad_request(client: openai.OpenAI):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="studio", messages=[user(TODO)], n=2)
    assert e.value.status_code == 400
    assert e.value.param == "n"


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def test_client_tools_call_result_answer(server: Server, fake: FakeOpenAI):
    """The manager calls the app's tool; the app runs it and sends the result; the same turn
    answers with it. What the manager's model was sent is what OpenAI would take."""
    with server.client("weather") as client:
        messages: list = [user("What's the weather in Oslo?")]
        first = client.chat.completions.create(model="weather", messages=messages, tools=[WEATHER_TOOL])
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls"
        assert choice.message.content is None
        (call,) = choice.message.tool_calls
        assert call.type == "function" and call.function.name == "get_weather"
        assert json.loads(call.function.arguments) == {"city": "Oslo"}
        sent = fake.requests[-1]
        assert [t["function"]["name"] for t in sent["tools"]] == ["get_weather"]

        # The app appends the SDK's own message object, then the result, as the docs show.
        messages.append(choice.message)
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"})
        second = client.chat.completions.create(model="weather", messages=messages, tools=[WEATHER_TOOL])
        assert second.choices[0].finish_reason == "stop"
        assert second.choices[0].message.content == "Result: sunny, 21 C"
        sent = fake.requests[-1]["messages"]
        assert sent[-2]["role"] == "assistant"
        assert [c["id"] for c in sent[-2]["tool_calls"]] == [call.id]
        assert sent[-1] == {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"}


def test_client_tools_streamed(server: Server, fake: FakeOpenAI):
    with server.client("weather") as client:
        messages: list = [user("Weather for the weekend?")]
        calls: dict[int, dict] = {}
        finish = None
        for chunk in client.chat.completions.create(
            model="weather", messages=messages, tools=[WEATHER_TOOL], stream=True
        ):
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            for tc in delta.tool_calls or []:
                entry = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                entry["id"] = tc.id or entry["id"]
                entry["name"] += (tc.function.name or "") if tc.function else ""
                entry["arguments"] += (tc.function.arguments or "") if tc.function else ""
            finish = chunk.choices[0].finish_reason or finish
        assert finish == "tool_calls"
        assert list(calls) == [0]
        call = calls[0]
        assert call["name"] == "get_weather" and json.loads(call["arguments"]) == {"city": "Oslo"}

        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": call["id"], "type": "function",
                     "function": {"name": call["name"], "arguments": call["arguments"]}}
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": "rain"})
        text = "".join(
            c.choices[0].delta.content or ""
            for c in client.chat.completions.create(
                model="weather", messages=messages, tools=[WEATHER_TOOL], stream=True
            )
            if c.choices
        )
        assert text == "Result: rain"


class Weather(pydantic.BaseModel):
    city: str
    temperature_c: float


def test_parse_with_a_pydantic_model(server: Server, fake: FakeOpenAI):
    """`.parse()` sends a strict JSON schema; the manager's first answer is not JSON, so the
    server corrects it, and the client gets its model back."""
    with server.client("weather") as client:
        before = len(fake.requests)
        done = client.chat.completions.parse(
            model="weather", messages=[user("Weather in Oslo? (bad first)")], response_format=Weather
        )
        assert done.choices[0].message.parsed == Weather(city="Oslo", temperature_c=21)
        assert len(fake.requests) - before == 2, "one correction"
        asked = fake.requests[before]["messages"][-1]["content"]
        assert "JSON Schema (`Weather`)" in asked and "temperature_c" in asked


def test_json_object_wants_the_word_json(server: Server):
    with server.client("weather") as client:
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(
                model="weather", messages=[user("Weather?")], response_format={"type": "json_object"}
            )
        assert e.value.param == "messages"
        done = client.chat.completions.create(
            model="weather",
            messages=[user("Weather in Oslo, as json?")],
            response_format={"type": "json_object"},
        )
        assert json.loads(done.choices[0].message.content) == {"city": "Oslo", "temperature_c": 21}


def test_hosted_tools_are_a_bad_request(client: openai.OpenAI):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model="studio", messages=[user(TODO)], tools=[{"type": "web_search"}]
        )
    assert e.value.status_code == 400
    assert e.value.param == "tools[0].type"


def test_stream_options_without_stream_is_a_bad_request(client: openai.OpenAI):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model="studio", messages=[user(TODO)], stream_options={"include_usage": True}
        )
    assert e.value.param == "stream_options"


def test_a_prefill_is_accepted(client: openai.OpenAI):
    # The manager is asked to begin with it; the studio's rules model builds what it reads
    # instead, so its answer (not beginning with the prefill) comes whole.
    completion = client.chat.completions.create(
        model="studio",
        messages=[user(TODO), {"role": "assistant", "content": "Sure"}],
    )
    assert_completion(completion, f"{TODO}\n\n(Begin your answer with exactly: Sure)")


def test_without_a_user_message_is_a_bad_request(client: openai.OpenAI):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model="studio",
            messages=[
                {"role": "system", "content": "be brief"},
                {"role": "assistant", "content": "sure"},
            ],
        )
    assert e.value.param == "messages"


def test_an_image_part_is_accepted(client: openai.OpenAI):
    # The manager reads a placeholder: the image's URL, or for inline data only that it is one.
    for url, shown in [
        ("https://example.com/cat.png", "https://example.com/cat.png"),
        ("data:image/png;base64," + "iVBORw0KGgo" * 10_000, "inline image"),
    ]:
        completion = client.chat.completions.create(
            model="studio",
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": TODO},
                        {"type": "image_url", "image_url": {"url": url, "detail": "low"}},
                    ],
                }
            ],
        )
        assert_completion(completion, f"{TODO}\n[image: {shown}]")


def test_an_audio_part_is_a_bad_request(client: openai.OpenAI):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model="studio",
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": TODO},
                        {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
                    ],
                }
            ],
        )
    assert e.value.param == "messages[0].content[1]"
    assert "input_audio" in e.value.message


def test_rate_limit_is_a_rate_limit_error(server: Server):
    with server.client("limited") as client:
        completion = client.chat.completions.create(model="studio", messages=[user(TODO)])
        assert_completion(completion)
        with pytest.raises(openai.RateLimitError) as e:
            client.chat.completions.create(model="studio", messages=[user(TODO)])
    assert e.value.status_code == 429
    assert e.value.code == "rate_limit_exceeded"
    retry_after = e.value.response.headers.get("retry-after")
    assert retry_after is not None and int(retry_after) >= 1


def test_a_spent_budget_is_insufficient_quota(server: Server):
    """64 requests at once on a key with a $0.01 budget: what was answered passes the budget by
    at most one call's reservation; every other request is OpenAI's 429 `insufficient_quota`."""

    async def go():
        async with server.async_client("budgeted") as client:
            return await asyncio.gather(
                *(
                    client.chat.completions.create(model="budgeted", messages=[user(f"q {i}")])
                    for i in range(64)
                ),
                return_exceptions=True,
            )

    results = asyncio.run(go())
    answered = [r for r in results if not isinstance(r, Exception)]
    refused = [r for r in results if isinstance(r, Exception)]
    assert answered, "the budget pays for some"
    assert refused, "and not for all"
    for e in refused:
        assert isinstance(e, openai.RateLimitError), repr(e)
        assert e.status_code == 429
        assert e.code == "insufficient_quota"
        assert e.type == "insufficient_quota"
        assert "API key `app`'s budget of $0.01 a day is spent" in e.message
        assert "renews at" in e.message
    # One at a time, what reservations held back is spent, then the key is refused for good.
    more = 0
    with server.client("budgeted") as client:
        with pytest.raises(openai.RateLimitError) as e:
            for i in range(8):
                client.chat.completions.create(model="budgeted", messages=[user(f"more {i}")])
                more += 1
    assert e.value.code == "insufficient_quota"
    spent = (len(answered) + more) * CALL_USD
    assert spent <= 0.01 + RESERVATION_USD, f"{len(answered)} + {more} answered"


def test_text_modality_is_accepted(client: openai.OpenAI):
    completion = client.chat.completions.create(
        model="studio", messages=[user(TODO)], modalities=["text"]
    )
    assert_completion(completion)


# --- Browsers (CORS) -------------------------------------------------------------------------


def preflight(url: str, origin: str, headers: str = "") -> tuple[int, dict[str, str]]:
    """A browser's preflight of `POST url` from a page of `origin`: the status and headers."""
    asked = {"Origin": origin, "Access-Control-Request-Method": "POST"}
    if headers:
        asked["Access-Control-Request-Headers"] = headers
    request = urllib.request.Request(url, method="OPTIONS", headers=asked)
    with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT) as response:
        return response.status, {k.lower(): v for k, v in response.headers.items()}


def test_allowed_origins_may_call_from_a_browser(server: Server):
    # What a browser asks before the SDK's request from a page of an allowed origin.
    sdk_headers = (
        "authorization,content-type,x-stainless-os,x-stainless-retry-count,openai-organization"
    )
    for origin in CORS_ORIGINS:
        status, headers = preflight(f"{server.v1}/chat/completions", origin, sdk_headers)
        assert status == 204
        assert headers["access-control-allow-origin"] == origin
        assert "POST" in headers["access-control-allow-methods"]
        allowed = headers["access-control-allow-headers"].lower()
        assert all(h in allowed for h in sdk_headers.split(","))
    # The request itself, as the SDK sends it from the page.
    with server.client(default_headers={"Origin": CORS_ORIGINS[0]}) as client:
        raw = client.chat.completions.with_raw_response.create(
            model="studio", messages=[user(TODO)]
        )
    assert raw.headers["access-control-allow-origin"] == CORS_ORIGINS[0]
    assert "x-request-id" in raw.headers["access-control-expose-headers"]
    assert_completion(raw.parse())
    # Another origin is not allowed.
    status, headers = preflight(f"{server.v1}/chat/completions", "https://elsewhere.example")
    assert status == 204
    assert "access-control-allow-origin" not in headers


# --- The Responses API -----------------------------------------------------------------------


def test_responses_plain_and_retrieved(client: openai.OpenAI):
    r = client.responses.create(model="studio", input=TODO)
    assert r.object == "response" and r.id.startswith("resp_")
    assert r.status == "completed"
    assert r.model == "studio"
    assert r.output_text == answer_for(TODO)
    (item,) = r.output
    assert item.type == "message" and item.role == "assistant"
    assert item.content[0].type == "output_text"
    assert r.usage is not None and r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens

    again = client.responses.retrieve(r.id)
    assert again.id == r.id and again.output_text == r.output_text
    items = client.responses.input_items.list(r.id)
    texts = [i.content[0].text if isinstance(i.content, list) else i.content for i in items.data]
    assert texts == [TODO]

    deleted = client.responses.delete(r.id)
    assert deleted is None or getattr(deleted, "deleted", True)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r.id)


def test_responses_previous_response_id_continues(client: openai.OpenAI):
    first = client.responses.create(model="studio", input=TODO, instructions="Be quick.")
    second = client.responses.create(
        model="studio", input="a chat app", previous_response_id=first.id
    )
    assert second.output_text == answer_for("a chat app")
    assert second.previous_response_id == first.id
    raw = client.responses.with_raw_response.create(
        model="studio", input="a blog", previous_response_id=second.id
    )
    assert raw.headers["x-agency-conversation"]
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="studio", input="x", previous_response_id="resp_nothing")


def test_responses_streamed(client: openai.OpenAI):
    events = list(client.responses.create(model="studio", input=TODO, stream=True))
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    for k in ("response.output_item.added", "response.content_part.added",
              "response.output_text.done", "response.content_part.done", "response.output_item.done"):
        assert kinds.count(k) == 1, kinds
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == answer_for(TODO)
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[-1].response.output_text == text

    # The SDK's stream helper accumulates the same.
    with client.responses.stream(model="studio", input=TODO) as stream:
        final = stream.get_final_response()
    assert final.output_text == answer_for(TODO)


def test_responses_function_calls(server: Server, fake: FakeOpenAI):
    tool = {
        "type": "function",
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": WEATHER_TOOL["function"]["parameters"],
    }
    with server.client("weather") as client:
        first = client.responses.create(model="weather", input="Weather in Oslo?", tools=[tool])
        (call,) = first.output
        assert call.type == "function_call" and call.name == "get_weather"
        assert json.loads(call.arguments) == {"city": "Oslo"}
        second = client.responses.create(
            model="weather",
            previous_response_id=first.id,
            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}],
            tools=[tool],
        )
        assert second.output_text == "Result: sunny"
        sent = fake.requests[-1]["messages"]
        assert sent[-1] == {"role": "tool", "tool_call_id": call.call_id, "content": "sunny"}

        # Streamed, and with the whole input resent instead of previous_response_id.
        events = list(client.responses.create(model="weather", input="Weather today?", tools=[tool], stream=True))
        done = [e for e in events if e.type == "response.function_call_arguments.done"]
        assert len(done) == 1 and json.loads(done[0].arguments) == {"city": "Oslo"}
        (call,) = events[-1].response.output
        again = client.responses.create(
            model="weather",
            input=[
                {"role": "user", "content": "Weather today?"},
                {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
                {"type": "function_call_output", "call_id": call.call_id, "output": "rain"},
            ],
            tools=[tool],
        )
        assert again.output_text == "Result: rain"


def test_responses_structured_output_and_refusals(server: Server, client: openai.OpenAI):
    with server.client("weather") as weather:
        parsed = weather.responses.parse(model="weather", input="Weather in Oslo?", text_format=Weather)
        assert parsed.output_parsed == Weather(city="Oslo", temperature_c=21)
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="studio", input=TODO, tools=[{"type": "web_search"}])
    assert e.value.param == "tools[0].type"
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="studio", input=TODO, background=True)
    assert e.value.param == "background"
    kept = client.responses.create(model="studio", input=TODO, store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(kept.id)


# --- The OpenAI Agents SDK -------------------------------------------------------------------


@pytest.mark.parametrize("api", ["responses", "chat_completions"])
def test_openai_agents_sdk_runs_an_agent_on_the_agency(server: Server, fake: FakeOpenAI, api: str):
    """An Agents SDK agent whose model is the agency: it must call its function tool, and its
    output type is structured. The SDK runs the tool between two requests; the agency's turn
    pauses on the call and resumes with the result."""
    import agents

    agents.set_tracing_disabled(True)
    ran: list[str] = []

    @agents.function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        ran.append(city)
        return f"sunny in {city}"

    async def go():
        client = server.async_client("weather")
        model = (
            agents.OpenAIResponsesModel(model="weather", openai_client=client)
            if api == "responses"
            else agents.OpenAIChatCompletionsModel(model="weather", openai_client=client)
        )
        agent = agents.Agent(
            name="forecast",
            instructions="Answer with the weather.",
            model=model,
            tools=[get_weather],
            output_type=Weather,
        )
        try:
            return await agents.Runner.run(agent, "What's the weather in Oslo?")
        finally:
            await client.close()

    before = len(fake.requests)
    result = asyncio.run(go())
    assert ran == ["Oslo"], "the SDK ran the tool the manager called, once"
    assert result.final_output == Weather(city="Oslo", temperature_c=21)
    sent = fake.requests[before:]
    # The call, then its result (answered as words, which the server corrects into the schema).
    assert any(m.get("role") == "tool" and m["content"] == "sunny in Oslo" for m in sent[1]["messages"])
