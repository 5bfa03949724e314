"""Properties of the pure-Python reference model (many hypothesis examples, no Spark)."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.reference.dedup import Decision, DedupModel, Entry, Rec

IDS = st.sampled_from(["a", "b", "c", None])


@st.composite
def single_partition_records(draw: st.DrawFn) -> list[Rec]:
    n = draw(st.integers(1, 25))
    return [Rec((draw(IDS),), draw(st.integers(0, 60)), 0, offset, f"r{offset}") for offset in range(n)]


@st.composite
def splits(draw: st.DrawFn, records: list[Rec]) -> list[list[Rec]]:
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(records) - 1)), max_size=4)))
    bounds = [0, *cuts, len(records)]
    return [records[a:b] for a, b in itertools.pairwise(bounds) if a < b]


@settings(max_examples=400)
@given(single_partition_records(), st.sampled_from([0, 5, 10]), st.data())
def test_batch_split_does_not_change_single_partition_decisions(
    records: list[Rec], interval: int, data
) -> None:
    whole = DedupModel(interval, per_partition=False).process_batch(records)
    split_model = DedupModel(interval, per_partition=False)
    in_batches = [pair for batch in data.draw(splits(records)) for pair in split_model.process_batch(batch)]
    assert in_batches == whole


@settings(max_examples=400)
@given(single_partition_records(), st.sampled_from([0, 5, 10]))
def test_decisions_follow_the_contract(records: list[Rec], interval: int) -> None:
    model = DedupModel(interval, per_partition=False)
    saved: dict[str, list[int]] = {}
    for rec, decision in model.process_batch(records):
        if rec.id[0] is None:
            assert decision is Decision.NULL_ID
        elif decision is Decision.FORWARDED:
            # a saved record is more than the interval after the previous saved one of its id, or that expired
            previous = saved.setdefault(rec.id[0], [])
            assert (
                not previous
                or rec.ts > previous[-1] + interval
                or previous[-1] < model.stream_time[0] - interval
            )
            previous.append(rec.ts)
        elif decision is Decision.DUPLICATE:
            assert any(abs(rec.ts - t) <= interval for t in saved.get(rec.id[0], []))
        elif decision is Decision.LATE:
            assert rec.ts < model.stream_time[0] - interval
    assert all(ident is not None for _, ident in model.index)


@settings(max_examples=300)
@given(single_partition_records(), st.sampled_from([0, 5, 10]))
def test_redelivered_records_are_forwarded_again_while_their_entry_lives(
    records: list[Rec], interval: int
) -> None:
    model = DedupModel(interval, per_partition=False)
    first = model.process_batch(records)
    saved_and_live = {
        rec.label
        for rec, d in first
        if d is Decision.FORWARDED and model.index.get((0, rec.id)) == _entry(rec)
    }
    live = {(k, e) for k, e in model.live_entries().items()}
    again = dict((rec.label, d) for rec, d in model.process_batch(records))
    for label in saved_and_live:
        rec = next(r for r in records if r.label == label)
        if ((0, rec.id), _entry(rec)) in live:
            assert again[label] is Decision.REPLAYED


def test_null_offset_is_never_a_replay() -> None:
    model = DedupModel(10, per_partition=False)
    rec = Rec(("a",), 5, 0, None, "x")
    assert [model.process(rec), model.process(rec)] == [Decision.FORWARDED, Decision.DUPLICATE]


def test_each_partition_is_a_task_when_key_is_part_of_the_id() -> None:
    model = DedupModel(10, per_partition=True)
    records = [Rec(("k",), 100, 0, 0, "p0"), Rec(("k",), 100, 1, 0, "p1"), Rec(("j",), 50, 1, 1, "late?")]
    decisions = [d for _, d in model.process_batch(records)]
    # same key in two partitions: two tasks, two stores; partition 1's stream time is its own
    assert decisions == [Decision.FORWARDED, Decision.FORWARDED, Decision.LATE]


def _entry(rec: Rec) -> Entry:
    return Entry(rec.ts, rec.partition, rec.offset)
