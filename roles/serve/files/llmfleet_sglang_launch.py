# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Start SGLang's HTTP server (`sglang.launch_server`) with the API key taken from the environment.

SGLang reads its API key only from `--api-key`, and a key on the command line is readable by every
local user in /proc/<pid>/cmdline. The serve role runs `<venv>/bin/python <this file> ARGS...`
instead; this launcher
  * pops LLMFLEET_API_KEY (and VLLM_API_KEY, the same key for vLLM) from its environment, so no
    child process inherits it;
  * refuses an `--api-key` on its own command line;
  * appends `--api-key KEY` to sys.argv in-process only (the kernel's copy of the command line,
    what /proc/<pid>/cmdline shows, is never rewritten with it) and runs sglang.launch_server as
    `python -m` would (runpy);
  * masks the key where SGLang would echo it: the `server_args=` log line and `/server_info`
    (ServerArgs.resolved_dict) and the recorded launch command.
Without a key in the environment it runs SGLang unchanged (an open endpoint, as SGLang's own).
Installed by the serve role to /opt/llmfleet/lib (root-owned, 0644); standard library only.
"""
import os
import runpy
import sys

KEY_ENV = "LLMFLEET_API_KEY"
ALSO_POPPED = ("VLLM_API_KEY",)
SECRET_FLAGS = ("--api-key", "--admin-api-key")
SECRET_FIELDS = ("api_key", "admin_api_key")
MASK = "<redacted>"


def take_key(environ):
    """Remove the key variables from `environ`; return the key ('' when unset)."""
    key = environ.pop(KEY_ENV, "")
    for name in ALSO_POPPED:
        environ.pop(name, None)
    return key


def masked_argv(argv):
    """`argv` with the value of every secret flag replaced (both `--flag V` and `--flag=V`)."""
    out, hide = [], False
    for arg in argv:
        if hide:
            out.append(MASK)
            hide = False
        elif arg in SECRET_FLAGS:
            out.append(arg)
            hide = True
        elif arg.split("=", 1)[0] in SECRET_FLAGS and "=" in arg:
            out.append(arg.split("=", 1)[0] + "=" + MASK)
        else:
            out.append(arg)
    return out


def secret_on_argv(argv):
    return [a for a in argv if a.split("=", 1)[0] in SECRET_FLAGS]


def _mask_server_args():
    """Make SGLang's own echoes of its configuration show the key masked."""
    from sglang.srt import server_args as sa  # pylint: disable=import-outside-toplevel

    resolved = getattr(sa.ServerArgs, "resolved_dict", None)
    if resolved is not None:
        def resolved_dict(self):
            data = resolved(self)
            for field in SECRET_FIELDS:
                if data.get(field):
                    data[field] = MASK
            return data
        sa.ServerArgs.resolved_dict = resolved_dict
    prepare = getattr(sa, "prepare_server_args", None)
    if prepare is not None:
        def prepare_server_args(argv):
            args = prepare(argv)
            if getattr(args, "_launch_command", None):
                args._launch_command = " ".join(masked_argv(list(argv)))  # pylint: disable=protected-access
            sys.argv[1:] = masked_argv(sys.argv[1:])  # crash dumps join sys.argv
            return args
        sa.prepare_server_args = prepare_server_args


def main(argv=None, environ=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    environ = os.environ if environ is None else environ
    key = take_key(environ)
    if secret_on_argv(argv):
        sys.stderr.write("llmfleet_sglang_launch: refusing a key on the command line (%s); "
                         "give it as %s in the environment\n" % (", ".join(SECRET_FLAGS), KEY_ENV))
        return 2
    if key:
        _mask_server_args()
        argv += ["--api-key", key]
    sys.argv = ["sglang.launch_server"] + argv
    runpy.run_module("sglang.launch_server", run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
