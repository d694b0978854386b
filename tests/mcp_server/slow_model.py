"""An OpenAI-compatible model for the `slow` agency (protocol json): it answers the user at
once, except a message containing "slow", which it answers only after `SLOW_SECS` — long
enough that a test sees whether cancelling the turn freed its conversation."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SLOW_SECS = 20.0


class SlowModel:
    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                user = next(
                    (m for m in reversed(body.get("messages", [])) if m.get("role") == "user"), {}
                )
                text = user.get("content") if isinstance(user.get("content"), str) else ""
                if "slow" in text:
                    time.sleep(SLOW_SECS)
                content = json.dumps({"to": 0, "context": f"echo: {text}"})
                data = json.dumps(
                    {
                        "id": "chatcmpl-slow",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": "slow-model",
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": content},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
                    }
                ).encode()
                try:
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the caller gave up (a cancelled turn)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        self._server.shutdown()
