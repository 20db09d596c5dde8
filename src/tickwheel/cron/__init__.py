"""The Cron Service: durable recurrence rules that materialise one Execution per occurrence,
built on the Client SDK and owning its own tables (``cron_jobs``, ``cron_occurrences``,
``cron_audit``)."""
