"""The configuration of one Patroni node of the HA rig (``ha_rig.py``): the settings that decide
durability and failover time are all here (docs/ha.md explains each)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# Patroni's loop: a crashed primary is noticed within LOOP_WAIT; a primary whose Patroni is gone
# too (the whole host) only when its leader key expires, after TTL.
TTL = 10
LOOP_WAIT = 1
RETRY_TIMEOUT = 3


def patroni_config(
    *,
    scope: str,
    name: str,
    home: Path,
    bin_dir: Path,
    pg_port: int,
    api_port: int,
    etcd_port: int,
) -> dict[str, Any]:
    """The node ``name`` of cluster ``scope``: data, sockets and password file under ``home``,
    PostgreSQL on ``pg_port``, Patroni's REST API on ``api_port``, etcd on ``etcd_port``, all
    on the loopback address. The ``bootstrap.dcs`` part is the cluster's and is written to etcd
    by the first node."""
    return {
        "scope": scope,
        "namespace": "/tickwheel/",
        "name": name,
        "restapi": {
            "listen": f"127.0.0.1:{api_port}",
            "connect_address": f"127.0.0.1:{api_port}",
        },
        "etcd3": {"hosts": f"127.0.0.1:{etcd_port}"},
        "bootstrap": {
            "dcs": {
                "ttl": TTL,
                "loop_wait": LOOP_WAIT,
                "retry_timeout": RETRY_TIMEOUT,
                # A crashed primary fails over instead of being restarted in place first.
                "primary_start_timeout": 0,
                "maximum_lag_on_failover": 16 * 1024 * 1024,
                # A commit returns once the standby named here has flushed it.
                "synchronous_mode": True,
                "postgresql": {
                    "use_pg_rewind": True,  # the old primary rejoins without a new base backup
                    "use_slots": True,
                    "parameters": {
                        "synchronous_commit": "on",
                        "wal_log_hints": "on",
                        "max_connections": 200,
                        "wal_keep_size": "256MB",
                        # Reads on the standby are not cancelled by the primary's vacuum.
                        "hot_standby_feedback": "on",
                    },
                },
            },
            "initdb": [{"encoding": "UTF8"}, {"auth": "trust"}],
            "pg_hba": [
                "local all all trust",
                "host all all 127.0.0.1/32 trust",
                "host replication all 127.0.0.1/32 trust",
            ],
        },
        "postgresql": {
            "listen": f"127.0.0.1:{pg_port}",
            "connect_address": f"127.0.0.1:{pg_port}",
            "data_dir": str(home / "data"),
            "bin_dir": str(bin_dir),
            "pgpass": str(home / "pgpass"),
            # Loopback only and trust in pg_hba: the passwords are what Patroni requires to be
            # set, not a protection.
            "authentication": {
                "superuser": {"username": "postgres", "password": "postgres"},
                "replication": {"username": "replicator", "password": "replicator"},
            },
            "parameters": {"unix_socket_directories": str(home)},
        },
        "tags": {},
    }
