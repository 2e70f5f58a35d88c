# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The cluster's one OpenAI endpoint: sglang-router's Rust router in multi-model (IGW) mode.

Why a launcher (docs/gateway-routers.md): sglang-router takes the client API key only as
`--api-key`, which every local user can read in /proc/<pid>/cmdline. This launcher
  * pops LLMFLEET_API_KEY from its environment (the unit's 0600 env file), so no child inherits it,
    and builds the router through its Python API (`RouterArgs`, `Router.from_args`), never argv;
  * imports only `sglang_router.router` and `sglang_router.router_args` (the Rust library and a
    dataclass): `sglang_router.launch_router` would import the Python mini load balancer and its
    web stack, which the gateway does not run (the wheel is installed without dependencies);
  * registers the serving groups of the workers file (`[{"url": ..., "model_id": ...}]`, written
    by the gateway role from the cluster plan) through the router's worker API, each with the
    cluster's key (the engines check it too), retrying a group whose API is not up yet, so that a
    gateway started before an engine picks it up when it comes. The registration runs in a forked
    child: `Router.start()` serves without releasing Python's GIL, so a thread of this process
    would never run again (seen with sglang-router 0.2.4: one try, then silence).
Standard library only besides the router.
"""
import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request

KEY_ENV = "LLMFLEET_API_KEY"


def take_key(environ):
    """Remove the key from `environ`; return it ('' when unset)."""
    return environ.pop(KEY_ENV, "")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--site", required=True, help="directory holding the unpacked sglang_router package")
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--workers", required=True, help="JSON file: the serving groups' API URLs and model ids")
    p.add_argument("--policy", default="round_robin")
    p.add_argument("--prometheus-host", default="127.0.0.1")
    p.add_argument("--prometheus-port", type=int, default=29000)
    p.add_argument("--health-check-interval", type=int, default=5)
    p.add_argument("--health-failure-threshold", type=int, default=2)
    p.add_argument("--request-timeout", type=int, default=1800)
    p.add_argument("--log-level", default="info")
    p.add_argument("--register-retry", type=float, default=5.0, help="seconds between registration tries")
    args = p.parse_args(argv)
    for a in argv:
        if a.split("=", 1)[0] == "--api-key":
            p.error("the API key is read from %s only (never argv)" % KEY_ENV)
    return args


def read_workers(path):
    """The workers file: a list of {"url", "model_id"}; anything else is refused with the file named."""
    with open(path) as f:
        workers = json.load(f)
    well_formed = isinstance(workers, list) and all(
        isinstance(w, dict) and w.get("url") and w.get("model_id") for w in workers)
    if not well_formed:
        raise SystemExit("%s: expected a list of {\"url\": ..., \"model_id\": ...}" % path)
    return workers


def _post(url, body, key, timeout):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.status, resp.read().decode(errors="replace")


def try_register(base, worker, key):
    """One POST of `worker` to the router's worker API: (accepted, why not)."""
    body = {"url": worker["url"], "model_id": worker["model_id"], "api_key": key}
    try:
        status, text = _post(base + "/workers", body, key, timeout=60)
        return 200 <= status < 300, "HTTP %d %s" % (status, text[:200])
    except urllib.error.HTTPError as exc:
        return False, "HTTP %d %s" % (exc.code, exc.read().decode(errors="replace")[:200])
    except (urllib.error.URLError, OSError) as exc:
        return False, str(exc)


def register_all(base, workers, key, retry, alive, log=print, sleep=time.sleep):
    """Register every worker, retrying those not accepted every `retry` s while `alive()`; returns
    the workers left unregistered (none unless `alive()` turned false)."""
    pending = list(workers)
    while pending and alive():
        for w in list(pending):
            ok, why = try_register(base, w, key)
            if ok:
                pending.remove(w)
                log("gateway: %s (%s) registered" % (w["url"], w["model_id"]))
            else:
                log("gateway: %s (%s) not registered yet: %s" % (w["url"], w["model_id"], why))
        if pending:
            sleep(retry)
    return pending


def router_args(args, key, module):
    """The RouterArgs of the gateway (module: sglang_router.router_args)."""
    return module.RouterArgs(
        worker_urls=[], host=args.host, port=args.port, enable_igw=True, api_key=key or None,
        policy=args.policy, prometheus_host=args.prometheus_host, prometheus_port=args.prometheus_port,
        health_check_interval_secs=args.health_check_interval,
        health_failure_threshold=args.health_failure_threshold,
        request_timeout_secs=args.request_timeout, log_level=args.log_level)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    key = take_key(os.environ)
    workers = read_workers(args.workers)
    sys.path.insert(0, args.site)
    from sglang_router import router_args as ra  # pylint: disable=import-outside-toplevel
    from sglang_router.router import Router  # pylint: disable=import-outside-toplevel
    router = Router.from_args(router_args(args, key, ra))
    base = "http://127.0.0.1:%d" % args.port
    parent = os.getpid()
    if os.fork() == 0:
        register_all(base, workers, key, args.register_retry, lambda: os.getppid() == parent,
                     log=lambda m: print(m, flush=True))
        os._exit(0)  # pylint: disable=protected-access
    router.start()  # serves until the unit stops


if __name__ == "__main__":
    main()
