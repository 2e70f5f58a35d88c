# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Action plugin llmfleet.cluster.wait_progress: wait for an async job (a build, a venv sync, an
engine's model load) and print a progress line every report_every seconds at normal verbosity:

    spark1: tiny-llama loading 45 s (engine log: Loading weights took 12.10 GB)

The detail is the last meaningful line of a command's output on the node (a journal or a log
tail), read only when a line is due. The result is the job's own (as async_status returns it), so a
failed job fails the task with the job's message, as before. Pure parts: module_utils/progress.py.
"""

from __future__ import annotations

import json
import shlex
import time

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.llmfleet.cluster.plugins.module_utils.progress import (
    final_line, meaningful_line, poll_delay, progress_line, report_due)

display = Display()

ARGUMENT_SPEC = {
    "jid": {"type": "str", "required": True},
    "what": {"type": "str", "required": True},
    "host": {"type": "str"},
    "timeout": {"type": "int", "required": True},
    "poll": {"type": "int", "default": 10},
    "fast_poll": {"type": "int", "default": 0},
    "fast_window": {"type": "int", "default": 0},
    "report_every": {"type": "int", "default": 15},
    "detail_argv": {"type": "list", "elements": "str", "default": []},
    "detail_label": {"type": "str", "default": "log"},
    "timeout_msg": {"type": "str"},
    "cleanup": {"type": "bool", "default": True},
}
# async_status bookkeeping that is not the job's result
_INTERNAL = ("invocation", "results_file", "started", "ansible_job_id", "_ansible_suppress_tmpdir_delete")


class ActionModule(ActionBase):
    """Poll an async job until it ends or the timeout passes, printing progress lines."""

    TRANSFERS_FILES = False

    _async_dir = None

    def _job_dir(self):
        # where the job's status file is, as ansible.builtin.async_status finds it (expanded once:
        # each expansion is a round trip to the host)
        if self._async_dir is None:
            self._async_dir = self._remote_expand_user(self.get_shell_option("async_dir", default="~/.ansible_async"))
        return self._async_dir

    def _job_file(self, jid):
        return "%s/%s" % (self._job_dir().rstrip("/"), jid)

    def _status(self, jid, mode, task_vars):
        return self._execute_module(module_name="ansible.legacy.async_status", task_vars=task_vars,
                                    module_args={"jid": jid, "mode": mode, "_async_dir": self._job_dir()})

    def _still_running(self, jid):
        """True when the job's status file says it started and has not finished, read with one `cat`.

        async_status is a module run: Python started on the node and the module sent from the
        controller at every poll, CPU that an engine loading on the same node (or a small
        controller) is short of. Anything else (no file yet, a result, a file that does not parse)
        is left to async_status, which gives the job's result its usual form."""
        res = self._low_level_execute_command("cat %s" % shlex.quote(self._job_file(jid)), sudoable=True)
        if res.get("rc") != 0:
            return False
        try:
            data = json.loads(res.get("stdout") or "")
        except ValueError:
            return False
        return isinstance(data, dict) and bool(data.get("started")) and not data.get("finished")

    def _detail(self, argv, task_vars):
        """The last meaningful line of argv's output on the node; '' when it cannot be read (a
        progress line must never fail the wait)."""
        if not argv:
            return ""
        res = self._execute_module(module_name="ansible.legacy.command", task_vars=task_vars,
                                   module_args={"argv": list(argv)})
        if res.get("failed") and not res.get("stdout"):
            return ""
        return meaningful_line((res.get("stdout") or "").splitlines())

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]
        host = args["host"] or task_vars.get("inventory_hostname", "?")
        if self._task.check_mode:
            # nothing was started in check mode: there is no job to wait for
            result.update(changed=False, skipped=True, msg=f"{host}: check mode, not waiting for {args['what']}")
            return result
        jid, what, timeout = args["jid"], args["what"], args["timeout"]
        started = time.monotonic()
        last_report = 0.0
        while True:
            status = {} if self._still_running(jid) else self._status(jid, "status", task_vars)
            elapsed = time.monotonic() - started
            if status.get("finished") or (status.get("failed") and "finished" not in status):
                break
            if elapsed >= timeout:
                detail = self._detail(args["detail_argv"], task_vars)
                result.update(failed=True, finished=False, ansible_job_id=jid, elapsed=round(elapsed, 1),
                              detail=detail,
                              msg=args["timeout_msg"] or f"{host}: {what} did not end within {timeout} s (job {jid})")
                display.display(progress_line(host, what + " timed out after", elapsed, detail, args["detail_label"]))
                return result
            if report_due(elapsed, last_report, args["report_every"]):
                last_report = elapsed
                detail = self._detail(args["detail_argv"], task_vars)
                display.display(progress_line(host, what, elapsed, detail, args["detail_label"]))
            time.sleep(min(poll_delay(elapsed, args["poll"], args["fast_poll"], args["fast_window"]),
                           max(timeout - elapsed, 0.5)))
        elapsed = time.monotonic() - started
        display.display(final_line(host, what, elapsed, status))
        if args["cleanup"] and status.get("finished"):
            # what async_status's cleanup mode does (removes the status file), without a module run
            self._low_level_execute_command("rm -f %s" % shlex.quote(self._job_file(jid)), sudoable=True)
        for key, value in status.items():
            if key not in _INTERNAL:
                result[key] = value
        result["finished"] = bool(status.get("finished"))
        result["ansible_job_id"] = jid
        result["elapsed"] = round(elapsed, 1)
        return result
