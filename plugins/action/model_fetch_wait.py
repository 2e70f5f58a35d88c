# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Action plugin llmfleet.cluster.model_fetch_wait: wait for a node's model download (an async job)
and print its progress (bytes done / total, rate) while it runs.

Each poll runs ansible.builtin.async_status and reads the fetch script's progress file on the node
(ansible.builtin.slurp); the line is printed on the controller. The result is the job's final one.
"""

from __future__ import annotations

import base64
import json
import time

from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.llmfleet.cluster.plugins.module_utils.model_node_fetch import progress_line

display = Display()


class ActionModule(ActionBase):
    """Poll an async job and its progress file until the job ends or the timeout passes."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("jid", "progress_file", "poll", "timeout"))

    def _progress(self, path, task_vars):
        res = self._execute_module(module_name="ansible.builtin.slurp", module_args={"src": path},
                                   task_vars=task_vars)
        if res.get("failed") or "content" not in res:
            return None
        try:
            return json.loads(base64.b64decode(res["content"]))
        except ValueError:
            return None

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        jid, path = args.get("jid"), args.get("progress_file")
        poll, timeout = max(int(args.get("poll", 10)), 1), int(args.get("timeout", 86400))
        if not jid or not path:
            result.update(failed=True, msg="model_fetch_wait needs jid and progress_file")
            return result
        host = task_vars.get("inventory_hostname", "?")
        deadline = time.monotonic() + timeout
        while True:
            status = self._execute_module(module_name="ansible.builtin.async_status",
                                          module_args={"jid": jid, "mode": "status"}, task_vars=task_vars)
            if status.get("finished") or status.get("failed") and "finished" not in status:
                break
            if time.monotonic() > deadline:
                result.update(failed=True, msg=f"{host}: the download did not end within {timeout} s "
                              f"(models_fetch_timeout); it goes on in the background (job {jid}): re-run to wait again")
                return result
            display.display(f"  model download: {progress_line(host, self._progress(path, task_vars))}")
            time.sleep(poll)
        final = self._progress(path, task_vars)
        if final:
            display.display(f"  model download: {progress_line(host, final)} (ended)")
        self._execute_module(module_name="ansible.builtin.async_status",
                             module_args={"jid": jid, "mode": "cleanup"}, task_vars=task_vars)
        for key in ("rc", "stdout", "stderr", "stdout_lines", "finished"):
            if key in status:
                result[key] = status[key]
        result["progress"] = final
        result["changed"] = False
        try:
            result["fetch"] = json.loads((status.get("stdout") or "").strip().splitlines()[-1])
        except (ValueError, IndexError):
            result["fetch"] = {"failed": True, "kind": None, "msg": to_native(status.get("stderr") or status.get("msg") or "")}
        result["changed"] = bool(result["fetch"].get("changed"))
        return result
