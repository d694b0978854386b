"""What one turn through A2A adds over the same turn through Chat Completions, in the same run:
the demo agency `studio` (rules model, instant), a new conversation per request, one
keep-alive connection per face, requests alternating between the faces.

    python tests/a2a/latency.py http://127.0.0.1:8080 agk_... [requests]

It prints each face's p50 and p99 and the difference of the p50s (see docs/benchmarks.md).
"""

from __future__ import annotations

import statistics
import sys
import time

import httpx


def main() -> None:
    base, key = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 500
    auth = {"Authorization": f"Bearer {key}"}
    chat = httpx.Client(base_url=base, headers=auth, timeout=30)
    a2a = httpx.Client(base_url=base, headers={**auth, "A2A-Version": "1.0"}, timeout=30)

    def completion(i: int) -> None:
        r = chat.post("/v1/chat/completions", json={
            "model": "studio", "messages": [{"role": "user", "content": f"app {i}"}]})
        assert r.status_code == 200, r.text

    def send(i: int) -> None:
        r = a2a.post("/api/agency/studio/a2a", json={
            "jsonrpc": "2.0", "id": i, "method": "SendMessage",
            "params": {"message": {"messageId": str(i), "role": "ROLE_USER",
                                   "parts": [{"text": f"app {i}"}]}}})
        body = r.json()
        assert body["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", body

    times: dict[str, list[float]] = {"chat": [], "a2a": []}
    for i in range(50):  # warm up
        completion(i)
        send(i)
    for i in range(n):
        for name, call in (("chat", completion), ("a2a", send)):
            started = time.perf_counter()
            call(i)
            times[name].append((time.perf_counter() - started) * 1000)
    for name, t in times.items():
        t.sort()
        print(f"{name}: p50 {statistics.median(t):.3f} ms, p99 {t[int(len(t) * 0.99)]:.3f} ms")
    added = statistics.median(times["a2a"]) - statistics.median(times["chat"])
    print(f"A2A adds {added:+.3f} ms to the p50")


if __name__ == "__main__":
    main()
