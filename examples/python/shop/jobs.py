"""The shop's jobs, defined in Python. A worker runs them with
``tickwheel worker --app shop.jobs:app --path examples/python``."""

from __future__ import annotations

from pydantic import BaseModel

import tickwheel

app = tickwheel.App()  # submits through tickwheel.connect(TICKWHEEL_DATABASE_URL) unless given one


class Receipt(BaseModel):
    invoice_number: str


@app.job(name="send-invoice", version=1, retry=5, timeout=30)
def send_invoice(order_id: str, total_cents: int) -> Receipt:
    """E-mail the invoice of an order (here: make up its number)."""
    return Receipt(invoice_number=f"INV-{order_id}-{total_cents}")
