#!/usr/bin/env python3
"""A PostgreSQL high-availability rig on one machine: one etcd and two Patroni nodes.

Patroni keeps one node primary and the other a synchronous standby (``synchronous_mode``,
``synchronous_commit = on``), fails over on its own when the primary's postmaster dies
(``primary_start_timeout = 0``: fail over rather than restart the crashed primary in place) and
brings the old primary back as a standby with ``pg_rewind``. Everything lives in one directory
(data, configuration, logs, ``rig.json`` with the pids) on free loopback ports, never 5432.

    python3 scripts/ha_rig.py up [--dir D] [--database tickwheel]   # prints the URL, detaches
    python3 scripts/ha_rig.py status --dir D
    python3 scripts/ha_rig.py switchover --dir D                   # planned, to the standby
    python3 scripts/ha_rig.py down --dir D                         # stops by pid, removes D

PostgreSQL refuses to run as root: as root, Patroni (and so PostgreSQL) runs as ``postgres``.
Only the standard library is used, so that the tests import this file and CI runs it as is."""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ha_patroni import patroni_config

NODES = ("pg0", "pg1")
START_TIMEOUT = 90.0
STOP_TIMEOUT = 20.0


class RigError(RuntimeError):
    pass


def missing() -> str | None:
    """Why the rig cannot run here, or None."""
    for tool in ("patroni", "etcd"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install patroni etcd-server)"
    if bindir() is None:
        return "PostgreSQL server binaries not found under /usr/lib/postgresql"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no postgres user to run PostgreSQL as"
    return None


def bindir() -> Path | None:
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").exists() and (candidate / "pg_ctl").exists():
            return candidate
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _get(url: str, timeout: float = 2.0) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            body = response.read()
            status = response.status
    except urllib.error.HTTPError as exc:
        body, status = exc.read(), exc.code
    try:
        return status, json.loads(body or b"null")
    except ValueError:
        return status, body.decode(errors="replace")


