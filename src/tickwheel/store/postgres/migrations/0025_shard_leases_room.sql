-- Room on every page of shard_leases for the next version of its rows (docs/scaling.md, "What an
-- idle scheduler costs"). Every scheduler rewrites each of its lease rows at every renewal (a
-- third of the lease: every 3.3 s by default), idle or not. On full pages a row's new version
-- went to another page: a lock record, the update and a new primary-key entry per row, about
-- 200 bytes of WAL, some 60 kB a second for one idle scheduler, and a table and an index that
-- grew until vacuumed. With a page two thirds empty the renewal is a HOT update in place (no
-- index entry, no lock record), and the page's dead versions are pruned as it is read. The
-- table is rewritten once here so that its existing rows get the room too (1,024 rows).
ALTER TABLE shard_leases SET (fillfactor = 30);
CLUSTER shard_leases USING shard_leases_pkey;
