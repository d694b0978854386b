#!/usr/bin/env python3
"""Two tiny webhook bots for trying `agency eval` (docs/eval.md), Python standard library only.

    python3 examples/eval/bots.py

serves, on loopback until Ctrl-C:
  http://127.0.0.1:9001/bot  copier: answers what the emulated person really said next in
                             transcript.json (beside this file), so it scores 1.0;
  http://127.0.0.1:9002/bot  other: always the same unrelated sentence, so it scores near 0.

Each gets the spec-003 body (`message`, `context`, `conversation`, `users`) and answers
`{"message": "..."}`, as a room's bot would. The same two bots as crates/agency/tests/eval.rs.
"""

import json
import pathlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MESSAGES = json.loads((pathlib.Path(__file__).parent / "transcript.json").read_text())["messages"]
NEXT = {m["id"]: MESSAGES[i + 1]["text"] for i, m in enumerate(MESSAGES[:-1])}


def copier(body):
    return NEXT.get(body["message"]["id"], "")


def other(_body):
    return "My favourite film is a comedy about penguins who open a bakery in Lisbon."


def handler(answer):
    class Bot(BaseHTTPRequestHandler):
        def do_POST(self):
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                reply, status = json.dumps({"message": answer(body)}).encode(), 200
            except (ValueError, KeyError, TypeError) as e:
                reply, status = json.dumps({"error": f"bad request: {e}"}).encode(), 400
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args):
            pass

    return Bot


if __name__ == "__main__":
    servers = [ThreadingHTTPServer(("127.0.0.1", port), handler(answer))
               for port, answer in ((9001, copier), (9002, other))]
    for s in servers[1:]:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    print("copier on http://127.0.0.1:9001/bot, other on http://127.0.0.1:9002/bot (Ctrl-C ends)",
          flush=True)
    try:
        servers[0].serve_forever()
    except KeyboardInterrupt:
        pass
