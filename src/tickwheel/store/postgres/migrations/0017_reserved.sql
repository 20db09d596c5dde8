-- Placeholder: number 0017 belongs to another branch of issue 14 (concurrency keys). It keeps
-- the numbering without gaps on this branch; delete this file when that branch's 0017 merges.
SELECT 1;
