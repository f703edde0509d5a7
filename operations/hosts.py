"""Simulated hosts on one machine: each a Linux network namespace with its own address on a private
bridge, plus a mount namespace with its own ``/tmp`` and its own home directory, so no host sees
another's files or reaches another's loopback. What hosts share is what an image would give them:
the project tree (with its virtualenvs and JVM jars), mounted read-only.

Layout (``tag`` is random per run, so two runs never collide)::

    netns rs<tag>sw      the switch: bridge br0, no address, no route
    netns rs<tag>h<i>    host i: eth0 = 198.18.0.<10+i>/24 (the benchmarking range, RFC 2544), lo; no
                         default route, no NAT: traffic cannot leave the namespaces this made
    holder process       per host: ``unshare --mount`` inside the host's netns; empty tmpfs on /tmp
                         and on the hosts' base directory, with only the host's own directory
                         bound back at its path (so a path means the same inside and outside, and
                         no host sees another's); the project tree bound read-only; every command
                         of the host runs in its namespaces (``nsenter``)

:meth:`SimulatedHosts.kill_host` is a machine dying: SIGKILL to every process in the host's network
namespace at once, then the namespace is torn down; :meth:`SimulatedHosts.start_host` brings it back
with the same address and directory (its disk survives, its /tmp does not). :meth:`SimulatedHosts.down`
removes everything, also after a failure (a context manager). Needs root (``ip netns``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from radstack.process_state import pid_alive, spawn_group

#: the address range the hosts live in: 198.18.0.0/15 is reserved for benchmarking networks
SUBNET_PREFIX = "198.18.0."
PREFIX_LEN = 24
#: mount points the hosts' directories pass through while a host is made (outside every host's tmpfs)
STAGE_DIR = Path("/run/radstack-hosts")
REPO = Path(__file__).resolve().parent.parent


class HostsError(RuntimeError):
    """A simulated host could not be made, entered or removed."""


def _ip(*args: str) -> str:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise HostsError(f"ip {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def _netns_inode(name: str) -> int | None:
    try:
        return os.stat(f"/run/netns/{name}").st_ino
    except OSError:
        return None


def processes_in_netns(name: str) -> list[int]:
    """Every process whose network namespace is ``name``."""
    inode = _netns_inode(name)
    if inode is None:
        return []
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if os.stat(d / "ns" / "net").st_ino == inode:
                    out.append(int(d.name))
            except OSError:
                continue
    return out


class RunningProcess:
    """A process this one did not start (a host's holder, read back from a state file): ``pid``,
    ``poll()`` and ``wait()`` as on a ``Popen``."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def poll(self) -> int | None:
        return None if pid_alive(self.pid) else 0

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while pid_alive(self.pid):
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0)
            time.sleep(0.05)
        return 0


