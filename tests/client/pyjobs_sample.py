"""Jobs defined in Python for the tests: importable by name, as a worker imports them."""

from __future__ import annotations

from datetime import date
from typing import TypedDict

from pydantic import BaseModel

import tickwheel

app = tickwheel.App()


class Invoice(BaseModel):
    order_id: str
    total_cents: int


class Sent(BaseModel):
    invoice_number: str
    due: str


@app.job(name="send-invoice", version=1, retry=5, timeout=30)
def send_invoice(invoice: Invoice, due: date, copies: int = 1, note: str | None = None) -> Sent:
    """Send an invoice by e-mail."""
    assert isinstance(invoice, Invoice)  # rebuilt from JSON by the wrapper
    assert isinstance(due, date)
    return Sent(invoice_number=f"INV-{invoice.order_id}-{copies}", due=due.isoformat())


class Sum(TypedDict):
    sum: int
    attempt: int


@app.job(name="add-async", version=2, retry={"maxAttempts": 2, "baseDelay": 3})
async def add_async(a: int, b: int, context: tickwheel.JobContext) -> Sum:
    return {"sum": a + b, "attempt": context.attempt}
