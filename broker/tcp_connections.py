"""The established TCP connections to one local port, asked of the kernel
(``pulsar_active_connections``: gRPC does not tell a servicer when a client
connection opens or closes).

Theory of operation. The kernel's sock_diag netlink interface (what ``ss``
uses) is asked for TCP sockets in the ESTABLISHED state only, IPv4 and
IPv6; the port is compared here. Reading ``/proc/net/tcp`` instead makes
the kernel format a text line for every socket of the machine, TIME_WAIT
ones included: ~8 ms per scrape on these machines with a few hundred of
them, and it grows with them. Where netlink is not available (not Linux,
or a sandbox forbidding it) the /proc tables are read; where neither is,
the answer is empty. Only the broker listens on its port, so every
established socket with that local port is a client of the broker.
"""

from __future__ import annotations

import ipaddress
import socket
import struct

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_NLMSG_DONE, _NLMSG_ERROR = 3, 2
_TCP_ESTABLISHED = 1
_NLMSG = struct.Struct("=IHHII")  # len, type, flags, seq, pid
# inet_diag_req_v2: family, protocol, ext, pad, states, then inet_diag_sockid
# (sport, dport big-endian, src[4], dst[4], interface, cookie[2]).
_REQ = struct.Struct("=BBBBI")
_SOCKID = struct.Struct(">HH16s16s")
_SOCKID_TAIL = struct.Struct("=III")
# inet_diag_msg: family, state, timer, retrans, then the sock id.
_MSG_HEAD = struct.Struct("=BBBB")
_MAX_MESSAGES = 1_000_000  # a bound on what one dump may return


def established_peers(port: int) -> set[str]:
    """``address:port`` of each remote end of an established connection to local ``port``."""
    try:
        return _netlink(port)
    except OSError:
        return _proc(port)


def _request(family: int) -> bytes:
    body = (
        _REQ.pack(family, socket.IPPROTO_TCP, 0, 0, 1 << _TCP_ESTABLISHED)
        + _SOCKID.pack(0, 0, bytes(16), bytes(16))
        + _SOCKID_TAIL.pack(0, 0xFFFFFFFF, 0xFFFFFFFF)
    )
    header = _NLMSG.pack(
        _NLMSG.size + len(body), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST | _NLM_F_DUMP, 1, 0
    )
    return header + body


def _netlink(port: int) -> set[str]:
    peers: set[str] = set()
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _NETLINK_SOCK_DIAG) as s:
        s.settimeout(2.0)
        for family in (socket.AF_INET, socket.AF_INET6):
            s.send(_request(family))
            _read_dump(s, family, port, peers)
    return peers


def _read_dump(s: socket.socket, family: int, port: int, peers: set[str]) -> None:
    seen = 0
    while seen < _MAX_MESSAGES:
        data = s.recv(1 << 16)
        offset = 0
        while offset + _NLMSG.size <= len(data):
            length, kind, _, _, _ = _NLMSG.unpack_from(data, offset)
            if kind == _NLMSG_DONE:
                return
            if kind == _NLMSG_ERROR or length < _NLMSG.size:
                raise OSError("sock_diag refused the dump")
            body = offset + _NLMSG.size
            sport, dport, _, dst = _SOCKID.unpack_from(data, body + _MSG_HEAD.size)
            if sport == port:
                size = 4 if family == socket.AF_INET else 16
                peers.add(f"{ipaddress.ip_address(dst[:size])}:{dport}")
            offset += (length + 3) & ~3
            seen += 1


_PROC_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
_PROC_ESTABLISHED = "01"


def _proc(port: int) -> set[str]:
    suffix = f":{port:04X}"
    peers: set[str] = set()
    for table in _PROC_TABLES:
        try:
            with open(table) as f:
                lines = f.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split(None, 4)
            if len(fields) > 3 and fields[3] == _PROC_ESTABLISHED and fields[1].endswith(suffix):
                peers.add(fields[2])
    return peers
