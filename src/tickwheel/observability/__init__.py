"""Metrics and structured logs. A bottom layer beside the domain: every other layer may record
into it, and it imports nothing of tickwheel, so recording never drags storage or HTTP along."""
