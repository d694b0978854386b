"""A bounded fuzz run of the HTTP API against a real `agency serve`.

1. schemathesis, against the OpenAPI document the server serves (`/api/openapi.json`), logged
   in as a fresh user: no 5xx, every status and content type documented, every body matching
   its schema, and valid requests per the schema not refused.
2. Hostile bodies to every endpoint that takes one (the document's, the OpenAI endpoint's and
   the pages' forms): JSON nested 100,000 deep, a 50 MB body (with a length and chunked), and
   for the agency import YAML nested deep, in block and flow style, and an anchor bomb. Every
   answer must be below 500, and the server must stay up.
3. The server still answers `/healthz`.

Any failure, and any crash, fails the run (exit 1); a crash is reported with the case that
caused it and the end of the server's log, and the server is started again for the cases left.

Started by `tests/fuzz/run`, which builds the binary and this script's venv. Environment:
    AGENCY_BIN         the binary (default target/debug/agency)
    FUZZ_MAX_TIME      seconds schemathesis may spend in all (default 150)
    FUZZ_MAX_EXAMPLES  test cases per operation and phase (default 30)
    FUZZ_WORKERS       schemathesis's concurrent workers (default 1: its generator is not
                       always thread-safe on Python 3.11, and the time bound holds either way)
    FUZZ_SEED          schemathesis's seed, to repeat a run (default: a new one, printed)
    FUZZ_SKIP          comma-separated stages to skip: schemathesis, bodies
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import requests

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
STUDIO_YAML = ROOT / "examples" / "studio.yaml"

START_TIMEOUT = 60.0
# One hostile request: the server may read a whole 50 MB body before it refuses it.
REQUEST_TIMEOUT = 60.0

EMAIL = "fuzz@example.com"
PASSWORD = "fuzz-password-1"


def log(msg: str) -> None:
    print(msg, flush=True)


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        sys.exit(f"{name}={value!r} is not a whole number")


# ---- The server ----


class Server:
    """`agency serve` on a free loopback port, with its own database and master key."""

    def __init__(self, binary: Path, work: Path) -> None:
        self.binary = binary
        self.work = work
        self.db = f"sqlite://{work}/fuzz.db"
        self.log_path = work / "serve.log"
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0
        self.log_from = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("AGENCY_") and k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
        }
        env["AGENCY_LOG"] = "info"
        env["NO_COLOR"] = "1"
        env["AGENCY_MASTER_KEY_FILE"] = str(self.work / "master.key")
        return env

    def start(self) -> None:
        # What this start logs, for the tail shown when it crashes.
        self.log_from = self.log_path.stat().st_size if self.log_path.exists() else 0
        stderr = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [str(self.binary), "--db", self.db, "serve", "--listen", "127.0.0.1:0"],
            cwd=self.work,
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        stderr.close()
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
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
                self.stop()
                sys.exit(f"`agency serve` did not start:\n{self.log_tail()}")
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                return

    def wait_exit(self, seconds: float) -> None:
        if self.proc is not None:
            try:
                self.proc.wait(timeout=seconds)
            except subprocess.TimeoutExpired:
                pass

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def healthy(self) -> bool:
        if not self.alive():
            return False
        try:
            r = requests.get(f"{self.base}/healthz", timeout=10)
            return r.status_code == 200 and r.json().get("status") == "ok"
        except (requests.RequestException, ValueError):
            return False

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def exit_status(self) -> str:
        if self.proc is None or self.proc.returncode is None:
            return "running"
        code = self.proc.returncode
        return f"killed by signal {-code}" if code < 0 else f"exit code {code}"

    def log_tail(self, lines: int = 15) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_from)
                text = f.read().decode(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join("    | " + line for line in text[-lines:])


# ---- A logged-in user and something of each kind, for the paths' ids ----


@dataclass
class User:
    cookie: str
    csrf: str
    api_key: str
    ids: dict[str, str] = field(default_factory=dict)

    def headers(self) -> dict[str, str]:
        return {"Cookie": f"agency_session={self.cookie}", "x-csrf-token": self.csrf}


def expect(r: requests.Response, status: int, what: str) -> dict:
    if r.status_code != status:
        sys.exit(f"setup: {what} answered {r.status_code}, not {status}: {r.text[:500]}")
    return r.json() if r.content else {}


def sign_up(base: str) -> User:
    s = requests.Session()
    me = expect(
        s.post(f"{base}/api/auth/signup", json={"email": EMAIL, "password": PASSWORD}, timeout=60),
        201,
        "sign-up",
    )
    cookie = s.cookies.get("agency_session")
    if not cookie:
        sys.exit("setup: sign-up set no agency_session cookie")
    user = User(cookie=cookie, csrf=me["csrf_token"], api_key="")
    prepare(base, user)
    return user


def prepare(base: str, user: User) -> None:
    """The published agency `studio` with an API key, a conversation, a room with a message and
    an agent, and a saved role: real ids for the paths of the hostile requests."""
    h = user.headers()

    def call(method: str, path: str, status: int, **kw) -> dict:
        headers = {**h, **kw.pop("headers", {})}
        r = requests.request(method, f"{base}{path}", headers=headers, timeout=60, **kw)
        return expect(r, status, f"{method} {path}")

    call(
        "POST",
        "/api/agencies/import",
        201,
        data=STUDIO_YAML.read_bytes(),
        headers={"content-type": "application/yaml"},
    )
    name = f"fuzz-{int(time.time() * 1000)}"
    user.api_key = call("POST", "/api/agencies/studio/keys", 201, json={"name": name})["key"]
    user.ids["conversation"] = call("POST", "/api/agencies/studio/conversations", 201, json={})["id"]
    room = call("POST", "/api/rooms", 201, json={"name": name, "agency": "studio"})
    user.ids["room"] = room["room"]["id"]
    user.ids["agent"] = room["participants"][0]["id"]
    posted = call("POST", f"/api/rooms/{user.ids['room']}/messages", 201, json={"text": "hello"})
    user.ids["message"] = posted["message"]["id"]
    user.ids["definition"] = call(
        "POST", "/api/definitions", 201, json={"kind": "role", "name": name, "text": "a role"}
    )["id"]


# ---- Stage 1: schemathesis ----

CHECKS = [
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
    "positive_data_acceptance",
]


def config(server: Server, user: User) -> Path:
    """tests/fuzz/schemathesis.toml, and the ids of what the user has as values the fuzzer
    draws half of the time for the paths' parameters: without them almost every operation on a
    room, a conversation or a key answers 404 before its logic runs. Deleting operations keep
    to generated ids, so that what the rest of the run uses stays."""
    values = {
        "agency": ["studio"],
        "room": [user.ids["room"]],
        "agent": [user.ids["agent"]],
        "message": [user.ids["message"]],
        "id": [user.ids["conversation"], user.ids["definition"]],
        "provider": ["openai"],
        "version": [1],
        "number": [1],
    }
    lines = [(HERE / "schemathesis.toml").read_text(), ""]
    for name, vs in values.items():
        lines.append(f"[dictionaries.{name}]\nvalues = {json.dumps(vs)}\n")
    lines.append('[[operations]]\nexclude-method = "DELETE"')
    for name in values:
        lines.append(f'parameters."path.{name}" = {{ dictionary = "{name}", probability = 0.5 }}')
    path = server.work / "schemathesis.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def schemathesis(server: Server, user: User) -> tuple[bool, str]:
    st = Path(sys.executable).parent / "schemathesis"
    cmd = [
        str(st),
        "--config-file",
        str(config(server, user)),
        "run",
        f"{server.base}/api/openapi.json",
        "--url",
        server.base,
        "--header",
        f"Cookie: agency_session={user.cookie}",
        "--header",
        f"x-csrf-token: {user.csrf}",
        "--checks",
        ",".join(CHECKS),
        "--max-examples",
        str(env_int("FUZZ_MAX_EXAMPLES", 30)),
        "--max-time",
        str(env_int("FUZZ_MAX_TIME", 150)),
        "--workers",
        str(env_int("FUZZ_WORKERS", 1)),
        "--request-timeout",
        "30",
        "--generation-database",
        "none",
        "--no-color",
    ]
    seed = os.environ.get("FUZZ_SEED", "").strip()
    if seed:
        cmd += ["--seed", seed]
    shown = [("<session>" if "agency_session=" in a else "<csrf>" if a.startswith("x-csrf") else a) for a in cmd]
    log("$ " + " ".join(shown))
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=server.work)
    took = time.monotonic() - started
    ok = done.returncode == 0
    return ok, f"schemathesis exited {done.returncode} after {took:.0f}s"


# ---- Stage 2: hostile bodies ----

DEPTH = 100_000
BIG = 50 * 1024 * 1024


def deep_array() -> bytes:
    return b"[" * DEPTH + b"]" * DEPTH


def deep_object() -> bytes:
    return b'{"a":' * DEPTH + b"1" + b"}" * DEPTH


def big_chunks(prefix: bytes, suffix: bytes) -> Iterator[bytes]:
    yield prefix
    chunk = b"a" * (1024 * 1024)
    for _ in range(BIG // len(chunk)):
        yield chunk
    yield suffix


def yaml_block_sequences() -> bytes:
    return b"- " * 5000 + b"x\n"


def yaml_block_mappings() -> bytes:
    # 1,400 levels of `a:` indented by one more space each: under the 2 MB body limit.
    return b"".join(b" " * i + b"a:\n" for i in range(1400)) + b" " * 1400 + b"x\n"


def yaml_flow_sequences() -> bytes:
    return b"[" * DEPTH + b"]" * DEPTH


def yaml_flow_mappings() -> bytes:
    return b"{a: " * DEPTH + b"1" + b"}" * DEPTH


def yaml_anchor_bomb() -> bytes:
    """The "billion laughs": nine levels of aliases, each ten of the one before."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        refs = ",".join([f"*a{i - 1}"] * 10)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return ("\n".join(lines) + "\n").encode()


