"""The suite of a versioned store (``lakehouse.kind = versioned_store``).

One hash aggregate per key first certifies the keys whose versions form a sound chain and break no row
rule (:mod:`lakehouse.quality._version_chains`); a window over the other keys' versions (per key, by
``valid_from``) then flags every row that breaks a rule:

- ``unique_key_valid_from``: no two versions share ``(key, valid_from)``.
- ``valid_from_before_valid_to``: ``valid_from < valid_to`` wherever ``valid_to`` is set.
- ``no_overlap``: a version ends at or before the next version of its key starts (an open version
  followed by another one overlaps it).
- ``versions_touch``: consecutive versions touch (``valid_to`` = the next ``valid_from``) wherever a read
  can see it: a gap that ends at or before ``stream_time - R`` is allowed (a seal does not write the
  versions already expired when it commits, and no read looks before that bound).
- ``one_open_version``: exactly one version per key has ``valid_to`` NULL (flagged once per key).
- ``segment_of_valid_to``: ``segment = floor(valid_to / segment_interval)`` (NULL for open versions).
- ``expired_segments_dropped``: nothing is left in a segment below the bound of the last ``expire()``
  (``floor((stream_time - R) / interval)`` at that time). Open versions live in the NULL segment, which
  expiry never drops: old latest tombstones are kept by design (see the README).
"""

from __future__ import annotations

import operator
from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from lakehouse.quality._version_chains import uncertified_keys
from lakehouse.quality.rules import Rule, key_text, no_violations, violation_rows
from lakehouse.versioned._plan import VALID_FROM, VALID_TO
from lakehouse.versioned.segments import SEGMENT_COL, segment_column
from lakehouse.versioned.settings import StoreSettings

KIND = "versioned_store"
UNIQUE = Rule("unique_key_valid_from", "(key, valid_from) is unique")
BOUNDS = Rule("valid_from_before_valid_to", "valid_from is before valid_to wherever valid_to is set")
NO_OVERLAP = Rule("no_overlap", "no two versions of a key overlap")
TOUCH = Rule(
    "versions_touch",
    "consecutive versions of a key touch (valid_to = the next valid_from) after stream_time - retention",
)
ONE_OPEN = Rule("one_open_version", "exactly one open version (valid_to IS NULL) per key")
SEGMENT = Rule("segment_of_valid_to", "segment = floor(valid_to / segment_interval), NULL when open")
#: Up to this many keys are broadcast to a join picking their rows, more are shuffled.
_BROADCAST_KEYS = 100_000


def expiry_rule(bound: int | None) -> Rule:
    """The retention rule, naming the bound of the last ``expire()`` (None: no expire() recorded)."""
    what = (
        "no expire() recorded yet"
        if bound is None
        else f"the last expire() dropped the segments below {bound}"
    )
    return Rule("expired_segments_dropped", f"no version left in an expired segment ({what})")


def versioned_violations(
    table: DataFrame, settings: StoreSettings, expired_below: int | None, horizon_us: int | None
) -> DataFrame:
    """The rows of a versioned store's ``table`` that break a rule, as violation rows.

    Runs the per-key aggregate now (one scan of the table), checkpoints the keys it cannot certify and
    counts them. With no such key (a sound store) nothing breaks a rule and the result is an empty frame
    held by the driver (validating it reads nothing); else the window pass over those keys' versions is
    returned, lazy (a second scan, picking their rows). ``horizon_us`` is
    the store's ``stream_time - R`` (None before the first put): a gap between versions that ends at or
    before it is not a violation.
    """
    keys = list(settings.keys)
    rows = _row_flags(settings, expired_below)
    any_row_broken = rows[BOUNDS.name] | rows[SEGMENT.name] | rows[expiry_rule(None).name]
    suspects = uncertified_keys(table, keys, any_row_broken).localCheckpoint()
    count = suspects.count()
    if count == 0:
        return no_violations(table.sparkSession)
    suspect_rows = rows_of_keys(table, suspects, keys, count)
    return _window_violations(suspect_rows, settings, expired_below, horizon_us)


def rows_of_keys(table: DataFrame, found: DataFrame, keys: list[str], count: int) -> DataFrame:
    """The rows of ``table`` whose key is one of the ``count`` distinct keys of ``found`` (its columns
    ``keys``; a NULL key matches a NULL key), by a left-semi join: ``found`` is broadcast when small."""
    found = found.select(*keys).toDF(*[f"_found_{i}" for i in range(len(keys))])
    if count <= _BROADCAST_KEYS:
        found = F.broadcast(found)
    same_key = [table[key].eqNullSafe(found[f"_found_{i}"]) for i, key in enumerate(keys)]
    return table.join(found, reduce(operator.and_, same_key), "left_semi")


def _row_flags(settings: StoreSettings, expired_below: int | None) -> dict[str, Column]:
    """The rules a row breaks on its own, by rule name (NULL counts as not broken)."""
    valid_to, segment = F.col(VALID_TO), F.col(SEGMENT_COL)
    expired = segment < F.lit(expired_below) if expired_below is not None else F.lit(False)
    return {
        BOUNDS.name: valid_to <= F.col(VALID_FROM),
        SEGMENT.name: ~segment.eqNullSafe(segment_column(VALID_TO, settings.interval_us)),
        expiry_rule(None).name: expired,
    }


def _window_violations(
    table: DataFrame, settings: StoreSettings, expired_below: int | None, horizon_us: int | None
) -> DataFrame:
    """Every rule's violation rows among ``table``'s versions (whole keys), by one window per key."""
    keys = list(settings.keys)
    by_time = Window.partitionBy(*keys).orderBy(F.col(VALID_FROM).asc())
    whole_key = by_time.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    valid_to, segment = F.col(VALID_TO), F.col(SEGMENT_COL)
    previous_from = F.lag(VALID_FROM, 1).over(by_time)
    next_from = F.lead(VALID_FROM, 1).over(by_time)
    open_versions = F.sum(valid_to.isNull().cast("int")).over(whole_key)
    readable_gap = F.unix_micros(next_from) > F.lit(horizon_us) if horizon_us is not None else F.lit(True)
    rows = _row_flags(settings, expired_below)
    flagged = table.select(
        *keys,
        VALID_FROM,
        VALID_TO,
        SEGMENT_COL,
        (previous_from == F.col(VALID_FROM)).alias(UNIQUE.name),
        rows[BOUNDS.name].alias(BOUNDS.name),
        (next_from.isNotNull() & (valid_to.isNull() | (valid_to > next_from))).alias(NO_OVERLAP.name),
        ((valid_to < next_from) & readable_gap).alias(TOUCH.name),
        (next_from.isNull() & (open_versions != 1)).alias(ONE_OPEN.name),
        rows[SEGMENT.name].alias(SEGMENT.name),
        rows[expiry_rule(None).name].alias(expiry_rule(None).name),
    )
    detail = F.format_string("valid_from=%s valid_to=%s segment=%s", F.col(VALID_FROM), valid_to, segment)
    return violation_rows(flagged, versioned_rules(expired_below), key_text(keys), detail)


def versioned_rules(expired_below: int | None) -> tuple[Rule, ...]:
    """The rules of a versioned store's suite, in the order they are reported."""
    return (UNIQUE, BOUNDS, NO_OVERLAP, TOUCH, ONE_OPEN, SEGMENT, expiry_rule(expired_below))
