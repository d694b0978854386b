"""A fake OpenAI Chat Completions server on loopback: the model behind an agency's manager in
the suite, answering deterministically in the agency's `json` protocol, streamed or not, and
recording every request so tests can assert what the manager's model was sent.

- The last message is a tool result: it answers `{"to": 0, "context": "Result: <result>"}`.
- Corrected for its answer's format (by the server): `{"city": "Oslo", "temperature_c": 21}`.
- It was offered `get_weather` and the user asks about the weather: it calls `get_weather`
  with `{"city": "Oslo"}`.
- Asked for JSON (the manager's message holds "JSON Schema" or "JSON object"): `{"city": "Oslo", "temperature_c": 21}` as the answer; but first
  plain words when the message says "(bad first)", so the server corrects it.
- Otherwise it echoes the user's last message: `{"to": 0, "context": "echo: <message>"}`.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "fake-model"


class FakeOpenAI:
    def __init__(self) -> None:
        self.requests: list[dict] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    self.send_error(404)
                    return
                with fake._lock:
                    fake.requests.append(body)
                    n = next(fake._ids)
                message = fake.decide(body, n)
                if body.get("stream"):
                    self._stream(message)
                else:
                    self._json(message)

            def _json(self, message: dict) -> None:
                finish = "tool_calls" if message.get("tool_calls") else "stop"
                data = json.dumps(
                    {
                        "id": "chatcmpl-fake",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": MODEL,
                        "choices": [
                            {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
                        ],
                        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, message: dict) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()

                def chunk(delta: dict, finish=None, usage=None) -> None:
                    payload = {
                        "id": "chatcmpl-fake",
                        "object": "chat.completion.chunk",
                        "created": int(time.time()),
                        "model": MODEL,
                        "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}],
                    }
                    if usage:
                        payload["usage"] = usage
                    self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
                    self.wfile.flush()

                chunk({"role": "assistant", "content": ""})
                calls = message.get("tool_calls") or []
                text = message.get("content") or ""
                for i in range(0, len(text), 8):
                    chunk({"content": text[i : i + 8]})
                for index, call in enumerate(calls):
                    args = call["function"]["arguments"]
                    chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                           "function": {"name": call["function"]["name"], "arguments": ""}}]})
                    for i in range(0, len(args), 5):
                        chunk({"tool_calls": [{"index": index, "function": {"arguments": args[i : i + 5]}}]})
                chunk({}, finish="tool_calls" if calls else "stop")
                chunk({}, usage={"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def decide(self, body: dict, n: int) -> dict:
        messages = body.get("messages", [])
        last = messages[-1] if messages else {}
        offered = [t["function"]["name"] for t in body.get("tools", [])]
        if last.get("role") == "tool":
            return {"role": "assistant", "content": json.dumps({"to": 0, "context": f"Result: {last['content']}"})}
        user = next((m for m in reversed(messages) if m.get("role") == "user"), {})
        text = user.get("content") if isinstance(user.get("content"), str) else ""
        weather = {"city": "Oslo", "temperature_c": 21}
        if "could not be given to the user" in text:
            return {"role": "assistant", "content": json.dumps({"to": 0, "context": weather})}
        if "get_weather" in offered and "weather" in text.lower():
            return {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_fake{n}",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": json.dumps({"city": "Oslo"})},
                    }
                ],
            }
        if "JSON Schema" in text or "JSON object" in text:
            answer = "It is 21 degrees in Oslo." if "(bad first)" in text else weather
            return {"role": "assistant", "content": json.dumps({"to": 0, "context": answer})}
        return {"role": "assistant", "content": json.dumps({"to": 0, "context": f"echo: {text}"})}

    def close(self) -> None:
        self._server.shutdown()
