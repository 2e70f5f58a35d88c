"""The llmfleet.cluster.file_set module on real files in tmp_path: a first run makes and writes, a
second changes nothing, check mode writes nothing and says what it would, attributes are corrected."""
import os
import stat

from ansible_collections.llmfleet.cluster.plugins.modules import file_set
from uthelper import run_module


def args(tmp_path, content="[Service]\nMemoryMax=90%\n", mode="0644"):
    unit_dir = tmp_path / "units" / "demo.service.d"
    return {"directories": [{"path": str(unit_dir), "mode": "0755"}, {"path": str(tmp_path / "units"), "mode": "0755"}],
            "files": [{"path": str(tmp_path / "units" / "demo.service"), "content": "[Unit]\n", "mode": "0644"},
                      {"path": str(unit_dir / "50-x.conf"), "content": content, "mode": mode}]}


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_first_run_writes_then_nothing_changes(monkeypatch, tmp_path):
    out = run_module(monkeypatch, file_set, args(tmp_path))
    assert not out.failed and out.result["changed"]
    assert out.result["changed_paths"] == [str(tmp_path / "units"), str(tmp_path / "units/demo.service.d"),
                                           str(tmp_path / "units/demo.service"),
                                           str(tmp_path / "units/demo.service.d/50-x.conf")]
    assert (tmp_path / "units/demo.service.d/50-x.conf").read_text() == "[Service]\nMemoryMax=90%\n"
    assert mode_of(tmp_path / "units/demo.service") == 0o644 and mode_of(tmp_path / "units") == 0o755
    again = run_module(monkeypatch, file_set, args(tmp_path), diff=True)
    assert not again.failed and not again.result["changed"] and again.result["changed_paths"] == []
    assert again.result["diff"] == []


def test_check_mode_on_a_fresh_tree_writes_nothing(monkeypatch, tmp_path):
    out = run_module(monkeypatch, file_set, args(tmp_path), check_mode=True, diff=True)
    assert not out.failed and out.result["changed"] and len(out.result["changed_paths"]) == 4
    assert not (tmp_path / "units").exists()
    assert {"before_header": str(tmp_path / "units/demo.service"), "after_header": str(tmp_path / "units/demo.service"),
            "before": "", "after": "[Unit]\n"} in out.result["diff"]


def test_changed_content_and_mode(monkeypatch, tmp_path):
    run_module(monkeypatch, file_set, args(tmp_path))
    conf = tmp_path / "units/demo.service.d/50-x.conf"
    check = run_module(monkeypatch, file_set, args(tmp_path, content="new\n"), check_mode=True, diff=True)
    assert check.result["changed_paths"] == [str(conf)] and conf.read_text() == "[Service]\nMemoryMax=90%\n"
    assert check.result["diff"][0]["before"] == "[Service]\nMemoryMax=90%\n" and check.result["diff"][0]["after"] == "new\n"
    out = run_module(monkeypatch, file_set, args(tmp_path, content="new\n", mode="0640"))
    assert out.result["changed_paths"] == [str(conf)] and conf.read_text() == "new\n" and mode_of(conf) == 0o640
    os.chmod(conf, 0o600)
    fixed = run_module(monkeypatch, file_set, args(tmp_path, content="new\n", mode="0640"), diff=True)
    assert fixed.result["changed_paths"] == [str(conf)] and mode_of(conf) == 0o640
    assert fixed.result["diff"][0]["before"]["mode"] == "0600" and fixed.result["diff"][0]["after"]["mode"] == "0640"


def test_refuses_bad_specs_and_missing_parents(monkeypatch, tmp_path):
    bad = run_module(monkeypatch, file_set, {"files": [{"path": str(tmp_path / "x"), "content": "", "mode": 420}]})
    assert bad.failed and "must be a quoted octal string" in bad.result["msg"] and not (tmp_path / "x").exists()
    orphan = run_module(monkeypatch, file_set, {"files": [{"path": str(tmp_path / "no/x"), "content": ""}]})
    assert orphan.failed and "does not exist (add it to directories)" in orphan.result["msg"]
    (tmp_path / "d").mkdir()
    isdir = run_module(monkeypatch, file_set, {"files": [{"path": str(tmp_path / "d"), "content": ""}]})
    assert isdir.failed and "is a directory" in isdir.result["msg"]


def test_validate_runs_on_the_new_content_and_a_failure_keeps_the_file(monkeypatch, tmp_path):
    conf = tmp_path / "ray.nft"
    conf.write_text("old\n")
    seen = []

    def checker(argv):
        seen.append(open(argv[-1]).read())
        return (1, "", "syntax error") if "bad" in seen[-1] else (0, "", "")
    spec = {"files": [{"path": str(conf), "content": "bad\n", "validate": "nft -c -f %s"}]}
    out = run_module(monkeypatch, file_set, spec, commands=checker)
    assert out.failed and "validate 'nft -c -f %s' failed (rc=1): syntax error" in out.result["msg"]
    assert conf.read_text() == "old\n" and seen == ["bad\n"] and out.calls[0][:3] == ["nft", "-c", "-f"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ray.nft"]
    spec["files"][0]["content"] = "good\n"
    ok = run_module(monkeypatch, file_set, spec, commands=checker)
    assert not ok.failed and conf.read_text() == "good\n" and seen[-1] == "good\n"
    again = run_module(monkeypatch, file_set, spec, commands=checker)
    assert not again.result["changed"] and len(seen) == 2


def test_check_mode_with_a_user_the_run_has_not_created_yet(monkeypatch, tmp_path):
    """An existing directory to be owned by a service user that an earlier task of the same run creates:
    check mode on a fresh host cannot look the user up, so it reports the change instead of failing."""
    (tmp_path / "home").mkdir()
    spec = {"directories": [{"path": str(tmp_path / "home"), "owner": "llmfleet-nosuchuser", "group": "nosuchgroup",
                             "mode": "0750"}], "files": []}
    check = run_module(monkeypatch, file_set, spec, check_mode=True, diff=True)
    assert not check.failed and check.result["changed"], check.result
    assert check.result["diff"] == [{"before_header": str(tmp_path / "home"), "after_header": str(tmp_path / "home"),
                                     "before": {}, "after": {"owner": "llmfleet-nosuchuser", "group": "nosuchgroup"}}]
    # outside check mode the unknown user is an error, as ansible's own file module says it
    real = run_module(monkeypatch, file_set, spec)
    assert real.failed and "llmfleet-nosuchuser" in real.result["msg"]
