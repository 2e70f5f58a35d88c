#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

DOCUMENTATION = r"""
module: source_patch
short_description: Apply or revert a find/replace source patch on a package installed in a venv
version_added: 0.1.0
author: llmfleet maintainers (!UNKNOWN)
description:
  - Patches one file of a Python package installed in a virtual environment, for example vLLM's
    C(w8a8_utils.py) on sm_121 hosts (see the C(llmfleet.cluster.engine_patches) role).
  - >-
    The patch is data (O(patch)) - exact C(find)/C(replace) blocks whose C(replace) side carries
    the marker comment C(llmfleet-patch: <id>), and optionally the sha256 of every original file it
    was written for.
  - The state of the file is read from its content, never from a stamp - C(unpatched) (every
    C(find) once, no C(replace)), C(patched) (the reverse), or anything else, which the module
    refuses to touch and reports with the host, package, version, file and what to do.
  - Reverting puts the C(find) blocks back, which gives the original file byte for byte (checked
    against the C(original_sha256) of O(patch) when listed). No backup copy is kept.
  - The package's version is read from its C(*.dist-info/METADATA) under
    C(<venv>/lib/python*/site-packages); outside O(version_spec), or without the package, the
    result is RV(status=not_applicable) and nothing is touched, except that with O(state=present) a
    version inside the patch's C(needed_for) (the releases that have the fault) but outside
    O(version_spec) fails and names the gap (that release needs the patch, which was not written for it).
  - After writing, the file's stale C(__pycache__/<name>.*.pyc) are removed and the file is
    recompiled with C(<venv>/bin/python -m py_compile), which also proves the patched file
    compiles; when it does not, the original is written back and the module fails.
options:
  venv:
    description:
      - Root of the virtual environment (a release venv or its C(current) link).
    type: path
    required: true
  package:
    description:
      - Distribution name of the package (C(vllm)); its version comes from its dist-info.
    type: str
    required: true
  version_spec:
    description:
      - PEP 440 version range the patch applies to, comma-separated clauses AND-ed
        (C(>=0.17,<0.19), C(==0.18.*)). Empty means every version.
      - A local label of the installed version (C(0.18.1+cu130)) is ignored.
    type: str
    default: ''
  file:
    description:
      - The patched file, relative to the site-packages directory holding the package
        (C(vllm/model_executor/layers/quantization/utils/w8a8_utils.py)).
    type: str
    required: true
  patch:
    description:
      - >-
        The patch data, as in C(roles/engine_patches/files/patches/<id>/patch.yml) - C(id)
        (C([a-z0-9._-])), C(hunks) (a list of C({name, find, replace}) - each C(find) occurs exactly
        once in an original file, each C(replace) carries the marker, neither contains the other),
        C(original_sha256) (optional list - any other original is refused even when its blocks
        match), C(known_versions) (optional, named in the error message) and C(marker) (default
        C(llmfleet-patch: <id>)).
      - C(package), C(version_spec), C(archs), C(file), C(description), C(source) and C(why) may be
        present (the role reads them); any other key is an error.
    type: dict
    required: true
  state:
    description:
      - V(present) applies the patch, V(absent) reverts it.
    type: str
    choices: [present, absent]
    default: present
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    support: full
    platforms: posix
notes:
  - The running engine has the old code loaded; restart it (or apply to a staged release venv
    before switching to it) for a change to take effect.
  - A package reinstalled or upgraded in place gets its original files back; run the module again
    (the state is read from the content, so it simply applies again).
seealso:
  - module: llmfleet.cluster.gpu_info
"""

EXAMPLES = r"""
- name: CUTLASS FP8 fallback for sm_121 in the serving venv
  llmfleet.cluster.source_patch:
    venv: /opt/llmfleet/venvs/current
    package: vllm
    version_spec: ">=0.17,<0.19"
    file: vllm/model_executor/layers/quantization/utils/w8a8_utils.py
    patch: "{{ lookup('ansible.builtin.file', 'patches/cutlass-fp8-sm121/patch.yml') | from_yaml }}"
  register: patched

- name: Revert it
  llmfleet.cluster.source_patch:
    venv: /opt/llmfleet/venvs/current
    package: vllm
    file: vllm/model_executor/layers/quantization/utils/w8a8_utils.py
    patch: "{{ lookup('ansible.builtin.file', 'patches/cutlass-fp8-sm121/patch.yml') | from_yaml }}"
    state: absent
"""

