-- Shard leases: one row per shard (0..1023), created here so that taking a shard is always a
-- guarded UPDATE of an existing row, never an insert race. owner NULL: free. epoch grows at
-- every grant, so a scheduler's promotion, conditional on the epoch it was granted, matches
-- nothing once the shard was taken (or retaken) by anyone. watermark: the instant up to which
-- every due execution of the shard has been promoted.
CREATE TABLE shard_leases (
    shard_id    INTEGER PRIMARY KEY NOT NULL CHECK (shard_id BETWEEN 0 AND 1023),
    owner       TEXT,
    epoch       INTEGER NOT NULL DEFAULT 0,
    expires_at  INTEGER,
    watermark   INTEGER,
    updated_at  INTEGER NOT NULL
);
WITH RECURSIVE s(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM s WHERE n < 1023)
INSERT INTO shard_leases (shard_id, updated_at)
SELECT n, CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER) FROM s;

-- The schedulers taking part in the split, each renewed with its leases: a scheduler that holds
-- no shard yet (it just joined) is seen by the others, which give up their excess to it.
CREATE TABLE shard_owners (
    owner       TEXT PRIMARY KEY NOT NULL,
    expires_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
