"""Hostile arguments to a Python job's typed submission: values the store cannot keep (lone
surrogates, NUL, integers past 64 bits, NaN) and values the hints refuse are errors before
anything is stored, on both backends, through ``submit``, ``submit_many`` and ``submit_async``."""

from __future__ import annotations

import math
from typing import Any

import pytest

import tickwheel
from tests.client import pyjobs_sample
from tests.client.conftest import Database
from tests.client.pyjobs_sample import Invoice, add_async, send_invoice
from tickwheel.domain.errors import InvalidInput

HOSTILE: dict[str, dict[str, Any]] = {
    "huge integer": {"a": 2**64, "b": 1},
    "negative huge integer": {"a": -(2**70), "b": 1},
    "NaN": {"a": math.nan, "b": 1},
    "infinity": {"a": math.inf, "b": 1},
    "a string where an integer is declared": {"a": "1", "b": 2},
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_argument_is_refused_and_nothing_is_stored(database: Database, case: str) -> None:
    with tickwheel.connect(database.url, tenant="acme") as client:
        pyjobs_sample.app.use(client)
        try:
            with pytest.raises((InvalidInput, TypeError)) as raised:
                add_async.submit(**HOSTILE[case])
            assert str(raised.value), "the refusal says why"
            with pytest.raises((InvalidInput, TypeError)):
                add_async.submit_many([{"a": 1, "b": 2}, HOSTILE[case]])
            assert client.list().items == []
        finally:
            pyjobs_sample.app.use(None)


@pytest.mark.parametrize("text", ["\ud800", "nul\x00inside"])
def test_text_the_store_cannot_keep_is_refused(database: Database, text: str) -> None:
    with tickwheel.connect(database.url, tenant="acme") as client:
        pyjobs_sample.app.use(client)
        try:
            for bad in ({"note": text}, {"invoice": Invoice(order_id=text, total_cents=1)}):
                arguments: dict[str, Any] = {
                    "invoice": Invoice(order_id="o-1", total_cents=1),
                    "due": "2027-01-01",
                    **bad,
                }
                with pytest.raises((InvalidInput, TypeError)) as raised:
                    send_invoice.submit(**arguments)
                assert str(raised.value)
            assert client.list().items == []
        finally:
            pyjobs_sample.app.use(None)


async def test_the_async_submit_refuses_the_same(database: Database) -> None:
    async with await tickwheel.connect_async(database.url, tenant="acme") as client:
        pyjobs_sample.app.use_async(client)
        try:
            with pytest.raises((InvalidInput, TypeError)):
                await add_async.submit_async(a=2**64, b=1)
            assert (await client.list()).items == []
        finally:
            pyjobs_sample.app.use_async(None)
