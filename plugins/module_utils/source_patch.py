# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Source patches on an installed Python package's files: data, state, apply, revert. Pure.

A patch is data (roles/engine_patches/files/patches/<id>/patch.yml): a list of exact ``find`` /
``replace`` blocks for one file, optionally the sha256 of every original file it was written
for. Every ``replace`` carries the marker comment ``llmfleet-patch: <id>``.

The state of a file is read from its content alone:

- ``unpatched``: every ``find`` occurs exactly once and no ``replace`` does (and, when the patch
  lists ``original_sha256``, the file is one of those originals);
- ``patched``: every ``replace`` occurs exactly once and no ``find`` does (and putting the
  ``find`` blocks back gives one of the listed originals);
- ``foreign``: anything else (another version of the package, a hand edit, half a patch). The
  module refuses to touch such a file.

Applying and reverting splice the blocks at their positions, so revert gives back the original
byte for byte. Also: PEP 440 version ranges (``>=0.17,<0.19``) and dist-info metadata.
"""
import hashlib
import re

MARKER_PREFIX = 'llmfleet-patch: '

# Keys a patch.yml may carry. The role reads package/version_spec/archs/variants/file; this module
# reads id/marker/hunks/original_sha256/known_versions/needed_for; the rest documents the patch.
# needed_for: the versions whose published build has the fault the patch works around (measured,
# e.g. with tools/fatbin_arches.py); a version there but outside version_spec is a gap, not a skip.
PATCH_KEYS = frozenset([
    'id', 'package', 'version_spec', 'archs', 'variants', 'file', 'description', 'source', 'why',
    'original_sha256', 'known_versions', 'marker', 'hunks', 'needed_for', 'needed_for_evidence',
])
HUNK_KEYS = frozenset(['name', 'find', 'replace'])

_ID = re.compile(r'^[a-z0-9][a-z0-9._-]*$')
_SHA256 = re.compile(r'^[0-9a-f]{64}$')


class PatchError(Exception):
    """Invalid patch data, or a text the patch cannot be applied to / reverted from."""


def sha256_hex(data):
    """sha256 of bytes (text is UTF-8 encoded first)."""
    if not isinstance(data, bytes):
        data = data.encode('utf-8')
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- patch data

def _as_list(value, what):
    if value is None:
        return []
    if isinstance(value, (str, bytes)):
        return [value]
    if not isinstance(value, (list, tuple)):
        raise PatchError('%s must be a list, got %s' % (what, type(value).__name__))
    return list(value)


def load_patch(data):
    """Validate patch data (the parsed patch.yml); returns a normalised copy.

    Raises PatchError naming the problem. Checks that each block can be told apart in both
    directions: ``find`` and ``replace`` are non-empty, neither contains the other, every
    ``replace`` carries the marker and no ``find`` does.
    """
    if not isinstance(data, dict):
        raise PatchError('patch data must be a mapping, got %s' % type(data).__name__)
    unknown = sorted(set(data) - PATCH_KEYS)
    if unknown:
        raise PatchError('patch data has unknown keys: %s (known: %s)'
                         % (', '.join(unknown), ', '.join(sorted(PATCH_KEYS))))
    pid = data.get('id')
    if not isinstance(pid, str) or not _ID.match(pid):
        raise PatchError('patch id must be a lower-case name ([a-z0-9._-]), got %r' % (pid,))
    marker = data.get('marker') or MARKER_PREFIX + pid
    if not isinstance(marker, str) or not marker.strip():
        raise PatchError('patch %s: marker must be a non-empty string' % pid)

    raw_hunks = data.get('hunks')
    if not isinstance(raw_hunks, list) or not raw_hunks:
        raise PatchError('patch %s: hunks must be a non-empty list of {find, replace}' % pid)
    hunks = []
    for index, raw in enumerate(raw_hunks, 1):
        if not isinstance(raw, dict):
            raise PatchError('patch %s: hunk %d must be a mapping' % (pid, index))
        unknown = sorted(set(raw) - HUNK_KEYS)
        if unknown:
            raise PatchError('patch %s: hunk %d has unknown keys: %s' % (pid, index, ', '.join(unknown)))
        name = str(raw.get('name') or 'hunk %d' % index)
        find, replace = raw.get('find'), raw.get('replace')
        for key, value in (('find', find), ('replace', replace)):
            if not isinstance(value, str) or not value:
                raise PatchError('patch %s: %s: %s must be a non-empty string' % (pid, name, key))
        if find in replace or replace in find:
            raise PatchError('patch %s: %s: find and replace must not contain each other '
                             '(the state could not be read back)' % (pid, name))
        if find.endswith('\n') != replace.endswith('\n'):
            # a newline lost on one side glues the next source line onto the last replaced one
            # (seen: Ansible's file lookup strips a patch file's final newline by default)
            raise PatchError('patch %s: %s: find and replace must both end with a newline or both not '
                             '(find %s, replace %s)' % (pid, name, 'does' if find.endswith('\n') else 'does not',
                                                        'does' if replace.endswith('\n') else 'does not'))
        if marker not in replace:
            raise PatchError('patch %s: %s: replace must carry the marker %r' % (pid, name, marker))
        if marker in find:
            raise PatchError('patch %s: %s: find must not carry the marker %r' % (pid, name, marker))
        hunks.append({'name': name, 'find': find, 'replace': replace})
    names = [h['name'] for h in hunks]
    if len(set(names)) != len(names):
        raise PatchError('patch %s: hunk names must be unique' % pid)

    shas = [str(s).strip().lower() for s in _as_list(data.get('original_sha256'), 'original_sha256')]
    bad = [s for s in shas if not _SHA256.match(s)]
    if bad:
        raise PatchError('patch %s: original_sha256 entries must be 64 hex digits: %s'
                         % (pid, ', '.join(bad)))
    known = [str(v) for v in _as_list(data.get('known_versions'), 'known_versions')]
    return {
        'id': pid,
        'marker': marker,
        'hunks': hunks,
        'original_sha256': shas,
        'known_versions': known,
    }


# --------------------------------------------------------------------------- state

def _hunk_state(text, hunk):
    n_find, n_replace = text.count(hunk['find']), text.count(hunk['replace'])
    if n_find == 1 and n_replace == 0:
        return 'unpatched', None
    if n_find == 0 and n_replace == 1:
        return 'patched', None
    if n_find == 0 and n_replace == 0:
        return 'missing', 'block %s is not in the file' % hunk['name']
    return 'ambiguous', ('block %s occurs %d times (original) and %d times (patched)'
                         % (hunk['name'], n_find, n_replace))


def _splice(text, hunks, src, dst):
    """Replace every ``hunk[src]`` (each present once) by ``hunk[dst]``; None if blocks overlap."""
    spans = sorted((text.index(h[src]), h) for h in hunks)
    out, pos = [], 0
    for start, hunk in spans:
        if start < pos:
            return None
        out.append(text[pos:start])
        out.append(hunk[dst])
        pos = start + len(hunk[src])
    out.append(text[pos:])
    return ''.join(out)


def inspect(text, patch):
    """Read the state of ``text`` (str) for ``patch`` (from load_patch).

    Returns ``{state, original, reasons, has_marker}``: state ``unpatched`` | ``patched`` |
    ``foreign``; ``original`` the unpatched text (None when foreign); ``reasons`` why a file is
    foreign (one line each).
    """
    has_marker = patch['marker'] in text
    states = [_hunk_state(text, h) for h in patch['hunks']]
    kinds = set(item[0] for item in states)
    result = {'state': 'foreign', 'original': None, 'reasons': [], 'has_marker': has_marker}
    if kinds == set(['unpatched']):
        original = text
        state = 'unpatched'
        if _splice(text, patch['hunks'], 'find', 'replace') is None:
            result['reasons'].append('blocks overlap in the file')
            return result
    elif kinds == set(['patched']):
        original = _splice(text, patch['hunks'], 'replace', 'find')
        state = 'patched'
        if original is None:
            result['reasons'].append('patched blocks overlap in the file')
            return result
    else:
        for (kind, reason), hunk in zip(states, patch['hunks']):
            if reason:
                result['reasons'].append(reason)
            elif kinds - set([kind]):
                result['reasons'].append('block %s is %s' % (hunk['name'], kind))
        return result
    if patch['original_sha256']:
        digest = sha256_hex(original)
        if digest not in patch['original_sha256']:
            result['reasons'].append(
                '%s has sha256 %s, the patch was written for %s'
                % ('the file' if state == 'unpatched' else 'the file with the patch taken out',
                   digest, ' or '.join(patch['original_sha256'])))
            return result
    result.update(state=state, original=original)
    return result


def _inspect_expecting(text, patch, state, verb):
    """inspect(text, patch) when the file is in ``state``; else PatchError saying why ``verb`` cannot
    be done (apply needs an unpatched file, revert a patched one)."""
    info = inspect(text, patch)
    if info['state'] != state:
        raise PatchError('cannot %s %s: the file is %s (%s)'
                         % (verb, patch['id'], info['state'], '; '.join(info['reasons']) or 'no reason'))
    return info


def apply(text, patch):
    """The patched text of an unpatched ``text``; PatchError otherwise."""
    _inspect_expecting(text, patch, 'unpatched', 'apply')
    new = _splice(text, patch['hunks'], 'find', 'replace')
    check = inspect(new, patch)
    if check['state'] != 'patched' or check['original'] != text:
        raise PatchError('patch %s is inconsistent: its result does not read back as patched (%s)'
                         % (patch['id'], '; '.join(check['reasons'])))
    return new


def revert(text, patch):
    """The original text of a patched ``text``; PatchError otherwise."""
    return _inspect_expecting(text, patch, 'patched', 'revert')['original']


def plan(text, patch, state='present'):
    """What to do with ``text`` for the wanted ``state`` (present | absent).

    Returns ``{status, changed, after, info}``: status ``applied`` | ``already_applied`` |
    ``reverted`` | ``not_applied`` | ``foreign``; ``after`` the text to write (the same text
    when nothing changes or the file is foreign).
    """
    info = inspect(text, patch)
    if info['state'] == 'foreign':
        return {'status': 'foreign', 'changed': False, 'after': text, 'info': info}
    if state == 'present':
        if info['state'] == 'patched':
            return {'status': 'already_applied', 'changed': False, 'after': text, 'info': info}
        return {'status': 'applied', 'changed': True, 'after': apply(text, patch), 'info': info}
    if state != 'absent':
        raise PatchError('state must be present or absent, got %r' % (state,))
    if info['state'] == 'patched':
        return {'status': 'reverted', 'changed': True, 'after': info['original'], 'info': info}
    return {'status': 'not_applied', 'changed': False, 'after': text, 'info': info}


def desired_states(patches, enabled, arch, family, state='present'):
    """Each managed patch with the state a host wants it in: ``[(patch, 'present'|'absent')]``, by id.

    ``patches`` is {id: parsed patch.yml} of every patch the role manages (enabled or not);
    ``enabled`` the ids the inventory enables. A patch is present where it is enabled and either its
    ``archs`` name the host's GPU ``arch`` or its ``variants`` name the ``family`` of the host's
    python_env variant (the file name up to the first ``-``: ``cpu`` for ``cpu-vllm-0.31.0``); every
    other patch is absent, so one taken out of the list is reverted where a node still has it.
    ``state='absent'`` wants every patch absent.
    """
    out = []
    for pid in sorted(patches):
        data = patches[pid] or {}
        wanted = (state == 'present' and pid in enabled
                  and (arch in (data.get('archs') or []) or family in (data.get('variants') or [])))
        out.append((data, 'present' if wanted else 'absent'))
    return out


def mismatch_message(host, package, version, path, patch, reasons, has_marker=False):
    """The error for a file the patch does not fit: who, what, why, and the two ways out."""
    known = ', '.join(patch.get('known_versions') or []) or 'the version it was written for'
    lines = [
        '%s: patch %s does not fit %s %s: %s is not what the patch expects (%s).'
        % (host, patch['id'], package, version, path, '; '.join(reasons) or 'unknown difference'),
    ]
    if has_marker:
        lines.append('The file carries the marker %r but is not the patched form: it was edited '
                     'after patching. Reinstall %s %s (re-run the python_env role) and apply again.'
                     % (patch['marker'], package, version))
    lines.append('%s %s changed this file: update the patch %s for %s %s (its hunks and '
                 'original_sha256), or pin %s to a version the patch knows (%s).'
                 % (package, version, patch['id'], package, version, package, known))
    return ' '.join(lines)


# --------------------------------------------------------------------------- versions (PEP 440)

_VERSION = re.compile(
    r'^v?(?:(?P<epoch>\d+)!)?(?P<release>\d+(?:\.\d+)*)'
    r'(?:[-_.]?(?P<pre_l>a|alpha|b|beta|c|rc|pre|preview)[-_.]?(?P<pre_n>\d*))?'
    r'(?:-(?P<post_n1>\d+)|[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>\d*))?'
    r'(?:[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>\d*))?'
    r'(?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?$', re.IGNORECASE)
_PRE_RANK = {'a': 0, 'alpha': 0, 'b': 1, 'beta': 1, 'c': 2, 'rc': 2, 'pre': 2, 'preview': 2}
_SPEC = re.compile(r'^(===|==|!=|~=|>=|<=|>|<)\s*(\S+)$')


def parse_version(text):
    """PEP 440 version → dict(release, key, pre, post, local); PatchError when not a version."""
    match = _VERSION.match(str(text).strip())
    if not match:
        raise PatchError('not a PEP 440 version: %r' % (text,))
    g = match.groupdict()
    release = tuple(int(p) for p in g['release'].split('.'))
    trimmed = release
    while len(trimmed) > 1 and trimmed[-1] == 0:
        trimmed = trimmed[:-1]
    pre = (_PRE_RANK[g['pre_l'].lower()], int(g['pre_n'] or 0)) if g['pre_l'] else None
    post_n = g['post_n1'] if g['post_n1'] is not None else g['post_n2']
    post = int(post_n or 0) if (g['post_l'] or g['post_n1'] is not None) else None
    dev = int(g['dev_n'] or 0) if g['dev_l'] else None
    if pre is not None:
        pre_key = (1,) + pre
    elif dev is not None and post is None:
        pre_key = (0,)          # 1.0.dev0 sorts before 1.0a1
    else:
        pre_key = (2,)
    post_key = (0,) if post is None else (1, post)
    dev_key = (1,) if dev is None else (0, dev)
    key = (int(g['epoch'] or 0), trimmed, pre_key, post_key, dev_key)
    return {'release': release, 'key': key, 'pre': pre is not None or dev is not None,
            'post': post is not None, 'local': g['local']}


def parse_spec(spec):
    """``'>=0.17,<0.19'`` → ``[('>=', '0.17'), ('<', '0.19')]``; empty spec → []."""
    out = []
    for part in str(spec or '').split(','):
        part = part.strip()
        if not part:
            continue
        match = _SPEC.match(part)
        if not match:
            raise PatchError('not a version specifier: %r (use e.g. ">=0.17,<0.19")' % part)
        op, ver = match.groups()
        if ver.endswith('.*'):
            if op not in ('==', '!='):
                raise PatchError('a .* version is only allowed with == and !=: %r' % part)
            parse_version(ver[:-2])
        elif op != '===':
            parse_version(ver)
        out.append((op, ver))
    return out


def _prefix_match(version, release):
    have = version['release'] + (0,) * max(0, len(release) - len(version['release']))
    return have[:len(release)] == release


def _clause(version, op, ver):
    """One specifier clause against a parsed installed version."""
    if op == '===':
        return version['text'] == ver
    if ver.endswith('.*'):
        hit = _prefix_match(version, parse_version(ver[:-2])['release'])
        return hit if op == '==' else not hit
    other = parse_version(ver)
    have, want = version['key'], other['key']
    same_release = have[:2] == want[:2]
    if op == '==':
        return have == want and (other['local'] is None or version['local'] == other['local'])
    if op == '!=':
        return not _clause(version, '==', ver)
    if op == '>=':
        return have >= want
    if op == '<=':
        return have <= want
    if op == '<':
        # <V does not admit V's own pre-releases (unless V is one)
        return have < want and not (version['pre'] and not other['pre'] and same_release)
    if op == '>':
        # >V does not admit V's post-releases (unless V is one)
        return have > want and not (version['post'] and not other['post'] and same_release)
    # ~=X.Y.Z is >=X.Y.Z together with ==X.Y.*
    if len(other['release']) < 2:
        raise PatchError('~= needs at least two version parts: %r' % ver)
    return have >= want and _prefix_match(version, other['release'][:-1])


def version_matches(version, spec):
    """True when ``version`` (text) satisfies every clause of ``spec`` (PEP 440, AND-ed).

    Installed versions are checked as they are: pre-releases are not excluded by default. A
    local label (``0.18.1+cu130``) is ignored unless the clause names one.
    """
    parsed = parse_version(version)
    parsed['text'] = str(version).strip()
    return all(_clause(parsed, op, ver) for op, ver in parse_spec(spec))


def coverage_gap(patch, version):
    """The error when ``version`` of the patch's package needs the patch (``needed_for``) but the
    patch was not written for it (outside ``version_spec``); None when covered or not needed."""
    needed = patch.get('needed_for') or ''
    if not needed or not version_matches(version, needed):
        return None
    if version_matches(version, patch.get('version_spec') or ''):
        return None
    return ('%s %s needs patch %s (%s) but the patch covers only %s: pin a %s version inside %s or '
            'outside %s, or extend the patch to %s\'s %s (a new hunk set and original_sha256)'
            % (patch.get('package'), version, patch.get('id'), patch.get('needed_for_evidence') or 'needed_for '
               + needed, patch.get('version_spec'), patch.get('package'), patch.get('version_spec'), needed, version,
               patch.get('file')))


# --------------------------------------------------------------------------- dist-info

def canonical(name):
    """PEP 503 normalised project name."""
    return re.sub(r'[-_.]+', '-', str(name)).lower()


def dist_info_candidates(names, package):
    """Entries of a site-packages listing that may be ``package``'s ``*.dist-info`` directory."""
    want = canonical(package)
    out = []
    for name in names:
        if name.endswith('.dist-info') and canonical(name[:-len('.dist-info')].split('-', 1)[0]) == want:
            out.append(name)
    return sorted(out)


def metadata_name_version(text):
    """``(Name, Version)`` from a METADATA / PKG-INFO text (its header block); None when absent."""
    name = version = None
    for line in (text or '').splitlines():
        if not line.strip():
            break
        key, sep, value = line.partition(':')
        if not sep:
            continue
        key = key.strip().lower()
        if key == 'name' and name is None:
            name = value.strip()
        elif key == 'version' and version is None:
            version = value.strip()
    return name, version
