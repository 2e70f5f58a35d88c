# Copyright: llmfleet maintainers
# Apache License 2.0 (see galaxy.yml)
"""Run a systemd unit the collection rendered, on a host without systemd (a GPU test host).

  unit_exec.py start UNIT_FILE --log LOG --pidfile PID   start ExecStart in its own session
  unit_exec.py stop  --pidfile PID [--grace 20]          SIGTERM the session, then SIGKILL
  unit_exec.py env   UNIT_FILE                            print the environment it would get
  unit_exec.py is-active UNIT                             as `systemctl is-active UNIT`
  unit_exec.py list-units [--all --plain --no-legend --type=service] PATTERN
                                                          as `systemctl list-units ...` (those flags' format)
  unit_exec.py --node NODE ...                            the same for one emulated node of this machine
                                                          (inventories/gpu-4node): each node's units are
                                                          recorded apart, as each node's systemd would hold them

The last two answer for the units this script started (each start records the unit's name, main
PID and Description= in $UNIT_EXEC_STATE_DIR, default /run/llmfleet/units): a unit is active
while its main process lives. playbooks/validate.yml reads them through `validate_systemctl`
where the host has no systemd (tests/gpu/README.md): the state it reports is the real state of
the processes, from the supervisor that started them.

What systemd would do and this does too: the environment is built only from the unit's
EnvironmentFile= files in their order ("-" = may be missing) and Environment= lines, plus
HOME/USER/LOGNAME/SHELL of User= (the unit's own files win); ExecStart (continuation lines
joined) is split like systemd splits it (shell-like quoting) and runs as User=/Group= in
WorkingDirectory=, with LimitNOFILE=. What it does not do: sandboxing (Protect*=, PrivateTmp=),
Restart=, cgroups. From the caller it passes only PATH and the dynamic-loader/driver variables
(LD_LIBRARY_PATH, CUDA_*/NVIDIA_* set by the GPU image), listed in the log; the unit's files
override those too.
"""
from __future__ import annotations

import argparse
import fnmatch
import grp
import json
import os
import pwd
import resource
import shlex
import signal
import subprocess
import sys
import time

STATE_DIR = os.environ.get('UNIT_EXEC_STATE_DIR', '/run/llmfleet/units')
PASS_PREFIXES = ('CUDA_', 'NVIDIA_')
PASS_NAMES = ('PATH', 'LD_LIBRARY_PATH')


def unit_name(path):
    """llmfleet-ray for /x/llmfleet-ray.service (names may hold dots: llmfleet-serve-qwen3.5-122b)."""
    base = os.path.basename(path)
    return base[:-len('.service')] if base.endswith('.service') else base


def parse_unit(path):
    """Return {key: [values]} of the [Service] section, continuation lines joined."""
    return unit_section(path, 'Service')


def unit_section(path, want):
    """Return {key: [values]} of section ``want``, continuation lines joined."""
    section, out, pending = None, {}, ''
    with open(path) as f:
        lines = f.read().splitlines()
    for raw in lines:
        line = pending + raw.strip() if pending else raw.strip()
        pending = ''
        if not line or line.startswith(('#', ';')):
            continue
        if line.endswith('\\'):
            pending = line[:-1] + ' '
            continue
        if line.startswith('[') and line.endswith(']'):
            section = line[1:-1]
            continue
        if section != want or '=' not in line:
            continue
        key, value = line.split('=', 1)
        out.setdefault(key.strip(), []).append(value.strip())
    return out


def read_env_file(path):
    """systemd EnvironmentFile= syntax: KEY=VALUE lines, '#'/';' comments, shell-like quotes."""
    env = {}
    with open(path) as f:
        for raw in f.read().splitlines():
            line = raw.strip()
            if not line or line.startswith(('#', ';')) or '=' not in line:
                continue
            key, value = line.split('=', 1)
            parts = shlex.split(value) if value.strip() else ['']
            env[key.strip()] = ' '.join(parts)
    return env


def unit_env(unit, base=None):
    env = dict(base or {})
    user = (unit.get('User') or [''])[-1]
    if user:
        pw = pwd.getpwnam(user)
        env.update(HOME=pw.pw_dir, USER=user, LOGNAME=user, SHELL=pw.pw_shell)
    loaded = []
    for spec in unit.get('EnvironmentFile', []):
        optional = spec.startswith('-')
        path = spec.lstrip('-')
        if not os.path.exists(path):
            if optional:
                loaded.append({'file': path, 'loaded': False})
                continue
            raise SystemExit('unit needs %s, which is missing' % path)
        env.update(read_env_file(path))
        loaded.append({'file': path, 'loaded': True})
    for spec in unit.get('Environment', []):
        for item in shlex.split(spec):
            key, value = item.split('=', 1)
            env[key] = value
    return env, loaded


def caller_base_env():
    return {k: v for k, v in os.environ.items() if k in PASS_NAMES or k.startswith(PASS_PREFIXES)}