@dataclass
class Body:
    name: str
    content_type: str
    make: Callable[[], bytes] | None = None
    chunks: Callable[[], Iterator[bytes]] | None = None
    length: int | None = None  # None with `chunks`: sent chunked


JSON_BODIES = [
    Body("JSON arrays 100,000 deep", "application/json", make=deep_array),
    Body("JSON objects 100,000 deep", "application/json", make=deep_object),
    Body(
        "a 50 MB JSON body",
        "application/json",
        chunks=lambda: big_chunks(b'{"text":"', b'"}'),
        length=BIG + len(b'{"text":"') + len(b'"}'),
    ),
    Body(
        "a 50 MB JSON body, chunked",
        "application/json",
        chunks=lambda: big_chunks(b'{"text":"', b'"}'),
    ),
]
FORM_BODIES = [
    Body("a 50 MB form", "application/x-www-form-urlencoded", chunks=lambda: big_chunks(b"name=", b""), length=BIG + 5),
    Body("JSON arrays 100,000 deep", "application/json", make=deep_array),
]
YAML_BODIES = [
    Body("YAML block sequences 5,000 deep (`- - - ...`)", "application/yaml", make=yaml_block_sequences),
    Body("YAML block mappings 1,400 deep", "application/yaml", make=yaml_block_mappings),
    Body("YAML flow sequences 100,000 deep", "application/yaml", make=yaml_flow_sequences),
    Body("YAML flow mappings 100,000 deep", "application/yaml", make=yaml_flow_mappings),
    Body("YAML anchor bomb (billion laughs)", "application/yaml", make=yaml_anchor_bomb),
    Body(
        "a 50 MB YAML body",
        "application/yaml",
        chunks=lambda: big_chunks(b"name: ", b"\n"),
        length=BIG + len(b"name: ") + 1,
    ),
]


