#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

DOCUMENTATION = r"""
module: model_manifest
short_description: Sizes and sha256 of every file of a model directory, compared with a manifest
version_added: 0.1.0
author: llmfleet maintainers (!UNKNOWN)
description:
  - Walks a model directory (weights, config, tokenizer, ...) and records the size and sha256 of
    every regular file, by path relative to the directory. Paths with a component starting with a
    dot (the hub's C(.cache/), the models role's fetch marker) are not part of a model and are skipped.
  - With O(expected) (the manifest of the source copy) it also returns which files are missing or
    differ in size or hash (the files the models role copies again), and which are extra.
  - Sizes are compared first; a file of the wrong size is not hashed. Read-only.
options:
  path:
    description: The model directory.
    type: path
    required: true
  expected:
    description: Manifest to compare with, relative path -> C({size, sha256}) (RV(files) of the source).
    type: dict
  hashes:
    description: Hash the files (sha256). Off, only sizes are recorded and compared.
    type: bool
    default: true
extends_documentation_fragment:
  - llmfleet.cluster.attributes.read_only
"""

EXAMPLES = r"""
- name: Manifest of the controller's copy
  llmfleet.cluster.model_manifest:
    path: /var/cache/llmfleet/models/tiny-llama
  delegate_to: localhost
  run_once: true
  register: source

- name: Compare every node's copy with it
  llmfleet.cluster.model_manifest:
    path: /opt/llmfleet/models/tiny-llama
    expected: "{{ source.files }}"
  register: node_copy
"""

RETURN = r"""
exists:
  description: Whether O(path) is a directory.
  returned: always
  type: bool
  sample: true
files:
  description: Relative path -> size (bytes) and sha256 (null with O(hashes=false)).
  returned: always
  type: dict
  sample: {"config.json": {"size": 612, "sha256": "5d41402abc4b2a76b9719d911017c592ae2a8d0e0f11e2d9f9d2e0c4b1a3f2e1"}}
total_bytes:
  description: Sum of the sizes.
  returned: always
  type: int
  sample: 16700000
bad:
  description: Files of O(expected) that are missing or differ (size or hash).
  returned: when O(expected) is given
  type: list
  elements: str
  sample: [model.safetensors]
problems:
  description: One line per bad file, with the reason.
  returned: when O(expected) is given
  type: list
  elements: str
  sample: ["model.safetensors: 1024 bytes, expected 16691264"]
extra:
  description: Files present here but not in O(expected) (left alone).
  returned: when O(expected) is given
  type: list
  elements: str
  sample: []
"""

import hashlib
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.cluster.plugins.module_utils import model_fetch

CHUNK = 8 << 20


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def walk(root, hashes, expected):
    files = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if model_fetch.hidden(rel) or not os.path.isfile(full):
                continue
            size = os.path.getsize(full)
            want = (expected or {}).get(rel)
            skip_hash = not hashes or (want is not None and int(want.get("size", -1)) != size)
            files[rel] = {"size": size, "sha256": None if skip_hash else sha256_of(full)}
    return files


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            expected=dict(type="dict"),
            hashes=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    path, expected, hashes = module.params["path"], module.params["expected"], module.params["hashes"]
    exists = os.path.isdir(path)
    try:
        files = walk(path, hashes, expected) if exists else {}
    except OSError as exc:
        module.fail_json(msg=f"cannot read {path}: {exc}")
    result = {"changed": False, "exists": exists, "files": files,
              "total_bytes": sum(f["size"] for f in files.values())}
    if expected is not None:
        result.update(model_fetch.compare(expected, files, hashes=hashes))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
