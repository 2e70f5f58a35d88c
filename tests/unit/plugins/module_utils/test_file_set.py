"""file_set's pure decisions: spec checks, directory order, whether to write, the diff."""
import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import file_set


@pytest.mark.parametrize("directories, files, want", [
    ([{"path": "/etc/a"}], [{"path": "/etc/a/b.conf", "mode": "0644"}], []),
    ([], [{"path": "/etc/x", "mode": "644"}], []),
    ([], [{"path": "/etc/x", "mode": "01777"}], []),
    ([], [{"path": "etc/x"}], ["file 'etc/x': the path must be absolute"]),
    ([{"path": "/etc/a/"}], [{"path": "/etc/a"}], ["file '/etc/a': named twice"]),
    ([], [{"path": "/etc/x", "mode": 420}],
     ["file '/etc/x': mode 420 must be a quoted octal string such as \"0644\""]),
    ([{"path": "/d", "mode": "u+rwx"}], [],
     ["directory '/d': mode 'u+rwx' must be a quoted octal string such as \"0644\""]),
    ([], [{"path": "/etc/x", "validate": "nft -c -f %s"}], []),
    ([], [{"path": "/etc/x", "validate": "nft -c -f"}], ["file '/etc/x': validate 'nft -c -f' must name the file as %s"]),
    ([], [{"path": "/etc/x", "mode": "0899"}],
     ["file '/etc/x': mode '0899' must be a quoted octal string such as \"0644\""]),
])
def test_spec_problems(directories, files, want):
    assert file_set.spec_problems(directories, files) == want


@pytest.mark.parametrize("given, want", [
    (["/etc/a/b/c", "/etc/a", "/etc/a/b"], ["/etc/a", "/etc/a/b", "/etc/a/b/c"]),
    (["/etc/y", "/etc/x"], ["/etc/y", "/etc/x"]),
    ([], []),
])
def test_directory_order(given, want):
    assert [d["path"] for d in file_set.directory_order([{"path": p} for p in given])] == want


@pytest.mark.parametrize("current, wanted, want", [
    (None, "", True),
    (b"", "", False),
    (b"A=1\n", "A=1\n", False),
    (b"A=1", "A=1\n", True),
    ("é\n".encode(), "é\n", False),
    (b"\xff", "x", True),
])
def test_needs_write(current, wanted, want):
    assert file_set.needs_write(current, wanted) is want


def test_content_diff_new_and_changed_file():
    assert file_set.content_diff("/etc/x", None, "a\n") == {
        "before_header": "/etc/x", "after_header": "/etc/x", "before": "", "after": "a\n"}
    assert file_set.content_diff("/etc/x", b"b\n", "a\n")["before"] == "b\n"