def send(port: int, method: str, path: str, headers: dict[str, str], body: Body) -> tuple[int | None, str]:
    """Sends one request over a raw connection — the body from another thread, so that an
    answer given before the whole body is read is still seen — and returns its status, or
    None and what happened instead."""
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT)
    except OSError as e:
        return None, f"cannot connect: {e}"
    head = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", f"Content-Type: {body.content_type}", "Connection: close"]
    if body.make is not None:
        data = body.make()
        head.append(f"Content-Length: {len(data)}")
        chunks: Iterator[bytes] = iter([data])
        chunked = False
    else:
        assert body.chunks is not None
        chunks = body.chunks()
        chunked = body.length is None
        head.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {body.length}")
    head += [f"{k}: {v}" for k, v in headers.items()]
    send_error: list[str] = []

    def write() -> None:
        try:
            sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
            for c in chunks:
                if chunked:
                    sock.sendall(f"{len(c):x}\r\n".encode() + c + b"\r\n")
                else:
                    sock.sendall(c)
            if chunked:
                sock.sendall(b"0\r\n\r\n")
        except OSError as e:  # the server may refuse and close before the body is all sent
            send_error.append(str(e))

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    answer = b""
    try:
        while b"\r\n" not in answer:
            got = sock.recv(65536)
            if not got:
                break
            answer += got
    except OSError as e:
        send_error.append(f"reading: {e}")
    finally:
        sock.close()
    writer.join(timeout=5)
    m = re.match(rb"HTTP/1\.[01] (\d{3})", answer)
    if m:
        return int(m.group(1)), ""
    return None, "no answer: " + ("; ".join(send_error) or "the connection closed")


