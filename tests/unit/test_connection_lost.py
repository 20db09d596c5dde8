"""Which driver errors mean "the database is away" (503, retry later) and which are the
statement's own fault (kept as they are, so conflicts and bugs stay what they are)."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors
from psycopg_pool import PoolTimeout

from tickwheel.store.postgres.pool import connection_lost


@pytest.mark.parametrize(
    "exc",
    [
        psycopg.OperationalError("server closed the connection unexpectedly"),  # no SQLSTATE
        PoolTimeout("couldn't get a connection after 1.00 sec"),
        errors.AdminShutdown("terminating connection due to administrator command"),
        errors.CrashShutdown("terminating connection because of crash of another server"),
        errors.CannotConnectNow("the database system is starting up"),
        errors.TooManyConnections("sorry, too many clients already"),
        errors.ConnectionFailure("connection failure"),
        # A write right after the primary was demoted, on a session to what is now a standby.
        errors.ReadOnlySqlTransaction("cannot execute INSERT in a read-only transaction"),
    ],
)
def test_lost_connections_are_recognised(exc: psycopg.Error) -> None:
    assert connection_lost(exc)


@pytest.mark.parametrize(
    "exc",
    [
        errors.UniqueViolation("duplicate key"),
        errors.LockNotAvailable("could not obtain lock"),  # an OperationalError with a SQLSTATE
        errors.SerializationFailure("could not serialize access"),
        errors.QueryCanceled("canceling statement due to statement timeout"),
        errors.UndefinedTable("relation does not exist"),
        ValueError("not a driver error"),
    ],
)
def test_a_statements_own_errors_are_not_outages(exc: Exception) -> None:
    assert not connection_lost(exc)
