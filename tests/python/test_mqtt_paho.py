"""Every account's agencies over MQTT, driven by Eclipse Paho (`paho-mqtt`), the reference client.

Two accounts sign up on one `agency serve` and each imports an agency of the same name. Each
account's team is its agency's id, and acts only for one of its agency's keys:
- on the embedded broker (`--mqtt embedded://…`) the key is the password, and the broker keeps
  the connection to that team's topics (others refused with MQTT 5's *Not authorized*);
- on Mosquitto (`AGENCY_TEST_MQTT`, default 127.0.0.1:1883) anyone may publish anywhere: the
  key travels as the `authorization` user property, and a message without it is refused on the
  team's `EVT/error` topic.

    cargo build -p agency && python -m pytest -q tests/python -k mqtt
"""

from __future__ import annotations

import json
import os
import queue
import socket
import urllib.request
import uuid
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from test_approvals import Account
from test_openai_sdk import (
    REQUEST_TIMEOUT,
    _clean_env,
    agency_bin,
    free_port,
    servers_wanted,
    start_serve,
    stop_serve,
)

WAIT = 30.0
MANAGER = "manager"

PLANT = """name: plant
manager: manager
agents:
  - name: manager
    model: builtin/rules
    rules:
      - { when: user, do: "Please check: {{message}}", send_to: monitor }
      - { when: monitor, do: "Status: {{message}}", send_to: [user] }
  - name: monitor
    model: builtin/rules
    rules:
      - { when: manager, do: "All normal ({{message}})", send_to: manager }
"""

NOT_AUTHORIZED = 135
BAD_LOGIN = 134

if servers_wanted() > 1:
    pytest.skip(
        "one server's broker: these tests run in the one-server pass", allow_module_level=True
    )


def external_broker() -> tuple[str, int]:
    """Mosquitto at `AGENCY_TEST_MQTT`; the tests skip without one, unless `CI=true`."""
    addr = os.environ.get("AGENCY_TEST_MQTT", "127.0.0.1:1883")
    host, _, port = addr.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
    except (OSError, ValueError) as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but no MQTT broker at {addr}: {e}", pytrace=False)
        pytest.skip(f"no MQTT broker at {addr}: {e}")
    return host, int(port)


class Paho:
    """A Paho MQTT 5 client whose events the test reads from queues."""

    def __init__(self, port: int, password: str | None = None, host: str = "127.0.0.1") -> None:
        self.connected: queue.Queue[ReasonCode] = queue.Queue()
        self.messages: queue.Queue[tuple[str, dict, list]] = queue.Queue()
        self.subscribed: queue.Queue[list[ReasonCode]] = queue.Queue()
        self.published: queue.Queue[tuple[int, ReasonCode]] = queue.Queue()
        self.key: str | None = None
        c = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=f"paho-{uuid.uuid4().hex[:12]}",
            protocol=mqtt.MQTTv5,
        )
        if password is not None:
            c.username_pw_set("key", password)
        c.on_connect = lambda _c, _u, _f, rc, _p: self.connected.put(rc)
        c.on_subscribe = lambda _c, _u, _mid, codes, _p: self.subscribed.put(codes)
        c.on_publish = lambda _c, _u, mid, rc, _p: self.published.put((mid, rc))
        c.on_message = lambda _c, _u, m: self.messages.put(
            (
                m.topic,
                json.loads(m.payload or b"null"),
                list(getattr(m.properties, "UserProperty", []) or []),
            )
        )
        self.client = c
        c.connect(host, port, keepalive=30)
        c.loop_start()
        self.code = self.connected.get(timeout=WAIT)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()

    def subscribe(self, *filters: str) -> list[int]:
        self.client.subscribe([(f, 1) for f in filters])
        return [code.value for code in self.subscribed.get(timeout=WAIT)]

    def publish(self, topic: str, body: dict) -> int:
        """Publishes at QoS 1 (with the key as `authorization`, when set); the PUBACK's code."""
        props = Properties(PacketTypes.PUBLISH)
        if self.key:
            props.UserProperty = ("authorization", f"Bearer {self.key}")
        info = self.client.publish(topic, json.dumps(body), qos=1, properties=props)
        mid, code = self.published.get(timeout=WAIT)
        assert mid == info.mid
        return code.value

    def next(self, suffix: str, timeout: float = WAIT) -> dict:
        while True:
            topic, body, _ = self.messages.get(timeout=timeout)
            if topic.endswith(suffix):
                return body

    def converse(self, team: str, content: str) -> str:
        """chat_new, then one message to the manager, its response awaited: the conversation."""
        cid = str(uuid.uuid4())
        body = {"agent_id": MANAGER, "conversation_id": cid, "content": " "}
        assert self.publish(f"XMAGS/{team}/CMD/chat_new/{MANAGER}", body) == 0
        assert self.next(f"EVT/chat_progress/{MANAGER}/{cid}")["status"] == "initialized"
        body["content"] = content
        assert self.publish(f"XMAGS/{team}/DATA/chat/{MANAGER}/{cid}", body) == 0
        response = self.next(f"EVT/chat_response/{MANAGER}/{cid}")
        assert response["conversation_id"] == cid
        return cid


