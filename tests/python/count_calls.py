"""Runs an MCP server over stdio (the rest of the command line) and counts the `tools/call`
requests it is sent: each appends a line to the file named first, before the server reads it.
What reaches the server is what the client sent, unchanged; its answers go straight back.

    python count_calls.py CALLS node server.js stdio
"""

import json
import os
import subprocess
import sys


def main() -> None:
    calls, *command = sys.argv[1:]
    child = subprocess.Popen(command, stdin=subprocess.PIPE)
    assert child.stdin is not None
    for line in sys.stdin.buffer:
        try:
            method = json.loads(line).get("method")
        except ValueError:
            method = None
        if method == "tools/call":
            with open(calls, "ab") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
        child.stdin.write(line)
        child.stdin.flush()
    child.stdin.close()
    child.wait()


if __name__ == "__main__":
    main()
