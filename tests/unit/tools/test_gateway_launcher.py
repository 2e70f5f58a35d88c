"""roles/gateway/files/llmfleet_gateway.py: the key never on argv, the workers file checked, and every
worker registered through the router's worker API (a stand-in router on loopback), retried until it
is accepted."""
import importlib.util
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "roles" / "gateway" / "files" / "llmfleet_gateway.py"
spec = importlib.util.spec_from_file_location("llmfleet_gateway", SCRIPT)
gw = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gw)


def test_the_key_comes_from_the_environment_and_leaves_it():
    env = {"LLMFLEET_API_KEY": "k", "PATH": "/bin"}
    assert gw.take_key(env) == "k" and env == {"PATH": "/bin"}


@pytest.mark.parametrize("flag", [["--api-key", "k"], ["--api-key=k"]])
def test_a_key_on_the_command_line_is_refused(flag):
    with pytest.raises(SystemExit):
        gw.parse_args(["--site", "/s", "--workers", "/w"] + flag)


@pytest.mark.parametrize("content, ok", [
    ([{"url": "http://10.0.0.1:8000", "model_id": "a"}], True),
    ([], True),
    ({"url": "http://x"}, False),
    ([{"url": "http://x"}], False),
])
def test_the_workers_file_is_a_list_of_url_and_model(tmp_path, content, ok):
    f = tmp_path / "w.json"
    f.write_text(json.dumps(content))
    if ok:
        assert gw.read_workers(str(f)) == content
    else:
        with pytest.raises(SystemExit, match="w.json"):
            gw.read_workers(str(f))


class Router(BaseHTTPRequestHandler):
    """POST /workers: 401 without the key, 503 for the first `busy` tries of a URL, then 202."""
    seen, busy = [], {}

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.headers.get("Authorization") != "Bearer k":
            code = 401
        elif Router.busy.get(body["url"], 0) > 0:
            Router.busy[body["url"]] -= 1
            code = 503
        else:
            Router.seen.append(body)
            code = 202
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture
def router():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Router)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Router.seen, Router.busy = [], {}
    yield "http://127.0.0.1:%d" % server.server_address[1]
    server.shutdown()


def test_every_worker_is_registered_with_the_key_and_a_busy_one_retried(router):
    workers = [{"url": "http://a:8000", "model_id": "m"}, {"url": "http://b:8000", "model_id": "n"}]
    Router.busy = {"http://b:8000": 2}
    log, sleeps = [], []
    left = gw.register_all(router, workers, "k", 5, alive=lambda: True, log=log.append, sleep=sleeps.append)
    assert left == []
    want = [("http://a:8000", "m", "k"), ("http://b:8000", "n", "k")]
    assert [(w["url"], w["model_id"], w["api_key"]) for w in Router.seen] == want
    assert sleeps == [5, 5] and sum("not registered yet: HTTP 503" in m for m in log) == 2


def test_a_wrong_key_is_never_accepted_and_the_loop_ends_with_the_router(router):
    alive = iter([True, True, False])
    left = gw.register_all(router, [{"url": "http://a:8000", "model_id": "m"}], "wrong", 0,
                           alive=lambda: next(alive), log=lambda m: None, sleep=lambda s: None)
    assert left == [{"url": "http://a:8000", "model_id": "m"}] and Router.seen == []