class Rig:
    """The rig in ``root``: ``up()`` starts it, ``down()`` stops every process by pid."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.state_path = root / "rig.json"
        # Our own children, kept so that they are reaped (not warned about) when they end.
        self._children: list[subprocess.Popen[bytes]] = []
        if self.state_path.exists():
            self.state: dict[str, Any] = json.loads(self.state_path.read_text())
        else:
            self.state = {}

    # -- addresses ---------------------------------------------------------------------------

    def url(self, database: str = "postgres", **params: str) -> str:
        """A multi-host URL that reaches whichever node is primary (unless ``params`` choose
        another ``target_session_attrs``, or none with "")."""
        hosts = ",".join(f"127.0.0.1:{n['pg_port']}" for n in self.state["nodes"].values())
        options = {"target_session_attrs": "read-write", **params}
        query = "&".join(f"{k}={v}" for k, v in options.items() if v)
        return f"postgresql://postgres@{hosts}/{database}?{query}".rstrip("?")

    def node_url(self, name: str, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.state['nodes'][name]['pg_port']}/{database}"

    def _api(self, name: str) -> str:
        return f"http://127.0.0.1:{self.state['nodes'][name]['api_port']}"

    # -- start ----------------------------------------------------------------------------------

    def up(self, database: str | None = None, timeout: float = START_TIMEOUT) -> None:
        reason = missing()
        if reason:
            raise RigError(reason)
        self.root.mkdir(parents=True, exist_ok=True)
        owner = _postgres_user()
        if owner is not None:
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
        self.root.chmod(0o755)
        etcd_client, etcd_peer = free_port(), free_port()
        scope = f"tickwheel-ha-{os.getpid()}"
        self.state = {"root": str(self.root), "scope": scope, "etcd_port": etcd_client, "nodes": {}}
        for name in NODES:
            self.state["nodes"][name] = {"pg_port": free_port(), "api_port": free_port()}
        self._save()
        try:
            self.state["etcd_pid"] = self._start_etcd(etcd_client, etcd_peer)
            self._save()
            self._wait(lambda: self._etcd_healthy(), timeout, "etcd to answer")
            for name in NODES:
                self._configure_node(name)
                self.start_node(name)
                if name == NODES[0]:  # the first bootstraps; the second copies it
                    self._wait(lambda: self.primary() == NODES[0], timeout, f"{name} to lead")
            self.wait_healthy(timeout)
            if database:
                self.psql(f'CREATE DATABASE "{database}"')
        except BaseException:
            self.down(remove=False)
            raise

    def _start_etcd(self, client: int, peer: int) -> int:
        data = self.root / "etcd"
        args = [
            "etcd", "--name", "etcd0", "--data-dir", str(data),
            "--listen-client-urls", f"http://127.0.0.1:{client}",
            "--advertise-client-urls", f"http://127.0.0.1:{client}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"etcd0=http://127.0.0.1:{peer}",
            "--initial-cluster-state", "new",
        ]  # fmt: skip
        return self._spawn(args, self.root / "etcd.log")

    def _etcd_healthy(self) -> bool:
        try:
            status, body = _get(f"http://127.0.0.1:{self.state['etcd_port']}/health")
        except OSError:
            return False
        return status == 200 and isinstance(body, dict) and body.get("health") == "true"

    def _configure_node(self, name: str) -> None:
        node = self.state["nodes"][name]
        home = self.root / name
        home.mkdir(exist_ok=True)
        home.chmod(0o700)
        config = patroni_config(
            scope=self.state["scope"],
            name=name,
            home=home,
            bin_dir=bindir() or Path("/usr/bin"),
            pg_port=node["pg_port"],
            api_port=node["api_port"],
            etcd_port=self.state["etcd_port"],
        )
        path = home / "patroni.yml"  # JSON is YAML
        path.write_text(json.dumps(config, indent=2))
        owner = _postgres_user()
        if owner is not None:
            for item in (home, path):
                os.chown(item, owner.pw_uid, owner.pw_gid)

    def start_node(self, name: str) -> None:
        """Starts the node's Patroni (again, after ``kill_node``): it starts PostgreSQL, as a
        standby when another node leads."""
        home = self.root / name
        pid = self._spawn(["patroni", str(home / "patroni.yml")], home / "patroni.log", True)
        self.state["nodes"][name]["patroni_pid"] = pid
        self._save()

    def _spawn(self, args: list[str], log: Path, as_postgres: bool = False) -> int:
        """Starts a process of ours; as root, ``as_postgres`` runs it as that user (the pid is
        the process's own, not a wrapper's, so that signals reach it)."""
        owner = _postgres_user() if as_postgres else None
        user: dict[str, Any] = {}
        env = dict(os.environ)
        if owner is not None:
            user = {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}
            env.update(HOME=owner.pw_dir, USER=owner.pw_name, LOGNAME=owner.pw_name)
        with log.open("ab") as out:
            popen = subprocess.Popen(
                args,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.root,
                env=env,
                start_new_session=True,  # not hit by the terminal's Ctrl-C: ``down`` stops it
                **user,
            )
        self._children.append(popen)
        return popen.pid

    def _save(self) -> None:
        self.state_path.write_text(json.dumps(self.state, indent=2))

    # -- state ----------------------------------------------------------------------------------

    def members(self) -> list[dict[str, Any]]:
        """Patroni's view of the cluster (from any node that answers), [] when none does."""
        for name in self.state.get("nodes", {}):
            try:
                status, body = _get(f"{self._api(name)}/cluster")
            except OSError:
                continue
            if status == 200 and isinstance(body, dict):
                members: list[dict[str, Any]] = body.get("members", [])
                return members
        return []

    def primary(self) -> str | None:
        """The node whose PostgreSQL accepts writes now, by asking each node itself."""
        for name in self.state.get("nodes", {}):
            try:
                status, _ = _get(f"{self._api(name)}/primary", timeout=1.0)
            except OSError:
                continue
            if status == 200:
                return str(name)
        return None

    def sync_standby(self) -> str | None:
        for member in self.members():
            if member.get("role") == "sync_standby" and member.get("state") in (
                "running",
                "streaming",
            ):
                return str(member["name"])
        return None

    def healthy(self) -> bool:
        """A primary and a streaming synchronous standby."""
        return self.primary() is not None and self.sync_standby() is not None

    def wait_healthy(self, timeout: float = START_TIMEOUT) -> None:
        self._wait(self.healthy, timeout, "a primary and a synchronous standby")

    def postmaster_pid(self, name: str) -> int | None:
        pidfile = self.root / name / "data" / "postmaster.pid"
        try:
            return int(pidfile.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def kill_postmaster(self, name: str) -> int:
        """SIGKILL to the node's postmaster (its backends die with it); returns the pid."""
        pid = self.postmaster_pid(name)
        if pid is None:
            raise RigError(f"{name} has no running postmaster")
        os.kill(pid, signal.SIGKILL)
        return pid

    def kill_node(self, name: str) -> None:
        """The whole node lost at once, as with its host: SIGKILL to its Patroni, then to its
        postmaster. The other node takes over only when the leader key expires (``TTL``)."""
        pid = self.state["nodes"][name].get("patroni_pid")
        if pid is not None and _alive(pid):
            os.kill(pid, signal.SIGKILL)
            while _alive(pid):
                time.sleep(0.01)
        self.kill_postmaster(name)

    def switchover(self, candidate: str | None = None, timeout: float = 60.0) -> str:
        """A planned switch-over from the primary to ``candidate`` (default: the synchronous
        standby); returns the new primary once it accepts writes."""
        leader = self.primary()
        target = candidate or self.sync_standby()
        if leader is None or target is None:
            raise RigError(f"no switch-over possible: primary {leader}, standby {target}")
        request = urllib.request.Request(
            f"{self._api(leader)}/switchover",
            data=json.dumps({"leader": leader, "candidate": target}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                answer = response.read().decode(errors="replace")
        except urllib.error.HTTPError as exc:
            raise RigError(f"switch-over refused: {exc.code} {exc.read()!r}") from exc
        self._wait(lambda: self.primary() == target, timeout, f"{target} to lead ({answer})")
        return target

    def psql(self, sql: str, name: str | None = None) -> str:
        """Runs ``sql`` on a node (default: the primary) with psql, as postgres."""
        node = name or self.primary()
        if node is None:
            raise RigError("no primary")
        port = str(self.state["nodes"][node]["pg_port"])
        binary = str((bindir() or Path("/usr/bin")) / "psql")
        done = subprocess.run(
            [binary, "-h", "127.0.0.1", "-p", port, "-U", "postgres", "-d", "postgres",
             "-XAtq", "-v", "ON_ERROR_STOP=1", "-c", sql],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RigError(f"psql on {node}: {done.stderr.strip()}")
        return done.stdout.strip()

    def _wait(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            time.sleep(0.2)
        raise RigError(f"timed out after {timeout:g} s waiting for {what}\n{self.logs()}")

    def logs(self, tail: int = 3000) -> str:
        out = []
        for log in sorted(self.root.glob("*.log")) + sorted(self.root.glob("*/patroni.log")):
            text = log.read_text(errors="replace")[-tail:]
            out.append(f"== {log.relative_to(self.root)}\n{text}")
        return "\n".join(out)

    # -- stop -----------------------------------------------------------------------------------

    def down(self, remove: bool = True) -> None:
        """Stops Patroni (which stops its PostgreSQL), then any postmaster left (its Patroni was
        killed), then etcd; all by pid, never by name."""
        nodes = self.state.get("nodes", {})
        patronis = [n["patroni_pid"] for n in nodes.values() if "patroni_pid" in n]
        _stop(patronis, STOP_TIMEOUT)
        _stop([p for p in map(self.postmaster_pid, nodes) if p is not None], STOP_TIMEOUT)
        if "etcd_pid" in self.state:
            _stop([self.state["etcd_pid"]], STOP_TIMEOUT)
        for child in self._children:
            child.poll()
        if remove:
            shutil.rmtree(self.root, ignore_errors=True)


def _postgres_user() -> pwd.struct_passwd | None:
    """As root, the user PostgreSQL runs as (it refuses root); otherwise None: ourselves."""
    return pwd.getpwnam("postgres") if os.geteuid() == 0 else None


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)  # reaps our own children
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _stop(pids: list[int], timeout: float) -> None:
    """SIGTERM, then SIGKILL for whatever is still there after ``timeout``."""
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["up", "status", "switchover", "down"])
    parser.add_argument("--dir", type=Path, help="the rig's directory (up: default a new one)")
    parser.add_argument("--database", help="up: also create this database")
    args = parser.parse_args(argv)
    if args.command == "up":
        root = args.dir or Path(tempfile.mkdtemp(prefix="tickwheel-ha-"))
        rig = Rig(root)
        try:
            rig.up(args.database)
        except RigError as exc:
            print(exc, file=sys.stderr)
            return 1
        print(json.dumps({"dir": str(root), "url": rig.url(args.database or "postgres")}))
        return 0
    if args.dir is None or not (args.dir / "rig.json").exists():
        parser.error(f"{args.command} needs --dir of a rig that was brought up")
    rig = Rig(args.dir)
    if args.command == "status":
        print(json.dumps({"primary": rig.primary(), "members": rig.members()}, indent=2))
    elif args.command == "switchover":
        print(rig.switchover())
    else:
        rig.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
