"""module_utils/_tool_path.find_tool: the option's path when it is an executable file, else PATH."""
import os

from ansible_collections.llmfleet.cluster.plugins.module_utils._tool_path import find_tool


class Module:
    def __init__(self, **params):
        self.params = params
        self.warnings = []
        self.looked_up = []

    def warn(self, msg):
        self.warnings.append(msg)

    def get_bin_path(self, name, opt_dirs=None):
        self.looked_up.append((name, opt_dirs))
        return '/usr/bin/' + name


def test_an_executable_option_path_wins(tmp_path):
    tool = tmp_path / 'nvidia-smi'
    tool.write_text('#!/bin/sh\n')
    os.chmod(tool, 0o755)
    m = Module(nvidia_smi_path=str(tool))
    assert find_tool(m, 'nvidia_smi_path', 'nvidia-smi', 'reporting no GPU') == str(tool)
    assert m.warnings == [] and m.looked_up == []


def test_a_path_that_is_not_executable_warns_and_finds_nothing(tmp_path):
    tool = tmp_path / 'ibdev2netdev'
    tool.write_text('not a program')
    m = Module(ibdev2netdev_path=str(tool))
    assert find_tool(m, 'ibdev2netdev_path', 'ibdev2netdev', 'reading sysfs') is None
    assert m.warnings == ['ibdev2netdev_path %s does not exist or is not executable; reading sysfs' % tool]
    assert m.looked_up == []


def test_without_the_option_the_tool_is_looked_up_on_path_and_the_extra_dirs():
    m = Module(ibdev2netdev_path=None)
    assert find_tool(m, 'ibdev2netdev_path', 'ibdev2netdev', 'reading sysfs', ['/sbin']) == '/usr/bin/ibdev2netdev'
    assert m.looked_up == [('ibdev2netdev', ['/sbin'])]
