-- Shard leases: one row per shard (0..1023), created here so that taking a shard is always a
-- guarded UPDATE of an existing row (FOR UPDATE SKIP LOCKED), never an insert race. owner NULL:
-- free. epoch grows at every grant, so a scheduler's promotion, conditional on the epoch it was
-- granted, matches nothing once the shard was taken (or retaken) by anyone. watermark: the
-- instant up to which every due execution of the shard has been promoted.
CREATE TABLE shard_leases (
    shard_id    smallint PRIMARY KEY CHECK (shard_id BETWEEN 0 AND 1023),
    owner       text,
    epoch       bigint NOT NULL DEFAULT 0,
    expires_at  timestamptz,
    watermark   timestamptz,
    updated_at  timestamptz NOT NULL
);
INSERT INTO shard_leases (shard_id, updated_at)
SELECT s, now() FROM generate_series(0, 1023) AS s;

-- The schedulers taking part in the split, each renewed with its leases: a scheduler that holds
-- no shard yet (it just joined) is seen by the others, which give up their excess to it.
CREATE TABLE shard_owners (
    owner       text PRIMARY KEY,
    expires_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