@dataclass
class Target:
    method: str
    path: str
    headers: dict[str, str]
    bodies: list[Body]


def targets(doc: dict, user: User, port: int) -> list[Target]:
    auth = user.headers()
    ids = {
        "agency": "studio",
        "room": user.ids["room"],
        "agent": user.ids["agent"],
        "message": user.ids["message"],
        "provider": "openai",
        "name": "fuzz",
        "username": "fuzzbot",
        "version": "1",
        "number": "1",
    }
    out: list[Target] = []
    for path, item in sorted(doc["paths"].items()):
        for method, op in sorted(item.items()):
            if not isinstance(op, dict) or "requestBody" not in op:
                continue
            local = dict(ids)
            local["id"] = user.ids["definition"] if path.startswith("/api/definitions") else user.ids["conversation"]
            concrete = re.sub(r"\{(\w+)\}", lambda m: local.get(m.group(1), "x"), path)
            bodies = JSON_BODIES + (YAML_BODIES if path == "/api/agencies/import" else [])
            out.append(Target(method.upper(), concrete, auth, bodies))
    bearer = {"Authorization": f"Bearer {user.api_key}"}
    out.append(Target("POST", "/v1/chat/completions", bearer, JSON_BODIES))
    out.append(Target("POST", "/api/agency/studio/chat/completions", bearer, JSON_BODIES))
    out.append(Target("POST", "/v1/responses", bearer, JSON_BODIES))
    out.append(Target("POST", "/api/agency/studio/responses", bearer, JSON_BODIES))
    # The pages' forms: before log-in they check that Origin names this host.
    origin = {"Origin": f"http://127.0.0.1:{port}"}
    for form in ["/signup", "/login"]:
        out.append(Target("POST", form, origin, FORM_BODIES))
    for form in ["/logout", "/agencies"]:
        out.append(Target("POST", form, {**origin, "Cookie": auth["Cookie"]}, FORM_BODIES))
    # The YAML cases last: a crash there still leaves every other case tried on one server.
    out.sort(key=lambda t: t.path == "/api/agencies/import")
    return out