def start(args):
    unit = parse_unit(args.unit)
    base = caller_base_env()
    env, loaded = unit_env(unit, base)
    argv = shlex.split(unit['ExecStart'][-1])
    user = (unit.get('User') or [''])[-1]
    group = (unit.get('Group') or [''])[-1]
    workdir = (unit.get('WorkingDirectory') or ['/'])[-1]
    nofile = int((unit.get('LimitNOFILE') or ['0'])[-1] or 0)
    if args.as_root:
        user = group = ''
    uid = pwd.getpwnam(user).pw_uid if user else None
    gid = grp.getgrnam(group).gr_gid if group else None

    def preexec():
        os.setsid()
        if nofile:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
            except (ValueError, OSError):
                hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
                resource.setrlimit(resource.RLIMIT_NOFILE, (min(nofile, hard), hard))
        if gid is not None:
            os.setgroups([gid])
            os.setgid(gid)
        if uid is not None:
            os.setuid(uid)

    log = open(args.log, 'ab')
    record = {'unit': args.unit, 'argv': argv, 'user': user or 'root', 'workdir': workdir,
              'env_files': loaded, 'passed_from_caller': sorted(base), 'env': env,
              'started_at': time.time()}
    log.write(('# unit_exec: %s\n' % json.dumps(record, sort_keys=True)).encode())
    log.flush()
    proc = subprocess.Popen(argv, env=env, cwd=workdir, stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, preexec_fn=preexec, close_fds=True)
    with open(args.pidfile, 'w') as f:
        f.write(str(proc.pid))
    name = unit_name(args.unit)
    os.makedirs(state_dir(args.node), exist_ok=True)
    with open(os.path.join(state_dir(args.node), name + '.json'), 'w') as f:
        json.dump({'unit': name, 'file': os.path.abspath(args.unit), 'pid': proc.pid,
                   'description': (unit_section(args.unit, 'Unit').get('Description') or [''])[-1],
                   'started_at': record['started_at']}, f)
    print(json.dumps({'pid': proc.pid, 'argv': argv, 'user': record['user'],
                      'env_files': loaded}))


def stop(args):
    try:
        pid = int(open(args.pidfile).read().strip())
    except (IOError, ValueError):
        return
    for sig, wait in ((signal.SIGTERM, args.grace), (signal.SIGKILL, 5)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.time() + wait
        while time.time() < deadline:
            try:
                os.killpg(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.5)


def alive(pid):
    """True while process ``pid`` runs (a zombie counts as gone)."""
    try:
        with open('/proc/%d/stat' % int(pid)) as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except (OSError, ValueError, IndexError):
        return False


def state_dir(node=''):
    """Where the units of this machine (or of its emulated node ``node``) are recorded."""
    return os.path.join(STATE_DIR, 'nodes', node) if node else STATE_DIR


def unit_states(pattern='*', node=''):
    """[(name, active, sub, description)] of the units started here whose name matches ``pattern``."""
    out = []
    directory = state_dir(node)
    if not os.path.isdir(directory):
        return out
    for fname in sorted(os.listdir(directory)):
        if not fname.endswith('.json'):
            continue
        try:
            with open(os.path.join(directory, fname)) as f:
                rec = json.load(f)
        except (OSError, ValueError):
            continue
        name = rec.get('unit') or fname[:-5]
        if not (fnmatch.fnmatch(name, pattern) or fnmatch.fnmatch(name + '.service', pattern)):
            continue
        up = alive(rec.get('pid', 0))
        out.append((name, 'active' if up else 'inactive', 'running' if up else 'dead', rec.get('description') or ''))
    return out


def is_active(args):
    name = args.unit[:-len('.service')] if args.unit.endswith('.service') else args.unit
    states = [s for s in unit_states(name, args.node) if s[0] == name]
    state = states[0][1] if states else 'inactive'
    print(state)
    return 0 if state == 'active' else 3


def list_units(args):
    for name, active, sub, desc in unit_states(args.pattern or '*', args.node):
        print('%s.service loaded %s %s %s' % (name, active, sub, desc))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--node', default='', help='the emulated node whose units to start or report')
    sub = ap.add_subparsers(dest='cmd', required=True)
    s = sub.add_parser('start')
    s.add_argument('unit')
    s.add_argument('--log', required=True)
    s.add_argument('--pidfile', required=True)
    s.add_argument('--as-root', action='store_true', help='ignore User=/Group= (recorded in the log)')
    t = sub.add_parser('stop')
    t.add_argument('--pidfile', required=True)
    t.add_argument('--grace', type=float, default=20)
    e = sub.add_parser('env')
    e.add_argument('unit')
    a = sub.add_parser('is-active')
    a.add_argument('unit')
    lu = sub.add_parser('list-units')
    for flag in ('--all', '--plain', '--no-legend'):
        lu.add_argument(flag, action='store_true', help='accepted for systemctl compatibility')
    lu.add_argument('--type', default='service')
    lu.add_argument('pattern', nargs='?', default='*')
    args = ap.parse_args()
    if args.cmd == 'start':
        start(args)
    elif args.cmd == 'stop':
        stop(args)
    elif args.cmd == 'is-active':
        return is_active(args)
    elif args.cmd == 'list-units':
        return list_units(args)
    else:
        env, loaded = unit_env(parse_unit(args.unit), caller_base_env())
        print(json.dumps({'env': env, 'env_files': loaded}, indent=1, sort_keys=True))


if __name__ == '__main__':
    sys.exit(main())
