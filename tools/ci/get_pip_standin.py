# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Stand-in for pip's get-pip.py, used only by ansible-test's venv bootstrap.

ansible-test downloads get-pip.py from ci-files.testing.ansible.com, which this network cannot
reach (only package registries are). This script does the same job from what is here: the
interpreter's own ensurepip, then pip itself upgraded to the requested version from PyPI.
`make sanity` installs it at the cache path ansible-test looks at first.
"""
import subprocess
import sys

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"], stdout=subprocess.DEVNULL)
subprocess.check_call([sys.executable, "-m", "pip", "install"] + args)