@dataclass
class SimulatedHosts:
    """``count`` hosts, host 1 … count; their directories under ``base_dir/h<i>``."""

    count: int
    base_dir: Path
    tag: str = field(default_factory=lambda: secrets.token_hex(3))
    holders: dict[int, subprocess.Popen[bytes] | RunningProcess] = field(default_factory=dict, repr=False)

    def to_state(self) -> dict[str, object]:
        """What another process needs to run commands on these hosts, kill them and remove them."""
        return {"count": self.count, "base_dir": str(self.base_dir), "tag": self.tag,
                "holders": {str(h): p.pid for h, p in self.holders.items()},
                "addresses": {str(h): self.address(h) for h in range(1, self.count + 1)}}  # fmt: skip

    @classmethod
    def from_state(cls, state: dict[str, object]) -> SimulatedHosts:
        holders = state.get("holders") or {}
        assert isinstance(holders, dict)
        return cls(int(str(state["count"])), Path(str(state["base_dir"])), str(state["tag"]),
                   {int(h): RunningProcess(int(pid)) for h, pid in holders.items()})  # fmt: skip

    def host_running(self, host: int) -> bool:
        holder = self.holders.get(host)
        return holder is not None and holder.poll() is None and _netns_inode(self.netns(host)) is not None

    @property
    def switch(self) -> str:
        return f"rs{self.tag}sw"

    def netns(self, host: int) -> str:
        return f"rs{self.tag}h{host}"

    def address(self, host: int) -> str:
        return f"{SUBNET_PREFIX}{10 + host}"

    def host_dir(self, host: int) -> Path:
        return self.base_dir / f"h{host}"

    # ---------------------------------------------------------------- lifecycle
    def up(self) -> SimulatedHosts:
        try:
            _ip("netns", "add", self.switch)
            _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.switch, "link", "set", "br0", "up")
            for host in range(1, self.count + 1):
                self.start_host(host)
        except BaseException:
            self.down()
            raise
        return self

    def start_host(self, host: int) -> None:
        """Make host ``host`` (again): its namespace, link, address and mount namespace."""
        ns, near, far = self.netns(host), f"rs{self.tag}h{host}a", f"rs{self.tag}h{host}b"
        _ip("netns", "add", ns)
        _ip("link", "add", near, "type", "veth", "peer", "name", far)
        _ip("link", "set", near, "netns", ns)
        _ip("link", "set", far, "netns", self.switch)
        _ip("-n", ns, "link", "set", near, "name", "eth0")
        _ip("-n", ns, "addr", "add", f"{self.address(host)}/{PREFIX_LEN}", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", self.switch, "link", "set", far, "master", "br0")
        _ip("-n", self.switch, "link", "set", far, "up")
        home = self.host_dir(host)
        home.mkdir(parents=True, exist_ok=True)
        # radstack writes 0700 (radstack/private_files.py); a host's directory must still let the other
        # users a host runs (postgres) pass through to their own directories: traverse only, no listing
        os.chmod(home, 0o711)
        stage, image = STAGE_DIR / f"{self.tag}-h{host}", STAGE_DIR / f"{self.tag}-h{host}-image"
        stage.mkdir(parents=True, exist_ok=True)
        image.mkdir(parents=True, exist_ok=True)
        # the host's directory and the project tree are bound aside first (either may sit under the
        # machine's /tmp), then /tmp and the hosts' base directory are covered by empty tmpfs mounts and
        # both are bound back at their paths: paths are the same inside and outside, other hosts' dirs
        # are gone, the project tree is read-only
        base = self.base_dir
        # umask 022: the mount points made below are a skeleton of paths (nothing is stored in them)
        setup = (f"umask 022 && mount --bind {home} {stage} && mount --bind {REPO} {image} && mount -t tmpfs tmpfs /tmp && "
                 f"mkdir -p {base} && mount -t tmpfs tmpfs {base} && mkdir -p {home} && "
                 f"mount --bind {stage} {home} && umount {stage} && mkdir -p {REPO} && "
                 f"mount --bind {image} {REPO} && umount {image} && mount -o remount,bind,ro {REPO} && "
                 "touch /tmp/.ready && exec sleep infinity")  # fmt: skip
        # its output to a file, not to the launcher's: a holder lives on after a `radctl cluster up`, and
        # must not keep that command's pipes open
        with open(self.base_dir / f"h{host}.holder.log", "ab") as log:
            holder = subprocess.Popen(["ip", "netns", "exec", ns, "unshare", "--mount", "--propagation", "private",
                                       "sh", "-c", setup], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                      start_new_session=True)  # fmt: skip
        self.holders[host] = holder
        deadline = time.monotonic() + 10
        while True:
            if holder.poll() is not None or time.monotonic() > deadline:
                raise HostsError(f"host {host}: its mount namespace did not come up (exit {holder.poll()})")
            if self.run(host, ["test", "-e", "/tmp/.ready"], check=False).returncode == 0:
                return
            time.sleep(0.05)

    def kill_host(self, host: int) -> list[int]:
        """A machine dying: SIGKILL every process of the host at once, then tear its namespace down.
        Returns the pids killed."""
        ns = self.netns(host)
        killed: list[int] = []
        deadline = time.monotonic() + 10
        while (pids := processes_in_netns(ns)) and time.monotonic() < deadline:  # also what entered meanwhile
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            killed += [p for p in pids if p not in killed]
            time.sleep(0.05)
        holder = self.holders.pop(host, None)
        if holder is not None:
            holder.wait(timeout=10)
        pids = killed
        if _netns_inode(ns) is not None:
            _ip("netns", "del", ns)  # the veth pair goes with it
        return pids

    def down(self) -> None:
        """Kill every host's processes and remove every namespace and link this made."""
        for host in range(1, self.count + 1):
            if _netns_inode(self.netns(host)) is not None or host in self.holders:
                self.kill_host(host)
        if _netns_inode(self.switch) is not None:
            _ip("netns", "del", self.switch)
        for host in range(1, self.count + 1):
            for stage in (STAGE_DIR / f"{self.tag}-h{host}", STAGE_DIR / f"{self.tag}-h{host}-image"):
                with contextlib.suppress(OSError):
                    stage.rmdir()

    def remove_dirs(self) -> None:
        shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> SimulatedHosts:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()

    # ---------------------------------------------------------------- running on a host
    def command(self, host: int, argv: list[str]) -> list[str]:
        """``argv`` as it runs on ``host``: in the host's network and mount namespaces."""
        holder = self.holders.get(host)
        if holder is None or holder.poll() is not None:
            raise HostsError(f"host {host} is not running")
        return ["nsenter", "--target", str(holder.pid), "--mount", "--net", "--", *argv]

    def run(self, host: int, argv: list[str], *, check: bool = True, timeout: float = 60.0,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` on ``host`` and wait for it."""
        proc = subprocess.run(self.command(host, argv), capture_output=True, text=True, timeout=timeout, env=env,
                              check=False)  # fmt: skip
        if check and proc.returncode != 0:
            raise HostsError(f"host {host}: {' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
        return proc

    def spawn(self, host: int, argv: list[str], log: Path, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> subprocess.Popen[bytes]:
        """Start ``argv`` on ``host`` in the background, in its own process group; output to ``log``
        (a path as the launcher sees it)."""
        proc = spawn_group(self.command(host, argv), log, env=env, cwd=cwd)
        # returned once it is on the host (nsenter has entered the namespaces), so a kill_host right
        # after cannot miss it
        inode, deadline = _netns_inode(self.netns(host)), time.monotonic() + 10
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                if os.stat(f"/proc/{proc.pid}/ns/net").st_ino == inode:
                    break
            except OSError:
                pass
            time.sleep(0.01)
        return proc


def leftover_namespaces(tag: str) -> list[str]:
    """Network namespaces of the run ``tag`` still present (none after :meth:`SimulatedHosts.down`)."""
    try:
        names = os.listdir("/run/netns")
    except OSError:
        return []
    return sorted(n for n in names if n.startswith(f"rs{tag}"))