def hostile_bodies(server: Server, user: User, failures: list[str]) -> int:
    """Sends every case; returns how many answered below 500 with the server up."""
    doc = requests.get(f"{server.base}/api/openapi.json", timeout=30).json()
    cases = passed = 0
    started = time.monotonic()
    for t in targets(doc, user, server.port):
        for body in t.bodies:
            cases += 1
            status, problem = send(server.port, t.method, t.path, t.headers, body)
            label = f"{t.method} {t.path} with {body.name}"
            if status is None:
                server.wait_exit(5.0)  # a connection closed unanswered: a crash, maybe
            if not server.alive():
                failures.append(
                    f"CRASH: the server died ({server.exit_status()}) on {label}; its log ends:\n{server.log_tail()}"
                )
                log(f"  !! {label}: the server crashed ({server.exit_status()}); starting it again")
                server.start()
                prepare(server.base, user)  # the session is stored: it outlives the process
                continue
            if status is None:
                failures.append(f"{label}: {problem}")
                log(f"  !! {label}: {problem}")
            elif status >= 500:
                failures.append(f"{label}: answered {status}")
                log(f"  !! {label}: {status}")
            else:
                passed += 1
                log(f"  {status} {label}")
    log(f"{cases} hostile requests in {time.monotonic() - started:.0f}s")
    return passed


# ---- The run ----


def main() -> int:
    binary = Path(os.environ.get("AGENCY_BIN") or ROOT / "target" / "debug" / "agency")
    if not binary.is_absolute():
        binary = Path.cwd() / binary
    if not binary.is_file():
        sys.exit(f"no agency binary at {binary}: run `cargo build -p agency` or set AGENCY_BIN")
    for var in ("NO_PROXY", "no_proxy"):
        os.environ[var] = ",".join(filter(None, [os.environ.get(var), "127.0.0.1", "localhost"]))
    skip = {s.strip() for s in os.environ.get("FUZZ_SKIP", "").split(",") if s.strip()}
    work = Path(tempfile.mkdtemp(prefix="agency-fuzz-"))
    server = Server(binary.resolve(), work)
    failures: list[str] = []
    passed = 0
    started = time.monotonic()
    keep = False
    try:
        server.start()
        log(f"agency serve on {server.base} (database and log in {work})")
        user = sign_up(server.base)

        if "schemathesis" not in skip:
            log("\n--- schemathesis against /api/openapi.json")
            ok, summary = schemathesis(server, user)
            log(summary)
            if ok:
                passed += 1
            else:
                failures.append(f"schemathesis found failures ({summary}): see its report above")
            if not server.alive():
                failures.append(
                    f"CRASH: the server died ({server.exit_status()}) during schemathesis; its log ends:\n{server.log_tail()}"
                )
                server.start()
            # Fresh ids: the fuzzer may have deleted or changed what the first ones named.
            prepare(server.base, user)

        if "bodies" not in skip:
            log("\n--- hostile bodies: deep nesting, 50 MB, YAML bombs")
            passed += hostile_bodies(server, user, failures)

        log("\n--- the server is still up")
        if server.healthy():
            passed += 1
            log("/healthz: ok")
        else:
            failures.append(f"the server does not answer /healthz at the end ({server.exit_status()})")
    finally:
        server.stop()
        keep = bool(failures)
        if not keep:
            shutil.rmtree(work, ignore_errors=True)

    log(f"\n--- fuzz run: {time.monotonic() - started:.0f}s")
    if failures:
        log(f"{len(failures)} failure(s):")
        for f in failures:
            log(f"- {f}")
        log(f"(the server's database and log are kept in {work})")
    else:
        log("no 5xx, no crash, no conformance failure")
    # The closing line CI reads: schemathesis's run, each hostile request, the health check.
    log(f"fuzz: {passed} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
