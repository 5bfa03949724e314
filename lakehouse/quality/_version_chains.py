"""Keys whose versions one hash aggregate certifies as a sound chain, without sorting them.

For one key, sort its versions by ``valid_from``: ``f1 < ... < fn``. Its versions form a **chain** when
every ``valid_from`` is distinct, every closed version has ``valid_from < valid_to``, exactly one version is
open (``valid_to`` NULL) and every other one ends where the next one starts (``t_i = f_(i+1)``). That holds
if and only if, besides the bounds and the one open version, the multiset of the set ``valid_to`` equals the
multiset of the ``valid_from`` minus one copy of its minimum: the version with the largest ``valid_from``
must be the open one (nothing set is larger), the next largest must end at it, and so on down, and a
repeated ``valid_from`` leaves two versions needing the same end. A chain breaks no per-key rule of the
versioned suite (unique ``(key, valid_from)``, no overlap, versions touch, one open version).

The multisets are compared by summing a 64-bit hash (``xxhash64``) of each bound, split into its high and
low 32 bits so that the sums are exact ``long`` sums: two different multisets pass for equal with
probability about 2^-64 per key. Spark computes all this as one hash aggregate per key (partial, map-side
aggregation, no sort).

A gap between versions is allowed when it ends at or before the store's ``stream_time - R`` (the horizon):
a key with two or more versions starting at or before the horizon may have such gaps, which the multisets
cannot tell from an overlap, so it is not certified. Neither is a key with a NULL ``valid_from`` or a row
that breaks a row rule. An uncertified key is not necessarily broken: the exact check decides.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakehouse.versioned._plan import VALID_FROM, VALID_TO

_LOW_32 = 0xFFFFFFFF


def uncertified_keys(
    table: DataFrame, keys: Sequence[str], row_broken: Column, horizon_us: int | None
) -> DataFrame:
    """The distinct keys of ``table`` whose versions are not certified as a chain (lazy, one aggregate).

    ``row_broken`` is true for a row that breaks a row rule (NULL counts as false); ``horizon_us`` is
    ``stream_time - R`` (None: no gap is allowed, so no version counts as before it).
    """
    valid_from, valid_to = F.col(VALID_FROM), F.col(VALID_TO)
    from_high, from_low = _hash_halves(valid_from)
    to_high, to_low = _hash_halves(valid_to)
    at_or_before_horizon = (
        F.unix_micros(valid_from) <= F.lit(horizon_us) if horizon_us is not None else F.lit(False)
    )
    # One sum per hash half of (valid_from) - (set valid_to): the two multisets' difference, per key.
    from_minus_to_high = from_high - F.when(valid_to.isNotNull(), to_high).otherwise(0)
    from_minus_to_low = from_low - F.when(valid_to.isNotNull(), to_low).otherwise(0)
    per_key = table.groupBy(*keys).agg(
        F.count(F.when(valid_to.isNull(), 1)).alias("open"),
        F.count(F.when(row_broken | valid_from.isNull() | (valid_to <= valid_from), 1)).alias("broken"),
        F.count(F.when(at_or_before_horizon, 1)).alias("before_horizon"),
        F.min(valid_from).alias("first_from"),
        F.sum(from_minus_to_high).alias("from_minus_to_high"),
        F.sum(from_minus_to_low).alias("from_minus_to_low"),
    )
    first_high, first_low = _hash_halves(F.col("first_from"))
    chain = (
        (F.col("open") == 1)
        & (F.col("broken") == 0)
        & (F.col("before_horizon") <= 1)
        & (F.col("from_minus_to_high") == first_high)
        & (F.col("from_minus_to_low") == first_low)
    )
    return per_key.where(~F.coalesce(chain, F.lit(False))).select(*keys)


def _hash_halves(value: Column) -> tuple[Column, Column]:
    """The high (signed) and low (unsigned) 32 bits of ``xxhash64(value)``, each a ``long``."""
    hashed = F.xxhash64(value)
    return F.shiftright(hashed, 32), hashed.bitwiseAND(F.lit(_LOW_32))
