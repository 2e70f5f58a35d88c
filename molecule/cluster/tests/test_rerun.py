"""A re-run of site.yml on the converged sim (issue 19): each role's play checks its nodes first and
ends there where none drifted, so none of the ten roles starts; a node that drifted runs its
role's play (on every host of it) and the other plays still end at their check.

Runs first among the checks (conftest.py FIRST): the lab is then exactly as the converge left it.
The planted drift is fabric's env file on spark2, which no unit is restarted for."""
import hashlib

from conftest import failures, node, recap, run_playbook

ROLES = ("fabric", "python_env", "engine_patches", "nccl", "ray_node", "models", "safeguards", "serve", "gateway",
         "monitoring")
COMM_ENV = "/etc/llmfleet/comm.env"


def started(out):
    """The roles among ROLES whose own tasks ran (their play did not end at its check)."""
    return sorted(r for r in ROLES if f"TASK [llmfleet.cluster.{r} :" in out)


def site():
    rc, out, secs = run_playbook("site.yml", timeout=1200)
    assert rc == 0, failures(out)
    return out, secs


def test_a_noop_site_run_ends_every_role_play_at_its_check():
    out, secs = site()
    assert started(out) == [], f"roles that ran on an unchanged lab: {started(out)}"
    assert out.count("TASK [End the play where no node drifted]") == len(ROLES)
    assert all(r["changed"] == 0 for r in recap(out).values()), recap(out)
    print(f"no-op site.yml: {secs:.1f}s")


def test_a_drifted_node_runs_its_roles_play_and_only_that_one():
    h = node("spark2")
    before = hashlib.sha256(h.file(COMM_ENV).content).hexdigest()
    assert h.run(f"rm {COMM_ENV}").rc == 0
    out, _secs = site()
    assert started(out) == ["fabric"], f"roles that ran after spark2's {COMM_ENV} was removed: {started(out)}"
    assert recap(out)["spark2"]["changed"] > 0
    assert hashlib.sha256(h.file(COMM_ENV).content).hexdigest() == before
    out, _secs = site()
    assert started(out) == [] and all(r["changed"] == 0 for r in recap(out).values()), (started(out), recap(out))


def test_a_limited_full_run_of_the_ray_head_audits_the_members_it_has():
    """--limit spark1 (the head): its audit reads only the env files of the members in the run."""
    rc, out, _secs = run_playbook("playbooks/ray.yml", "--limit", "spark1", extra_vars={"llmfleet_full_run": True})
    assert rc == 0, failures(out)
    assert "TASK [llmfleet.cluster.ray_node : Wait until every node of the cluster has joined" in out
    assert recap(out)["spark1"]["changed"] == 0


def test_a_limit_that_splits_a_serving_group_stops_before_serve_changes_anything():
    rc, out, _secs = run_playbook("playbooks/serve.yml", "--limit", "spark1", extra_vars={"llmfleet_full_run": True})
    assert rc != 0 and "leaves spark2 out" in out, failures(out)
    assert recap(out)["spark1"]["changed"] == 0 and recap(out)["spark1"]["failed"] == 1
