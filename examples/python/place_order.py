"""A Django-style script: a plain database connection, one transaction for the order and its
invoice job. Either both exist afterwards or neither does.

    TICKWHEEL_DATABASE_URL=sqlite:///tickwheel.db python examples/python/place_order.py o-1 1200
"""

from __future__ import annotations

import os
import sys

from shop.db import connect, create_tables, insert_order
from shop.jobs import app, send_invoice


def place_order(url: str, order_id: str, total_cents: int) -> str:
    conn = connect(url)
    try:
        insert_order(conn, order_id, total_cents)  # the transaction begins here
        execution = send_invoice.submit(order_id=order_id, total_cents=total_cents, connection=conn)
        conn.commit()  # the order and its job, together
    except BaseException:
        conn.rollback()  # neither
        raise
    finally:
        conn.close()
    return str(execution.execution_id)


if __name__ == "__main__":
    url = os.environ["TICKWHEEL_DATABASE_URL"]
    create_tables(url)
    try:
        app.register()  # the job's definition, before the order's transaction
        print(place_order(url, sys.argv[1], int(sys.argv[2])))
    finally:
        app.close()
