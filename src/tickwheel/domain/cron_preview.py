"""Fire times with explanations: which ones a DST rule moved, doubled or skipped, and why.

``cron.preview`` feeds this module the occurrences of an expression (``cron_dst``); it turns
them into ``FirePreview`` rows for the API (``GET /v1/cron/preview``, ``GET /v1/cron-jobs/{id}``)
and the CLI, so that "why didn't my job run at 02:30?" has an answer. Pure, like the rest of
``domain``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal
from zoneinfo import ZoneInfo

from tickwheel.domain.cron_dst import (
    ONE_SECOND,
    DstPolicy,
    Occurrence,
    transition_between,
    wall_instants,
)

#: ``shifted``: moved out of a spring-forward gap. ``first``/``second``: fired at that
#: occurrence of a wall time that occurs twice (a fixed-hour expression, by its policy).
#: ``repeated``: fired at both occurrences because the hour field follows elapsed time.
#: ``skipped``: did not fire (``fires`` is False).
DstMark = Literal["shifted", "first", "second", "repeated", "skipped"]


@dataclass(frozen=True)
class FirePreview:
    """One row of a preview.

    ``at`` is the instant (UTC) and ``local`` the same instant in the job's zone. ``wall`` is
    the naive wall time the expression matched: it differs from ``local``'s only when a gap
    moved it (then ``at`` is the end of the gap, where it fires under ``shift_forward``).
    ``fires`` is False for a row that did *not* fire; ``dst`` and ``reason`` are None for an
    ordinary fire time.
    """

    at: datetime
    local: datetime
    wall: datetime
    fires: bool = True
    dst: DstMark | None = None
    reason: str | None = None

    def to_document(self) -> dict[str, object]:
        """The JSON form: RFC 3339 instants (``at`` with ``Z``, ``local`` with its offset)."""
        return {
            "at": self.at.isoformat().replace("+00:00", "Z"),
            "local": self.local.isoformat(),
            "wall": self.wall.isoformat(),
            "fires": self.fires,
            "dst": self.dst,
            "reason": self.reason,
        }


def explain(
    found: Iterable[Occurrence],
    tz: ZoneInfo,
    count: int,
    *,
    hour_field: str,
    elapsed_time: bool,
    policy: DstPolicy,
) -> list[FirePreview]:
    """Rows for the first ``count`` distinct fire instants of ``found`` (non-decreasing, as
    ``cron_dst.occurrences`` gives them) and every non-firing occurrence before the last.

    Occurrences that fire at one instant (wall times shifted to the end of one gap) make one
    row. The stream is read one occurrence past the last fire instant, to gather those."""
    groups: list[list[Occurrence]] = []
    fired = 0
    last: datetime | None = None
    if count > 0:
        for occurrence in found:
            if fired == count and occurrence.at != last:
                break
            if occurrence.fires and occurrence.at == last:
                groups[-1].append(occurrence)
                continue
            groups.append([occurrence])
            if occurrence.fires:
                fired, last = fired + 1, occurrence.at
    why = _Reasons(tz, hour_field, elapsed_time, policy)
    return [why.row(group) for group in groups]


@dataclass(frozen=True)
class _Reasons:
    tz: ZoneInfo
    hour_field: str
    elapsed_time: bool
    policy: DstPolicy

    def row(self, group: Sequence[Occurrence]) -> FirePreview:
        head = group[0]
        local = head.at.astimezone(self.tz)
        mark, reason = self._explain(head, group)
        return FirePreview(head.at, local, head.wall, head.fires, mark, reason)

    def _explain(
        self, head: Occurrence, group: Sequence[Occurrence]
    ) -> tuple[DstMark | None, str | None]:
        if head.transition is None:
            return None, None
        if head.transition == "gap":
            return self._gap(head, group)
        return self._repeat(head)

    def _gap(
        self, head: Occurrence, group: Sequence[Occurrence]
    ) -> tuple[DstMark | None, str | None]:
        walls = [o.wall for o in group if o.transition == "gap"]
        verb = "does" if len(walls) == 1 else "do"
        end = _hm(head.at.astimezone(self.tz))
        jump_from = _hm((head.at - ONE_SECOND).astimezone(self.tz) + ONE_SECOND)
        where = (
            f"{_times(walls)} {verb} not exist on {head.wall.date()} in {self.tz.key} "
            f"(clocks jump {jump_from}→{end})"
        )
        if head.fires:
            once = "" if len(group) == 1 else " once"
            also = f" ({end} itself matches as well)" if len(walls) < len(group) else ""
            return "shifted", f"{where}; fired{once} at {end} instead{also}"
        return "skipped", f"{where}; not fired, as dstPolicy.nonexistent is skip"

    def _repeat(self, head: Occurrence) -> tuple[DstMark | None, str | None]:
        back = transition_between(*wall_instants(head.wall, self.tz), self.tz)
        back_from = _hm((back - ONE_SECOND).astimezone(self.tz) + ONE_SECOND)
        where = (
            f"{_hm(head.wall)} occurs twice on {head.wall.date()} in {self.tz.key} "
            f"(clocks go back {back_from}→{_hm(back.astimezone(self.tz))})"
        )
        nth: DstMark = "second" if head.transition == "second" else "first"
        this = f"its {nth} occurrence ({_clock(head.at, self.tz)})"
        choice = self.policy.ambiguous
        if self.elapsed_time:
            return "repeated", (
                f"{where}; the hour field {self.hour_field!r} follows the clock, so it fires "
                f"at both: this is {this}"
            )
        if not head.fires:
            again = " again" if nth == "second" else ""
            why = f"as dstPolicy.ambiguous is {choice}"
            return "skipped", f"{where}; not fired{again} at {this}, {why}"
        if choice == "both":
            return nth, f"{where}; fired at both, as dstPolicy.ambiguous is both: this is {this}"
        return nth, f"{where}; fired at {this} only, as dstPolicy.ambiguous is {choice}"


def _hm(moment: datetime) -> str:
    return moment.strftime("%H:%M:%S" if moment.second else "%H:%M")


def _clock(instant: datetime, tz: ZoneInfo) -> str:
    local = instant.astimezone(tz)
    return f"{_hm(local)} {local.tzname()}"


def _times(walls: Sequence[datetime]) -> str:
    """``02:30``; ``02:00 and 02:30``; ``02:00, 02:15 and 02:30``; ``02:00 to 02:59 (60 times)``."""
    names = [_hm(wall) for wall in walls]
    if len(names) == 1:
        return names[0]
    if len(names) <= 3:
        return f"{', '.join(names[:-1])} and {names[-1]}"
    return f"{names[0]} to {names[-1]} ({len(names)} times)"
