"""Serve lifecycle on the sim (issue 7): restart on change, no-op otherwise, drain of an in-flight
stream, self-recovery after a killed rank, fail-fast on a load that dies, API key enforcement.
The file leaves tiny-llama served with the inventory's settings (the sim's generated API key)."""
import json
import threading
import time
import urllib.error
import urllib.request


from conftest import FABRIC_IP, api_key, drained, failures, node, recap, run_module, run_playbook, unit_started_at, wait_for

UNIT = "llmfleet-serve-tiny-llama"
ENV_DIR = "/etc/llmfleet"
API = f"http://{FABRIC_IP['spark1']}:8000"
KEY = "sim-test-key-0123456789"  # set by the first check; the next one removes it again


def starts():
    return {h: unit_started_at(node(h), UNIT) for h in ("spark1", "spark2")}


def chat(max_tokens=8, key=None, stream=False, timeout=120, **sampling):
    """key None: the cluster's current key; "": no Authorization header. sampling: vLLM's extra
    sampling parameters (ignore_eos=True: exactly max_tokens)."""
    key = api_key() if key is None else key
    body = json.dumps(dict({"model": "tiny-llama", "max_tokens": max_tokens, "stream": stream,
                            "messages": [{"role": "user", "content": "hello"}]}, **sampling)).encode()
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    req = urllib.request.Request(f"{API}/v1/chat/completions", data=body, headers=headers)
    return urllib.request.urlopen(req, timeout=timeout)


def healthy():
    return urllib.request.urlopen(f"{API}/health", timeout=5).status == 200


def variant(name, **fields):
    return {"llmfleet_serve_profile": name,
            "llmfleet_serve_profiles_extra": {name: dict({"extends": "sim-tiny-llama"}, **fields)}}


def test_a_process_dying_during_load_fails_fast_with_its_log():
    """First, so that the next check's engine load (a changed flag and key) is also the way back
    from a failed load: one load fewer than restoring the inventory's profile here."""
    # vLLM refuses a context longer than the model's (2048) at start: the rank exits during load
    rc, out, seconds = run_playbook("playbooks/serve.yml",
                                    extra_vars=variant("sim-tiny-llama-toolong", args={"--max-model-len": 100000}))
    assert rc != 0
    assert "died while loading" in out
    assert "max_model_len" in out or "max-model-len" in out  # the journal's last lines came along
    assert seconds < 400, "a dead engine must not wait for the 30 min health timeout"


def test_a_changed_flag_and_api_key_restart_every_rank_then_an_unchanged_run_is_a_noop(monkeypatch):
    """One engine load for both changes (the suite's time budget): a flag in the profile and a
    secret from the env each change the hash; both must reach every rank. It starts from the failed
    load of the check before: serving again after one is part of what it shows."""
    key = KEY
    monkeypatch.setenv("LLMFLEET_API_KEY", key)
    changed = variant("sim-tiny-llama-seqs3", args={"--max-num-seqs": 3})
    before = starts()
    rc, out, _secs = run_playbook("playbooks/serve.yml", extra_vars=changed)
    assert rc == 0, failures(out)
    assert recap(out)["spark1"]["changed"] >= 1 and recap(out)["spark2"]["changed"] >= 1
    assert key not in out  # never logged
    after = starts()
    assert all(after[h] != before[h] for h in after), "a changed flag and a new secret restart every rank"
    assert "--max-num-seqs 3" in node("spark2").check_output(f"systemctl show -P ExecStart {UNIT}")
    try:
        chat(key="")
        raise AssertionError("a request without the key was served")
    except urllib.error.HTTPError as exc:
        assert exc.code == 401
    assert json.loads(chat(key=key).read())["usage"]["completion_tokens"] == 8
    # the env file holding the key is 0600 root
    env_file = node("spark1").file(f"{ENV_DIR}/{UNIT}.env")
    assert env_file.mode == 0o600 and env_file.user == "root" and f"VLLM_API_KEY={key}" in env_file.content_string
    assert f"LLMFLEET_API_KEY={key}" in env_file.content_string
    rc, out, _secs = run_playbook("playbooks/serve.yml", extra_vars=changed)
    assert rc == 0 and all(r["changed"] == 0 for r in recap(out).values())
    assert starts() == after


# The last two tasks before serve's stops: a stream starts at each (the run's checks before them take
# longer than a stream of the sim's whole context). The first one runs as long as the context allows
# (480 tokens, ~24 s on an idle sim), so that a slow probe task on a busy machine still leaves it
# running at the stop; the second one starts so close to the stop that it is running or queued there
# however fast the engine is. Each: no early EOS (the finish reason is "length").
STREAM_CUES = {"TASK [llmfleet.cluster.serve : Would any rank of the engine (re)start?]": 480,
               "TASK [llmfleet.cluster.serve : Decide whether the whole group restarts]": 240}
STOP_CUE = "TASK [llmfleet.cluster.serve : Stop the API rank first"


