"""The one helper for every check that runs against the simulated lab (molecule scenarios and
tests/integration lab tests): addresses from the sim inventory, ansible runs from the controller
with the project's config and collection, waiting on conditions, reading recaps.

Only the sim's own networks are ever contacted (the addresses come from inventories/sim)."""
import json
import os
import re
import subprocess
import sys
import time

import yaml

ROOT = os.environ.get("MOLECULE_PROJECT_DIRECTORY") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM_INVENTORY = os.path.join(ROOT, "inventories", "sim")
VENV = "/opt/llmfleet/venvs/current"


def sim_hosts(inventory=SIM_INVENTORY):
    """{host: hostvars written in hosts.yml} of every host under the inventory's groups."""
    with open(os.path.join(inventory, "hosts.yml"), encoding="utf-8") as fh:
        doc = yaml.safe_load(fh)
    hosts = {}

    def walk(group):
        for name, hvars in ((group or {}).get("hosts") or {}).items():
            hosts.setdefault(name, {}).update(hvars or {})
        for child in ((group or {}).get("children") or {}).values():
            walk(child)
    walk(doc["all"])
    return hosts


_HOSTS = sim_hosts()
FABRIC_IP = {h: v["llmfleet_fabric_ip"] for h, v in _HOSTS.items()}
MGMT_IP = {h: v["ansible_host"] for h, v in _HOSTS.items()}
RAY_HEAD_IP = FABRIC_IP["spark1"]

PROBE = ("import json, ray; ray.init(address='%s:6379', logging_level='ERROR', log_to_driver=False); "
         "print('STATE', json.dumps(sorted(n['NodeManagerAddress'] for n in ray.nodes() if n['Alive'])))" % RAY_HEAD_IP)


def alive_ray_ips(head_host):
    """Fabric IPs of the alive Ray nodes, as the head's GCS sees them (head_host: a testinfra host)."""
    out = head_host.check_output(f"runuser -u llmfleet -- {VENV}/bin/python -c \"{PROBE}\" 2>/dev/null | grep ^STATE")
    return json.loads(out.split(" ", 1)[1])


def wait_for(predicate, timeout, step=3):
    """Seconds until predicate() is true, or raise after timeout."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            if predicate():
                return time.monotonic() - t0
        except AssertionError:
            pass
        time.sleep(step)
    raise AssertionError(f"condition not met within {timeout}s")


def ansible_bin(name):
    """An ansible CLI from the venv that runs the tests."""
    return os.path.join(os.path.dirname(sys.executable), name)


def ansible_env():
    return dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                ANSIBLE_FORCE_COLOR="0", ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".build", "collections"),
                PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))


def run_ansible(cmd, timeout, tail):
    """Run an ansible CLI with the project's config and collection. -> (rc, output, seconds)."""
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=ansible_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=timeout, check=False)
    seconds = time.monotonic() - t0
    print(f"\n$ {' '.join(cmd)}  -> rc={proc.returncode} in {seconds:.0f}s\n{proc.stdout[-tail:]}")
    return proc.returncode, proc.stdout, seconds


def run_playbook(playbook, *args, extra_vars=None, timeout=900, inventory=SIM_INVENTORY, tail=3000):
    """ansible-playbook <playbook> (relative to the repo) from the controller. -> (rc, output, seconds)."""
    cmd = [ansible_bin("ansible-playbook"), "-i", str(inventory), os.path.join(ROOT, playbook), *args]
    if extra_vars:
        cmd += ["-e", json.dumps(extra_vars)]
    return run_ansible(cmd, timeout, tail=tail)


def run_module(host, module, args, timeout=300, inventory=SIM_INVENTORY):
    """ansible <host> -m <module> -a <json args> from the controller. -> (rc, output)."""
    rc, out, _secs = run_ansible([ansible_bin("ansible"), "-i", str(inventory), host, "-m", module,
                                  "-a", json.dumps(args)], timeout, tail=2000)
    return rc, out


def failures(text, limit=4000):
    """The failed tasks of an ansible run (their 'fatal:'/'failed:' blocks), for an assertion's
    message: CI shows the assertion, not always the captured output."""
    blocks = re.findall(r"^(?:fatal|failed): \[.*?(?=^\S|\Z)", text, re.M | re.S)
    return ("\n".join(blocks) or text[-limit:])[-limit:]


def recap(text):
    """{host: {ok, changed, failed, ...}} from a PLAY RECAP."""
    out = {}
    for m in re.finditer(r"^(\S+)\s+:\s+((?:\w+=\d+\s*)+)$", text, re.M):
        out[m.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
    return out


def unit_started_at(host, unit):
    """ActiveEnterTimestampMonotonic of a unit: changes exactly when it (re)starts."""
    return host.check_output(f"systemctl show -P ActiveEnterTimestampMonotonic {unit}")
