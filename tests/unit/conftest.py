"""Make `ansible_collections.llmfleet.cluster` importable from this checkout."""
import os
import sys

# Unit tests must not see facts cached by real runs: ansible.cfg points the jsonfile fact cache at
# .cache/facts, whose cached facts (python_env_versions...) would leak into the fixture inventories'
# hostvars. Set before anything imports ansible.constants.
os.environ["ANSIBLE_CACHE_PLUGIN"] = "memory"

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# When run from inside an ansible_collections/llmfleet/cluster tree (ansible-test), that tree wins.
_parts = ROOT.split(os.sep)
if _parts[-3:-2] != ["ansible_collections"]:
    base = os.path.join(ROOT, ".build", "collections")
    link = os.path.join(base, "ansible_collections", "llmfleet", "cluster")
    if not os.path.islink(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(ROOT, link)
    if base not in sys.path:
        sys.path.insert(0, base)
else:
    base = os.sep.join(_parts[:-3])
    if base not in sys.path:
        sys.path.insert(0, base)