RETURN = r"""
status:
  description:
    - V(applied) (just now), V(already_applied), V(reverted) (just now), V(not_applied) (V(absent)
      wanted, the file is original) or V(not_applicable) (package missing or version outside
      O(version_spec)). In check mode, what would happen.
    - In a failed result also V(foreign) (the file is not what the patch expects) or V(rolled_back)
      (the patched file did not compile; the original was written back).
  returned: always
  type: str
  sample: applied
reason:
  description: Why the patch is not applicable; null otherwise.
  returned: always
  type: str
  sample: vllm 0.19.0 is outside >=0.17,<0.19
patch_id:
  description: The patch's id.
  returned: always
  type: str
  sample: cutlass-fp8-sm121
installed_version:
  description: Version of the package in the venv; null when it is not installed.
  returned: always
  type: str
  sample: 0.18.1
path:
  description: Absolute path of the patched file; null when not applicable.
  returned: always
  type: str
  sample: /opt/llmfleet/venvs/vllm-0.18.1/lib/python3.12/site-packages/vllm/model_executor/layers/quantization/utils/w8a8_utils.py
sha256:
  description: sha256 of the file after the task (in check mode, as it would be).
  returned: when applicable
  type: str
  sample: 56e111d44b91dd1c5e585b407b2fb6e6feb0365dc361a3e9659c06af18ba49e2
removed_bytecode:
  description: Stale C(__pycache__) files removed for the patched file.
  returned: always
  type: list
  elements: str
  sample: [w8a8_utils.cpython-312.pyc]
recompiled:
  description: Whether the file was recompiled with the venv's python after writing.
  returned: always
  type: bool
  sample: true
"""

import glob
import os
import socket
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.llmfleet.cluster.plugins.module_utils import source_patch as sp


def _site_packages_dirs(venv):
    found = []
    for pattern in ('lib/python*/site-packages', 'lib64/python*/site-packages'):
        for path in sorted(glob.glob(os.path.join(venv, pattern))):
            real = os.path.realpath(path)
            if os.path.isdir(real) and real not in found:
                found.append(real)
    return found


def _installed(dirs, package):
    """``[(site_packages, version)]`` for every dist-info of ``package`` under ``dirs``."""
    want = sp.canonical(package)
    out = []
    for site in dirs:
        for name in sp.dist_info_candidates(os.listdir(site), package):
            metadata = os.path.join(site, name, 'METADATA')
            if not os.path.isfile(metadata):
                continue
            with open(metadata, 'rb') as handle:
                text = handle.read(65536).decode('utf-8', 'replace')
            dist, version = sp.metadata_name_version(text)
            if dist and version and sp.canonical(dist) == want:
                out.append((site, version))
    return out


def _write(module, path, data):
    fd, tmp = tempfile.mkstemp(prefix='.%s.' % os.path.basename(path), suffix='.llmfleet-tmp',
                               dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, 'wb') as handle:
            handle.write(data)
    except Exception:
        os.unlink(tmp)
        raise
    module.atomic_move(tmp, path)


