"""The firewall's address sets: peers and the API's default allow list."""
import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import firewall

SIM = [{'fabric_ip': '10.231.1.11', 'ansible_host': '10.231.0.11'},
       {'fabric_ip': '10.231.1.12', 'ansible_host': '10.231.0.12'}]


@pytest.mark.parametrize('nodes, expected', [
    (SIM, ['10.231.0.11', '10.231.0.12', '10.231.1.11', '10.231.1.12']),
    # one-host loopback inventory: no ansible_host, a 127.0.0.x fabric address
    ([{'fabric_ip': '127.0.0.2'}], ['127.0.0.2']),
    # hostnames and IPv6 are not nftables ipv4_addr elements
    ([{'fabric_ip': '10.0.0.1', 'ansible_host': 'spark1.lan'}, {'fabric_ip': 'fe80::1', 'ansible_host': '10.0.0.1'}],
     ['10.0.0.1']),
    ([], []),
])
def test_peer_addresses(nodes, expected):
    assert firewall.peer_addresses(nodes) == expected


@pytest.mark.parametrize('ssh_client, expected', [
    ('10.231.0.1 53422 22', '10.231.0.1'),
    ('', ''),
    (None, ''),
    ('::1 4242 22', ''),
])
def test_controller_address(ssh_client, expected):
    assert firewall.controller_address(ssh_client) == expected


@pytest.mark.parametrize('nodes, controller, prefix, extra, expected', [
    # adjacent networks collapse
    (SIM, '10.231.0.1', 24, [], ['10.231.0.0/23']),
    # a controller outside the node networks gets its own /32
    (SIM, '192.168.7.5', 24, [], ['10.231.0.0/23', '192.168.7.5/32']),
    (SIM, '', 32, ['172.16.0.0/12'], ['10.231.0.11/32', '10.231.0.12/32', '10.231.1.11/32', '10.231.1.12/32', '172.16.0.0/12']),
    ([{'fabric_ip': '127.0.0.2'}], '', 24, [], ['127.0.0.0/24']),
    ([], '', 24, ['0.0.0.0/0'], ['0.0.0.0/0']),
])
def test_api_allow(nodes, controller, prefix, extra, expected):
    assert firewall.api_allow(nodes, controller, prefix, extra) == expected


@pytest.mark.parametrize('extra, prefix, message', [
    (['not-a-net'], 24, "'not-a-net' is not an IPv4"),
    ([], 33, 'prefix 33'),
])
def test_api_allow_refuses_bad_input(extra, prefix, message):
    with pytest.raises(ValueError, match=message):
        firewall.api_allow(SIM, '', prefix, extra)