def test_stop_waits_for_an_inflight_stream():
    """Back to the inventory's profile and key file (a restart) while streams run: the API rank's
    stop sees them in flight and waits for them, and each stream finishes whole."""
    streams = {cue: {"received": [], "first": None, "done": None} for cue in STREAM_CUES}
    seen = {}

    def consume(cue):
        state = streams[cue]
        # the key of the check before (the engine still requires it; one without a key ignores it)
        with chat(max_tokens=STREAM_CUES[cue], stream=True, timeout=300, key=KEY, ignore_eos=True) as resp:
            for raw in resp:
                line = raw.decode().strip()
                if line.startswith("data: ") and line != "data: [DONE]":
                    state["received"].append(json.loads(line[6:]))
                    state["first"] = state["first"] or time.monotonic()
                elif line == "data: [DONE]":
                    state["done"] = time.monotonic()
    threads = {cue: threading.Thread(target=consume, args=(cue,)) for cue in STREAM_CUES}

    def start_streams_at_cues(line):
        for cue, t in threads.items():
            if line.startswith(cue) and t.ident is None:
                seen[cue] = time.monotonic()
                t.start()
        if line.startswith(STOP_CUE):
            seen.setdefault(STOP_CUE, time.monotonic())
    before = starts()
    rc, out, _secs = run_playbook("playbooks/serve.yml", "-v", on_line=start_streams_at_cues)
    assert rc == 0, failures(out)
    assert all(t.ident for t in threads.values()), f"the run printed none or one of {list(STREAM_CUES)}"
    for t in threads.values():
        t.join(timeout=300)
    for cue, state in streams.items():
        assert state["done"], f"the stream started at {cue!r} was cut by the restart"
        finish = [c["choices"][0].get("finish_reason") for c in state["received"] if c.get("choices")]
        assert finish[-1] == "length"
    running, waited = drained(out)
    stop = seen.get(STOP_CUE, 0.0)
    timeline = {cue[len("TASK [llmfleet.cluster.serve : "):-1]: {
        "started": round(seen[cue] - stop, 1), "first token": round((s["first"] or stop) - stop, 1),
        "done": round(s["done"] - stop, 1)} for cue, s in streams.items()}
    print(f"\nthe API rank's stop waited {waited} s for {running:.0f} request(s) in flight; "
          f"seconds from the stop task's start: {timeline}")
    assert running >= 1 and waited > 0, f"the stop did not see the streams in flight: {timeline}"
    assert starts() != before
    assert "--max-num-seqs 4" in node("spark2").check_output(f"systemctl show -P ExecStart {UNIT}")


def test_killed_engine_on_spark2_recovers_by_itself():
    """SIGKILL of the headless rank: systemd restarts it, but the API rank keeps its dead session
    (/health 200, every request HTTP 500); the safeguards watchdog's completion probe fails,
    and after safeguards_watchdog_failures probes every rank restarts. Bound: 3 probes (15 s
    apart on the sim, 30 s by default), timer slack, stop + a fresh load (~60 s on the sim) = 420 s."""
    spark2 = node("spark2")
    pid = spark2.check_output(f"systemctl show -P MainPID {UNIT}")
    assert int(pid) > 0
    t0 = time.monotonic()
    spark2.run_expect([0], f"kill -9 {pid}")
    wait_for(lambda: spark2.check_output(f"systemctl show -P MainPID {UNIT}") != pid, 60, step=1)

    def serves():
        try:
            return healthy() and json.loads(chat().read())["usage"]["completion_tokens"] == 8
        except OSError:  # refused while restarting, HTTP 500 from the dead session
            return False
    seconds = wait_for(serves, 420, step=3)
    print(f"\nspark2 engine killed: serving again after {time.monotonic() - t0:.0f}s (bound 420s)")
    assert seconds < 420


def test_stopped_stops_a_unit_waiting_between_crash_loop_restarts():
    """Real systemd: a unit whose process exits at once spends nearly all its time in 'activating
    (auto-restart)', with no process. state=stopped must stop it there: left alone, its old argv
    came back after RestartSec (CI: an old API rank rejoined the freshly restarted headless ranks
    into its doomed session, and the restore after a failed load never served)."""
    name = "llmfleet-test-crashloop"
    spark2 = node("spark2")

    def prop(key):
        return spark2.check_output(f"systemctl show -P {key} {name}.service")
    try:
        rc, out = run_module("spark2", "llmfleet.cluster.llm_server", {"name": name, "argv": ["/bin/false"]})
        assert rc == 0, failures(out)
        wait_for(lambda: prop("SubState") == "auto-restart", 30, step=0.5)
        restarts = int(prop("NRestarts"))
        rc, out = run_module("spark2", "llmfleet.cluster.llm_server", {"name": name, "state": "stopped"})
        assert rc == 0 and "CHANGED" in out, "a unit between restarts must count as running"
        time.sleep(8)  # longer than RestartSec (5 s): a restart still pending would have run by now
        assert prop("ActiveState") in ("inactive", "failed") and prop("SubState") != "auto-restart"
        assert int(prop("NRestarts")) == restarts
    finally:
        rc, _out = run_module("spark2", "llmfleet.cluster.llm_server", {"name": name, "state": "absent"})
    assert rc == 0 and not spark2.file(f"/etc/systemd/system/{name}.service").exists
