# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Stand-in HTTP endpoints for unit tests: a handler base that answers JSON quietly, and a loopback
server on a free port in a daemon thread.

Importable from every test below tests/unit: pytest puts this folder (the one of tests/unit/conftest.py,
which has no __init__.py) on sys.path.

    class Models(JsonHandler):
        def do_GET(self):  # noqa: N802
            self.send_json(200, {"object": "list", "data": []})

    with serving(Models) as port:
        ...
"""
import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JsonHandler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        # the default writes every request to stderr, which would only clutter pytest's output
        pass

    def send_json(self, code, doc):
        """Answer ``code`` with ``doc`` as a JSON body (with its length, so clients need not wait for a close)."""
        body = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextlib.contextmanager
def serving(handler):
    """Serve ``handler`` on 127.0.0.1 at a free port (yielded) until the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
