"""The timing wheel against the obvious model (a list sorted on demand): same items due, in the
same order, at every step, whatever the mix of adds, removes, jumps and far-future items."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwheel.engine.timing_wheel import TimingWheel, to_us

T0 = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
US = timedelta(microseconds=1)


def test_items_come_out_at_their_exact_instant_in_order() -> None:
    wheel = TimingWheel(T0)
    wheel.add("b", T0 + timedelta(seconds=10, microseconds=5), "B")
    wheel.add("a", T0 + timedelta(seconds=10), "A")
    wheel.add("c", T0 + timedelta(hours=5), "C")
    assert len(wheel) == 3 and wheel.next_due() == T0 + timedelta(seconds=10)
    assert wheel.advance(T0 + timedelta(seconds=10) - US) == []
    [a] = wheel.advance(T0 + timedelta(seconds=10))
    assert (a.key, a.payload) == ("a", "A")
    assert wheel.next_due() == T0 + timedelta(seconds=10, microseconds=5)
    assert [d.key for d in wheel.advance(T0 + timedelta(minutes=1))] == ["b"]
    assert wheel.next_due() == T0 + timedelta(hours=5)
    assert [d.key for d in wheel.advance(T0 + timedelta(days=1))] == ["c"]
    assert len(wheel) == 0 and wheel.next_due() is None


def test_remove_replace_and_overdue_items() -> None:
    wheel = TimingWheel(T0)
    wheel.add("x", T0 + timedelta(seconds=5), 1)
    wheel.add("x", T0 + timedelta(seconds=7), 2)  # the same key moves
    assert len(wheel) == 1 and wheel.next_due() == T0 + timedelta(seconds=7)
    assert wheel.remove("x") == 2 and wheel.remove("x") is None
    assert wheel.next_due() is None
    wheel.advance(T0 + timedelta(seconds=60))
    wheel.add("late", T0, "overdue")  # added after its instant: due at the next advance
    assert wheel.next_due() == T0
    assert [d.key for d in wheel.advance(T0 + timedelta(seconds=60))] == ["late"]


def test_far_items_and_long_jumps_stay_exact() -> None:
    wheel = TimingWheel(T0)
    far = [T0 + timedelta(days=d, microseconds=d) for d in (400, 9, 30)]
    for i, at in enumerate(far):
        wheel.add(i, at)
    assert wheel.next_due() == min(far)
    got = wheel.advance(T0 + timedelta(days=500))
    assert [d.due for d in got] == sorted(far)


def test_a_herds_slot_comes_out_whole_or_in_part_and_stays_the_callers() -> None:
    """One tick's slot due whole (a herd: cleared at once) or in part (the rest stays); what is
    handed back is no longer the wheel's: adding its key again makes a new item."""
    wheel = TimingWheel(T0)
    at = T0 + timedelta(seconds=3)
    for i in range(50):
        wheel.add(i, at + (US if i % 10 == 9 else timedelta(0)), i)
    assert wheel.advance(at - US) == []
    first = wheel.advance(at)
    assert [d.key for d in first] == [i for i in range(50) if i % 10 != 9]
    assert len(wheel) == 5 and wheel.next_due() == at + US
    wheel.add(0, at + timedelta(seconds=1), "again")
    assert (first[0].key, first[0].due, first[0].payload) == (0, at, 0)
    rest = wheel.advance(at + US)
    assert [d.key for d in rest] == [9, 19, 29, 39, 49]
    assert [d.payload for d in wheel.advance(at + timedelta(seconds=1))] == ["again"]
    assert len(wheel) == 0 and wheel.next_due() is None
    wheel.add("late", at, "x")  # a cleared slot takes new items
    assert [d.key for d in wheel.advance(at + timedelta(seconds=2))] == ["late"]


def test_naive_instants_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        TimingWheel(datetime(2026, 1, 1))


# Offsets in microseconds, mixing the same tick, level 0, each higher level and the overflow.
offsets = st.one_of(
    st.integers(-50_000, 50_000),
    st.integers(0, 3_000_000),
    st.integers(0, 200_000_000),
    st.integers(0, 3 * 3600 * 10**6),
    st.integers(0, 30 * 86400 * 10**6),
)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 40), offsets),
        st.tuples(st.just("remove"), st.integers(0, 40), st.just(0)),
        st.tuples(st.just("advance"), st.just(0), offsets.filter(lambda o: o >= 0)),
    ),
    max_size=120,
)


@settings(max_examples=300, deadline=None)
@given(ops=ops, tick_ms=st.sampled_from([1, 10, 100]))
def test_the_wheel_behaves_like_a_sorted_list(
    ops: list[tuple[str, int, int]], tick_ms: int
) -> None:
    wheel = TimingWheel(T0, tick=timedelta(milliseconds=tick_ms))
    model: dict[int, tuple[int, int]] = {}  # key -> (due in us, insertion sequence)
    now = T0
    seq = 0
    for op, key, offset in ops:
        if op == "add":
            seq += 1
            due = now + offset * US
            wheel.add(key, due, key * 10)
            model[key] = (to_us(due), seq)
        elif op == "remove":
            payload = key * 10 if key in model else None
            assert wheel.remove(key) == payload
            model.pop(key, None)
        else:
            now += offset * US
            got = wheel.advance(now)
            expected = sorted((v, k) for k, v in model.items() if v[0] <= to_us(now))
            assert [(to_us(d.due), d.key, d.payload) for d in got] == [
                (v[0], k, k * 10) for v, k in expected
            ]
            for _, k in expected:
                del model[k]
        assert len(wheel) == len(model)
        earliest = min((v[0] for v in model.values()), default=None)
        found = wheel.next_due()
        assert (to_us(found) if found else None) == earliest
