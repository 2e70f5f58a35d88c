# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Gateway overhead: the same streamed chat completions straight to an engine and through the gateway.

On a lab that site.yml has converged (the gateway on the Ray head in front of every serving group),
each repetition sends one streamed chat completion of a fixed length to the engine's own API and one
through the gateway, in alternating order (ABBA), so that load drifts hit both sides alike. Per
request it records the time to the first content/reasoning chunk (TTFT), the total time, and the
chunks received; tokens/s is completion tokens (the engine's own `usage` with
`stream_options.include_usage`) over the time after the first chunk.

Reports the medians per side and the same-run ratios: gateway tokens/s / direct tokens/s (goal >= 0.97)
and gateway TTFT - direct TTFT (goal <= 5 ms). Writes benchmarks/results/gateway_overhead-<stamp>.{json,csv}
and a row in RESULTS.md; exits 1 when a goal is missed.

  ./.venv/bin/python benchmarks/gateway_overhead.py [--summary reports/summary-sim.txt] [--model tiny-llama] [--reps 20]

The endpoints and the key come from the converge's summary (its gateway and engine URLs, the API
key file), so nothing here is specific to the sim. Read-only for the lab: it only sends requests.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402  (the script runs from anywhere)

PROMPT = "Count from one to fifty in words, separated by commas."


def stream(base: str, key: str, model: str, max_tokens: int, timeout: float = 300) -> dict:
    """One streamed chat completion: TTFT, total seconds, chunks and completion tokens."""
    body = json.dumps({"model": model, "max_tokens": max_tokens, "temperature": 0, "stream": True,
                       "ignore_eos": True, "stream_options": {"include_usage": True},
                       "messages": [{"role": "user", "content": PROMPT}]}).encode()
    req = urllib.request.Request(base.rstrip("/") + "/v1/chat/completions", data=body, method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})
    t0 = time.perf_counter()
    first, chunks, tokens = None, 0, None
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - the lab's own endpoints
        for raw in resp:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            doc = json.loads(line[6:])
            if doc.get("usage"):
                tokens = doc["usage"].get("completion_tokens")
            delta = (doc.get("choices") or [{}])[0].get("delta") or {}
            if any(delta.get(k) for k in ("content", "reasoning", "reasoning_content")):
                chunks += 1
                if first is None:
                    first = time.perf_counter() - t0
    total = time.perf_counter() - t0
    if first is None:
        raise SystemExit(f"{base}: the stream carried no content or reasoning chunk")
    tokens = tokens or chunks
    return {"ttft_s": round(first, 4), "total_s": round(total, 4), "chunks": chunks, "tokens": tokens,
            "tokens_per_s": round(tokens / max(total - first, 1e-6), 2)}


def endpoints(summary: Path, model: str) -> tuple[str, str, str]:
    """(engine URL, gateway URL, API key) of `model` from the converge's summary (reports/summary-<cluster>.txt:
    "Endpoint: <url> model <name> gateway for ..." / "Endpoint: <url> model <name> engine ...", "API key file: <path>")."""
    engine = gateway = key_file = None
    for line in summary.read_text().splitlines():
        words = line.split()
        if line.startswith("Endpoint: ") and len(words) >= 5:
            if words[4] == "gateway" and model in line.split(" gateway for ", 1)[-1].replace(",", " ").split():
                gateway = words[1]
            elif words[4] == "engine" and words[3] == model:
                engine = words[1]
        elif line.startswith("API key file: "):
            key_file = line.split(": ", 1)[1].strip()
    if not (engine and gateway and key_file):
        raise SystemExit(f"{summary}: no gateway, engine or key file line for {model} (is the lab converged?)")
    return engine.removesuffix("/v1"), gateway.removesuffix("/v1"), Path(key_file).expanduser().read_text().strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--summary", type=Path, default=bl.ROOT / "reports" / "summary-sim.txt")
    ap.add_argument("--model", default="tiny-llama")
    ap.add_argument("--reps", type=int, default=20, help="requests per side")
    ap.add_argument("--max-tokens", type=int, default=32)
    args = ap.parse_args()
    bl.stop_cleanly_on_sigterm()
    direct, gateway, key = endpoints(args.summary, args.model)
    bl.log(f"direct {direct}, gateway {gateway}, model {args.model}, {args.reps} requests per side")
    stream(direct, key, args.model, 4)  # warm both paths (the engine's first request compiles)
    stream(gateway, key, args.model, 4)
    load0 = bl.loadavg()[0]
    rows = []
    for i in range(args.reps):
        order = ("direct", "gateway") if i % 2 == 0 else ("gateway", "direct")
        for side in order:
            got = stream(direct if side == "direct" else gateway, key, args.model, args.max_tokens)
            rows.append({"rep": i, "side": side, **got})
    med = {side: {k: bl.median([r[k] for r in rows if r["side"] == side]) for k in ("ttft_s", "total_s", "tokens_per_s")}
           for side in ("direct", "gateway")}
    ratio = round(med["gateway"]["tokens_per_s"] / med["direct"]["tokens_per_s"], 3)
    ttft_ms = round((med["gateway"]["ttft_s"] - med["direct"]["ttft_s"]) * 1000, 1)
    met = ratio >= 0.97 and ttft_ms <= 5
    stamp = bl.utc_stamp()
    data = {"machine": bl.machine(), "model": args.model, "direct": direct, "gateway": gateway, "reps": args.reps,
            "max_tokens": args.max_tokens, "medians": med, "tokens_per_s_ratio": ratio, "ttft_added_ms": ttft_ms,
            "goal": "tokens/s ratio >= 0.97 and TTFT + <= 5 ms", "met": met}
    bl.write_results("gateway_overhead", stamp, data, rows)
    numbers = (f"{args.model}, {args.reps} streamed chats per side, ABBA: tokens/s gateway {med['gateway']['tokens_per_s']}"
               f" vs direct {med['direct']['tokens_per_s']} (x{ratio}); TTFT {med['gateway']['ttft_s'] * 1000:.1f} ms vs "
               f"{med['direct']['ttft_s'] * 1000:.1f} ms ({ttft_ms:+.1f} ms)")
    bl.append_results_md({"date": bl.utc_now(), "benchmark": "gateway_overhead", "machine": bl.machine_short(data["machine"]),
                          "load": f"{load0:.2f}→{bl.loadavg()[0]:.2f}", "command": "benchmarks/gateway_overhead.py",
                          "numbers": numbers, "goal": "x >= 0.97, TTFT + <= 5 ms", "met": "yes" if met else "no"})
    print(numbers)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
