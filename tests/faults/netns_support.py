"""Hosts on one machine for the across-hosts tests (issue 37.4): network namespaces and veth.

A hub bridge in the root namespace holds the platform's address (server, Redis, and the test
process); each worker "host" is a network namespace of its own with one veth leg on that
bridge and its own address. A partition is the host's leg taken down (`cut`/`restore`), not a
kill: its processes keep running and lose the network; a broker partition drops only the
broker's port from that host (`block_port`). Names carry a random tag (interfaces: at most 15
characters) and `Hosts.remove` deletes everything, also after a failure.

Needs iproute2, iptables and CAP_NET_ADMIN (root on this machine); `require_netns` skips outside
CI with the reason and fails in CI. Docker sandboxes still run from a host: the engine is
reached through /var/run/docker.sock, a file, not the network.
"""

from __future__ import annotations

import os
import random
import secrets
import shutil
import subprocess
from dataclasses import dataclass, field

from arena_test_services import require_service

TCP_BACKOFF = ("net.ipv4.tcp_rto_max_ms=4000", "net.ipv4.tcp_retries2=255")
"""Each host's TCP retransmission back-off, capped at 4 s (per namespace): a connection whose
packets were dropped resumes within 4 s of the drop ending, not after TCP's doubling back-off
(RTO up to 120 s: the shared worker's broker connection resumed 44 s after a 68 s port block
at load 35, and the queued run waited for it). Not a shorter connection life: 255 retries at
<= 4 s keep a stalled connection ~1,000 s, as the default 15 at <= 120 s (~925 s) do, so a
block still stalls the connection rather than resetting it. Kernels without the setting keep
the default back-off (the tests only wait longer)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def require_netns() -> None:
    """Skip (outside CI) or fail (in CI) unless this process may make namespaces and veth."""
    for tool in ("ip", "iptables", "nsenter"):
        if shutil.which(tool) is None:
            require_service("network namespaces", f"`{tool}` is not installed (apt-get install "
                            "iproute2 iptables util-linux; scripts/services.sh does)")
    probe = f"arena-probe-{secrets.token_hex(3)}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        require_service("network namespaces", f"`ip netns add` failed ({made.stderr.strip()}): "
                        "this needs CAP_NET_ADMIN (root on a VM or a privileged container; a "
                        "plain Docker container lacks it)")
    _ip("netns", "del", probe, check=False)


@dataclass
class Host:
    """One worker host: its namespace, address and the root side of its link."""

    name: str
    netns: str
    address: str
    link: str
    """The veth leg on the hub (root namespace): down = partitioned."""

    def command(self, *argv: str) -> list[str]:
        """`argv` run inside this host's network namespace, and only that (same pid: nsenter
        execs). Not `ip netns exec`: it also makes a mount namespace of its own, where the
        worker's mounts under its run folders (the sandbox's output filesystem) would be
        invisible to the Docker engine that bind-mounts them into the sandbox."""
        return ["nsenter", f"--net=/run/netns/{self.netns}", "--", *argv]

    def cut(self) -> None:
        _ip("link", "set", self.link, "down")

    def restore(self) -> None:
        _ip("link", "set", self.link, "up")

    def block_port(self, address: str, port: int) -> None:
        """Drop this host's packets to `address:port` (only that port; the rest still flows)."""
        subprocess.run(self.command("iptables", "-A", "OUTPUT", "-p", "tcp", "-d", address,
                                    "--dport", str(port), "-j", "DROP"), check=True)

    def unblock_port(self, address: str, port: int) -> None:
        subprocess.run(self.command("iptables", "-D", "OUTPUT", "-p", "tcp", "-d", address,
                                    "--dport", str(port), "-j", "DROP"), check=True)


@dataclass
class Hosts:
    """A hub bridge with the platform's address and worker hosts around it."""

    tag: str = field(default_factory=lambda: secrets.token_hex(3))
    subnet: str = field(default_factory=lambda: f"10.{random.randint(100, 250)}."
                                                f"{random.randint(0, 254)}")
    hosts: dict[str, Host] = field(default_factory=dict)
    _made: list[list[str]] = field(default_factory=list)

    @property
    def bridge(self) -> str:
        return f"arb{self.tag}"

    @property
    def hub_address(self) -> str:
        return f"{self.subnet}.1"

    def create_hub(self) -> None:
        _ip("link", "add", self.bridge, "type", "bridge")
        self._made.append(["link", "del", self.bridge])
        _ip("addr", "add", f"{self.hub_address}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        # Bridged frames must not go through the host's iptables (Docker sets FORWARD to DROP).
        if os.path.exists("/proc/sys/net/bridge/bridge-nf-call-iptables"):
            for rule in (["-i", self.bridge], ["-o", self.bridge]):
                subprocess.run(["iptables", "-I", "FORWARD", *rule, "-j", "ACCEPT"], check=True)
                self._made.append(["iptables", "-D", "FORWARD", *rule, "-j", "ACCEPT"])

    def add_host(self, name: str) -> Host:
        index = len(self.hosts) + 2
        host = Host(name=name, netns=f"arena-{self.tag}-{name}",
                    address=f"{self.subnet}.{index}", link=f"arv{self.tag}{index}")
        peer = f"arp{self.tag}{index}"
        _ip("netns", "add", host.netns)
        self._made.append(["netns", "del", host.netns])
        _ip("link", "add", host.link, "type", "veth", "peer", "name", peer)
        self._made.append(["link", "del", host.link])
        _ip("link", "set", peer, "netns", host.netns)
        _ip("link", "set", host.link, "master", self.bridge)
        _ip("link", "set", host.link, "up")
        inside = ["ip", "netns", "exec", host.netns, "ip"]
        for args in (["addr", "add", f"{host.address}/24", "dev", peer],
                     ["link", "set", peer, "up"], ["link", "set", "lo", "up"]):
            subprocess.run([*inside, *args], check=True, capture_output=True)
        if os.path.exists("/proc/sys/net/ipv4/tcp_rto_max_ms"):  # Linux 6.15 and later
            # best effort: where /proc/sys is read-only (a container may make namespaces and
            # still not write sysctls), the connection resumes after TCP's own back-off
            subprocess.run(["ip", "netns", "exec", host.netns, "sysctl", "-q", "-w",
                            *TCP_BACKOFF], check=False, capture_output=True)
        self.hosts[name] = host
        return host

    def remove(self) -> None:
        """Delete every namespace, link and rule made (in reverse), ignoring what is gone."""
        for undo in reversed(self._made):
            if undo[0] == "iptables":
                subprocess.run(undo, capture_output=True, check=False)
            else:
                _ip(*undo, check=False)
        self._made.clear()


def leftovers(tag: str) -> list[str]:
    """Namespaces and links of this tag still present (none after `remove`)."""
    names = _ip("netns", "list", check=False).stdout + _ip("link", "show", check=False).stdout
    return [line for line in names.splitlines() if tag in line]
