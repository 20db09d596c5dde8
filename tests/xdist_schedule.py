"""How ``make test`` spreads the suite over its xdist workers (``-n 2 --dist loadfile``).

Each test file stays on one worker, as with xdist's own ``loadfile``: a module's tests share
module-scoped fixtures (a real ``tickwheel server``, a migrated database) that would otherwise be
built once per worker. On top of that, every file of ``tests/processes`` is one unit, run by one
worker one test after the other, and handed out first: each of those tests starts schedulers and
workers that want the CPU, several assert on timing (executions started within a second of their
``executeAt``, shards taken over within the lease), and together they are the longest unit, so
starting it first keeps the other worker busy with the in-process tests meanwhile instead of
leaving it idle at the end.

Not ``--dist loadgroup`` with ``xdist_group`` marks: with pytest 9.2 and pytest-xdist 3.8 the
groups are silently ignored (xdist tags them onto the node id, which pytest no longer lets it
change), so the grouping lives here, in the scheduler, where it does not depend on that."""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadFileScheduling

SERIAL = "tests/processes/"


class ProcessesTogether(LoadFileScheduling):
    def _split_scope(self, nodeid: str) -> str:
        if nodeid.startswith(SERIAL):
            return SERIAL
        scope: str = super()._split_scope(nodeid)
        return scope

    def _assign_work_unit(self, node: Any) -> None:
        if SERIAL in self.workqueue:
            self.workqueue.move_to_end(SERIAL, last=False)
        super()._assign_work_unit(node)
