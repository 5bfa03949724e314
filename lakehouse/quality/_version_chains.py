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

A chain has no gap, so it breaks no rule whatever the store's ``stream_time - R`` (the horizon, before
which gaps are allowed): the horizon only allows more, and a key is certified however many of its versions
start before it. A key whose versions leave a gap is not a chain, allowed or not, so it is not certified;
neither is a key with a NULL ``valid_from`` or a row that breaks a row rule. An uncertified key is not
necessarily broken: the exact check decides.

An incremental check may give the aggregate only a changed key's versions from the segments a change can
reach (:mod:`lakehouse.quality._incremental`): a suffix of its versions in ``valid_from`` order. A suffix
of a chain is a chain (its versions still end where the next one starts, down to the open one), and a
suffix certified as a chain breaks no rule among all of the key's versions (that module's argument: the
window over the suffix flags what the window over all of them flags). A suffix with a gap, allowed or not,
is not certified and goes to the exact window pass, over the same suffix.

The aggregate keeps four values per key (what the map side's hash table holds for every key): the
multisets' two sums, the smallest ``valid_from`` and one count in which an open version adds 1 and a
version breaking a rule adds 2, so it is 1 exactly when one version is open and none is broken.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakehouse.versioned._plan import VALID_FROM, VALID_TO

_LOW_32 = 0xFFFFFFFF


def uncertified_keys(table: DataFrame, keys: Sequence[str], row_broken: Column) -> DataFrame:
    """The distinct keys of ``table`` whose versions are not certified as a chain (lazy, one aggregate).

    ``row_broken`` is true for a row that breaks a row rule (NULL counts as false).
    """
    valid_from, valid_to = F.col(VALID_FROM), F.col(VALID_TO)
    from_high, from_low = _hash_halves(valid_from)
    to_high, to_low = _hash_halves(valid_to)
    broken = row_broken | valid_from.isNull() | (valid_to <= valid_from)
    # One sum per hash half of (valid_from) - (set valid_to): the two multisets' difference, per key.
    from_minus_to_high = from_high - F.when(valid_to.isNotNull(), to_high).otherwise(0)
    from_minus_to_low = from_low - F.when(valid_to.isNotNull(), to_low).otherwise(0)
    per_key = table.groupBy(*keys).agg(
        F.sum(F.when(broken, 2).when(valid_to.isNull(), 1).otherwise(0)).alias("open_or_broken"),
        F.min(valid_from).alias("first_from"),
        F.sum(from_minus_to_high).alias("from_minus_to_high"),
        F.sum(from_minus_to_low).alias("from_minus_to_low"),
    )
    first_high, first_low = _hash_halves(F.col("first_from"))
    chain = (
        (F.col("open_or_broken") == 1)
        & (F.col("from_minus_to_high") == first_high)
        & (F.col("from_minus_to_low") == first_low)
    )
    return per_key.where(~F.coalesce(chain, F.lit(False))).select(*keys)


def _hash_halves(value: Column) -> tuple[Column, Column]:
    """The high (signed) and low (unsigned) 32 bits of ``xxhash64(value)``, each a ``long``."""
    hashed = F.xxhash64(value)
    return F.shiftright(hashed, 32), hashed.bitwiseAND(F.lit(_LOW_32))
