# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Screenshot of Prometheus' graph of the engine's running requests during a short, bounded load.

Sends chat completions to one serving group's API from a few threads for --seconds (then stops),
and while they run, and after, renders Prometheus' own graph page of the expression in headless
Chromium (Debian package `chromium`) into a PNG. Made for the sim (docs/monitoring.md):

    .venv/bin/python tools/monitoring/screenshot.py --prometheus http://10.231.0.11:9090 \
        --api http://10.231.1.11:8000 --model tiny-llama --out docs/monitoring/prometheus-running-requests.png

Only the addresses given are contacted (the sim's: its API and its Prometheus).
"""

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request


def load(api, model, key, seconds, concurrency, max_tokens):
    """Completions from `concurrency` threads until `seconds` have passed; -> (sent, failed)."""
    deadline = time.monotonic() + seconds
    counts = {"sent": 0, "failed": 0}
    lock = threading.Lock()
    body = json.dumps({"model": model, "max_tokens": max_tokens, "ignore_eos": True,
                       "messages": [{"role": "user", "content": "Count slowly from one to a hundred."}]}).encode()
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key

    def worker():
        while time.monotonic() < deadline:
            req = urllib.request.Request(api.rstrip("/") + "/v1/chat/completions", data=body, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=300) as resp:
                    resp.read()
                ok = True
            except OSError:
                ok = False
            with lock:
                counts["sent"] += 1
                counts["failed"] += 0 if ok else 1
    threads = [threading.Thread(target=worker, name=f"load-{n}", daemon=True) for n in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 330)
    return counts["sent"], counts["failed"]


def graph_url(prometheus, expr, range_input):
    params = {"g0.expr": expr, "g0.tab": "0", "g0.range_input": range_input, "g0.stacked": "0"}
    return prometheus.rstrip("/") + "/graph?" + urllib.parse.urlencode(params)


def screenshot(url, out, width, height):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        raise SystemExit("chromium not found: apt-get install --no-install-recommends chromium")
    with tempfile.TemporaryDirectory() as profile:
        # --no-sandbox: Chromium refuses to run as root with its sandbox; it only loads `url`
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--user-data-dir={profile}", f"--window-size={width},{height}",
                        "--virtual-time-budget=15000", f"--screenshot={os.path.abspath(out)}", url],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--prometheus", required=True)
    ap.add_argument("--api", required=True, help="the serving group's API (without /v1)")
    ap.add_argument("--model", required=True)
    ap.add_argument("--key-file", default=os.path.expanduser("~/.config/llmfleet/sim/api_key"))
    ap.add_argument("--expr", default='vllm:num_requests_running{cluster="sim"}')
    ap.add_argument("--seconds", type=int, default=90, help="how long the load runs (bounded)")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--range", default="5m", help="the graph's time range")
    ap.add_argument("--settle", type=int, default=20, help="seconds after the load before the screenshot")
    ap.add_argument("--out", required=True)
    ap.add_argument("--size", default="1400x800")
    args = ap.parse_args()
    key = open(args.key_file, encoding="utf-8").read().strip() if os.path.exists(args.key_file) else ""
    t0 = time.time()
    sent, failed = load(args.api, args.model, key, args.seconds, args.concurrency, args.max_tokens)
    time.sleep(args.settle)
    width, height = (int(v) for v in args.size.split("x"))
    url = graph_url(args.prometheus, args.expr, args.range)
    screenshot(url, args.out, width, height)
    print(json.dumps({"load_s": args.seconds, "concurrency": args.concurrency, "sent": sent, "failed": failed,
                      "started": time.strftime("%H:%M:%S", time.gmtime(t0)), "url": url, "png": args.out,
                      "png_bytes": os.path.getsize(args.out)}))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
