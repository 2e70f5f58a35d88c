"""Helpers shared by the cluster checks (they run from the controller, against the sim only)."""
import json
import time

FABRIC_IP = {"spark1": "10.231.1.11", "spark2": "10.231.1.12", "thor1": "10.231.1.13", "thor2": "10.231.1.14"}
MGMT_IP = {"spark1": "10.231.0.11", "spark2": "10.231.0.12", "thor1": "10.231.0.13", "thor2": "10.231.0.14"}
VENV = "/opt/llmfleet/venvs/current"

PROBE = ("import json, ray; ray.init(address='10.231.1.11:6379', logging_level='ERROR', log_to_driver=False); "
         "print('STATE', json.dumps(sorted(n['NodeManagerAddress'] for n in ray.nodes() if n['Alive'])))")


def alive_ray_ips(head_host):
    """Fabric IPs of the alive Ray nodes, as the head's GCS sees them."""
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