def _refresh_bytecode(module, venv, path):
    """Remove the file's cached bytecode and recompile it; ``(removed, recompiled, error)``."""
    cache = os.path.join(os.path.dirname(path), '__pycache__')
    stem = os.path.splitext(os.path.basename(path))[0] + '.'
    removed = []
    if os.path.isdir(cache):
        for name in sorted(os.listdir(cache)):
            if name.startswith(stem) and name.endswith('.pyc'):
                os.unlink(os.path.join(cache, name))
                removed.append(name)
    python = os.path.join(venv, 'bin', 'python')
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        return removed, False, None
    rc, out, err = module.run_command([python, '-I', '-m', 'py_compile', path])
    if rc != 0:
        return removed, False, (err or out).strip() or 'py_compile exited with %d' % rc
    return removed, True, None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venv=dict(type='path', required=True),
            package=dict(type='str', required=True),
            version_spec=dict(type='str', default=''),
            file=dict(type='str', required=True),
            patch=dict(type='dict', required=True),
            state=dict(type='str', choices=['present', 'absent'], default='present'),
        ),
        supports_check_mode=True,
    )
    params = module.params
    venv, package, rel = params['venv'], params['package'], params['file']
    host = socket.gethostname()
    result = dict(changed=False, status=None, reason=None, patch_id=None, installed_version=None,
                  path=None, removed_bytecode=[], recompiled=False)

    try:
        patch = sp.load_patch(params['patch'])
        sp.parse_spec(params['version_spec'])
    except sp.PatchError as exc:
        module.fail_json(msg='%s: %s' % (host, to_native(exc)), **result)
    result['patch_id'] = patch['id']
    norm = os.path.normpath(rel)
    if os.path.isabs(rel) or norm == '..' or norm.startswith('..' + os.sep):
        module.fail_json(msg='%s: file must be relative to site-packages, got %s' % (host, rel), **result)

    if not os.path.isdir(venv):
        msg = '%s: venv %s does not exist (create it with the python_env role first)' % (host, venv)
        if module.check_mode:
            module.exit_json(**{**result, 'status': 'not_applicable', 'reason': msg})
        module.fail_json(msg=msg, **result)

    found = _installed(_site_packages_dirs(venv), package)
    if not found:
        module.exit_json(**{**result, 'status': 'not_applicable',
                            'reason': '%s is not installed in %s' % (package, venv)})
    if len(found) > 1:
        module.fail_json(msg='%s: %s has several dist-info in %s (%s): a broken install; recreate '
                             'the venv' % (host, package, venv,
                                           ', '.join('%s in %s' % (v, s) for s, v in found)),
                         **result)
    site, version = found[0]
    result['installed_version'] = version
    try:
        in_range = sp.version_matches(version, params['version_spec'])
    except sp.PatchError as exc:
        module.fail_json(msg='%s: %s %s: %s' % (host, package, version, to_native(exc)), **result)
    gap = None
    if params['state'] == 'present':
        gap = sp.coverage_gap(dict(params['patch'], package=package, version_spec=params['version_spec'],
                                   file=rel), version)
    if gap:
        module.fail_json(msg='%s: %s' % (host, gap), **result)
    if not in_range:
        module.exit_json(**{**result, 'status': 'not_applicable',
                            'reason': '%s %s is outside %s' % (package, version, params['version_spec'])})

    path = os.path.join(site, norm)
    result['path'] = path
    if not os.path.isfile(path):
        module.fail_json(msg='%s: %s %s is installed in %s but %s is not there (an editable or source '
                             'install? the patch expects the wheel layout)' % (host, package, version, venv, path),
                         **result)
    with open(path, 'rb') as handle:
        before_bytes = handle.read()
    try:
        before = before_bytes.decode('utf-8')
    except UnicodeDecodeError:
        module.fail_json(msg=sp.mismatch_message(host, package, version, path, patch,
                                                 ['the file is not UTF-8 text']), **result)

    todo = sp.plan(before, patch, params['state'])
    result['status'] = todo['status']
    if todo['status'] == 'foreign':
        module.fail_json(msg=sp.mismatch_message(host, package, version, path, patch,
                                                 todo['info']['reasons'], todo['info']['has_marker']),
                         reasons=todo['info']['reasons'], **result)

    after_bytes = todo['after'].encode('utf-8')
    result['changed'] = todo['changed']
    result['sha256'] = sp.sha256_hex(after_bytes)
    if todo['changed'] and module._diff:
        result['diff'] = dict(before=before, after=todo['after'], before_header=path, after_header=path)
    if todo['changed'] and not module.check_mode:
        _write(module, path, after_bytes)
        removed, recompiled, error = _refresh_bytecode(module, venv, path)
        result.update(removed_bytecode=removed, recompiled=recompiled)
        if error and todo['status'] == 'applied':
            _write(module, path, before_bytes)
            _refresh_bytecode(module, venv, path)
            module.fail_json(msg='%s: patch %s made %s uncompilable for the venv\'s python, the original '
                                 'is back: %s' % (host, patch['id'], path, error),
                             **{**result, 'changed': False, 'status': 'rolled_back'})
        if error:
            module.warn('%s does not compile with %s/bin/python: %s' % (path, venv, error))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
