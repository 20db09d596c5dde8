-- Fair claiming across tenants (issue 14, docs/flow-control.md "Fair claiming"): the READY rows
-- of each tenant in claim order. The claim finds the tenants with READY work by a skip scan of
-- this index (one probe per tenant, however deep each backlog), and takes each tenant's first
-- rows from it; the store's test "is more than one tenant READY?" is its first and last entry.
CREATE INDEX executions_ready_tenant ON executions (tenant, priority DESC, ready_at)
    WHERE status = 'READY';