def entries(base: str, key: str, cid: str) -> tuple[int, object]:
    request = urllib.request.Request(
        f"{base}/api/conversations/{cid}/entries", headers={"Authorization": f"Bearer {key}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, None


def two_accounts(base: str) -> dict[str, tuple[str, str]]:
    """Ada's and Bob's `plant`: each one's team id and key."""
    out = {}
    for who in ("ada", "bob"):
        account = Account(base, email=f"{who}@example.com")
        account.import_agency(PLANT)
        key = account.key("plant")
        status, agency = account.call("GET", "/api/agencies/plant")
        assert status == 200, agency
        assert agency["mqtt_team"] == agency["id"], agency
        out[who] = (agency["mqtt_team"], key)
    assert out["ada"][0] != out["bob"][0]
    return out


def serve(tmp_path: Path, mqtt_url: str):
    env = _clean_env()
    proc, port = start_serve(
        agency_bin(), ["--db", f"sqlite://{tmp_path}/a.db"], tmp_path, env, tmp_path / "serve.log",
        ["--mqtt", mqtt_url],
    )
    return proc, f"http://127.0.0.1:{port}"


def test_the_embedded_broker_lets_a_key_reach_its_team_alone(tmp_path: Path) -> None:
    mqtt_port = free_port()
    proc, base = serve(tmp_path, f"embedded://127.0.0.1:{mqtt_port}")
    clients = []
    try:
        teams = two_accounts(base)
        (ada_team, ada_key), (bob_team, bob_key) = teams["ada"], teams["bob"]

        ada = Paho(mqtt_port, ada_key)
        clients.append(ada)
        assert ada.code.value == 0, ada.code
        codes = ada.subscribe(f"XMAGS/{ada_team}/EVT/#", f"XMAGS/{bob_team}/EVT/#", "XMAGS/#")
        assert codes == [1, NOT_AUTHORIZED, NOT_AUTHORIZED]
        cid = ada.converse(ada_team, "status of XYZ?")
        status, stored = entries(base, ada_key, cid)
        assert status == 200
        assert stored[0]["response"] == "Status: All normal (Please check: status of XYZ?)"
        assert entries(base, bob_key, cid)[0] == 404

        # Bob's key reaches Bob's team, not Ada's.
        bob = Paho(mqtt_port, bob_key)
        clients.append(bob)
        body = {"agent_id": MANAGER, "conversation_id": str(uuid.uuid4()), "content": " "}
        assert bob.publish(f"XMAGS/{ada_team}/CMD/chat_new/{MANAGER}", body) == NOT_AUTHORIZED
        assert bob.subscribe(f"XMAGS/{ada_team}/#") == [NOT_AUTHORIZED]

        # No key: no account's team. A key that is no one's: not in.
        keyless = Paho(mqtt_port)
        clients.append(keyless)
        assert keyless.code.value == 0
        assert keyless.subscribe(f"XMAGS/{ada_team}/EVT/#", "elsewhere/#") == [NOT_AUTHORIZED, 1]
        wrong = Paho(mqtt_port, "agk_not_a_key")
        clients.append(wrong)
        assert wrong.code.value == BAD_LOGIN, wrong.code
    finally:
        for c in clients:
            c.close()
        stop_serve(proc, tmp_path / "serve.log")


def test_on_mosquitto_a_message_acts_only_with_its_teams_key(tmp_path: Path) -> None:
    host, port = external_broker()
    proc, base = serve(tmp_path, f"mqtt://{host}:{port}?client_id=agency-paho-{uuid.uuid4().hex[:8]}")
    client = None
    try:
        teams = two_accounts(base)
        (ada_team, ada_key), (_, bob_key) = teams["ada"], teams["bob"]
        client = Paho(port, host=host)
        assert client.subscribe(f"XMAGS/{ada_team}/EVT/#") == [1]
        # Bob's client may subscribe to Ada's events on a broker without an ACL: it hears ids.
        bob = Paho(port, host=host)
        bob.key = bob_key
        assert bob.subscribe(f"XMAGS/{ada_team}/EVT/#") == [1]

        # With Ada's key; the server may still be subscribing: ask until it answers.
        client.key = ada_key
        for _ in range(40):
            cid = str(uuid.uuid4())
            body = {"agent_id": MANAGER, "conversation_id": cid, "content": " "}
            client.publish(f"XMAGS/{ada_team}/CMD/chat_new/{MANAGER}", body)
            try:
                progress = client.next(f"EVT/chat_progress/{MANAGER}/{cid}", timeout=0.5)
                assert progress["status"] == "initialized"
                break
            except queue.Empty:
                continue
        body["content"] = "and the valves?"
        client.publish(f"XMAGS/{ada_team}/DATA/chat/{MANAGER}/{cid}", body)
        client.next(f"EVT/chat_response/{MANAGER}/{cid}")
        status, stored = entries(base, ada_key, cid)
        assert status == 200
        assert stored[0]["user_query"] == "and the valves?"
        heard = []
        while not heard or not heard[-1][0].endswith(f"chat_response/{MANAGER}/{cid}"):
            heard.append(bob.messages.get(timeout=WAIT))
        assert not any("valves" in json.dumps(b) or "normal" in json.dumps(b) for _, b, _ in heard), heard
        assert entries(base, bob_key, cid)[0] == 404
        bob.close()

        # Without a key, or with another agency's: refused, and nothing made.
        for key, says in ((None, "authorization"), (bob_key, "not one of")):
            client.key = key
            other = str(uuid.uuid4())
            body = {"agent_id": MANAGER, "conversation_id": other, "content": " "}
            client.publish(f"XMAGS/{ada_team}/CMD/chat_new/{MANAGER}", body)
            error = client.next(f"EVT/error/{MANAGER}")
            assert error["exception_type"] == "Unauthorized", error
            assert says in error["message"], error
            assert entries(base, ada_key, other)[0] == 404
    finally:
        if client is not None:
            client.close()
        stop_serve(proc, tmp_path / "serve.log")
