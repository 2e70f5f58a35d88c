"""Filter files import their module_utils on first use: ansible-core's Jinja loader imports every
filter file of the collection in each worker that renders any of them (plugin_utils/lazy_import.py)."""
import glob
import os
import subprocess
import sys

from ansible_collections.llmfleet.cluster.plugins.plugin_utils import lazy_import

# the collection as this test imports it (a checkout linked under .build/collections, or ansible-test's tree)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(lazy_import.__file__))))
BASE = ROOT.rsplit(os.sep + "ansible_collections" + os.sep, 1)[0]
PREFIX = "ansible_collections.llmfleet.cluster.plugins."

# Import every filter file the way the Jinja loader does, then list which module_utils got imported;
# then call one filter and list again.
PROBE = """
import glob, importlib, os, sys
sys.path.insert(0, sys.argv[1])
names = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(sys.argv[2], 'plugins', 'filter', '*.py')))
for name in names:
    importlib.import_module('{p}filter.' + name)
def loaded():
    return sorted(m for m in sys.modules if m.startswith('{p}module_utils.'))
print(','.join(loaded()))
importlib.import_module('{p}filter.topology').FilterModule().filters()['iface_for_ip']({{}}, '10.0.0.1')
print(','.join(loaded()))
""".format(p=PREFIX)


def test_importing_every_filter_file_imports_no_module_utils():
    out = subprocess.run([sys.executable, "-c", PROBE, BASE, ROOT], capture_output=True, text=True, check=True)
    after_import, after_call = out.stdout.split("\n")[:2]
    assert after_import == "", "imported with the filter files: %s" % after_import
    assert PREFIX + "module_utils.topology" in after_call.split(",")


def test_lazy_module_imports_once_and_reads_through():
    mod = lazy_import.module_utils("plain_missing_module_name_for_test")
    assert "plain_missing" in repr(mod)
    real = lazy_import.LazyModule("json")
    assert real.dumps([1]) == "[1]"
    assert real.__dict__["_lazy_module"] is sys.modules["json"]


def test_every_filter_file_uses_lazy_module_utils():
    """A top-level `from ...module_utils import x` in a filter file would undo it for every worker."""
    for path in glob.glob(os.path.join(ROOT, "plugins", "filter", "*.py")):
        with open(path) as handle:
            text = handle.read()
        assert "plugins.module_utils" not in text, path
