"""The suites of an assignment store's two tables (``lakehouse.kind = assignment_store``).

The assignment table (one row per generation, client, task and role) is checked against the
subscriptions of the same generation, read from the store's ``subscriptions`` table next to it:

- ``one_active_per_task``: every task of the generation's topology has exactly one active client, and no
  task outside it has one.
- ``one_role_per_client_task``: no client holds a task in two roles (active and standby, or warm-up).
- ``standbys_per_stateful_task``: every stateful task has ``min(num_standby_replicas, clients - 1)``
  standbys.
- ``standby_tag_diversity`` (KIP-708, with rack-aware tags configured), for the stateful tasks no client
  reported state for (no previous role, no lag): no standby could be moved to a client holding nothing of
  the task whose tag values differ from the task's other replicas (active and standbys) on more tags, in
  the tags' precedence order (lexicographically). Where clients have state, KIP-441's stickiness and
  catch-up come first and the assignor may keep a less diverse standby, so those tasks are not judged.

The subscriptions table: one row per client and generation, and one topology per generation.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakehouse.assignment.state import AssignmentConfig, Role
from lakehouse.quality.rules import DETAIL_COL, Rule, violation_rows, violations_of

KIND = "assignment_store"
GENERATION = "generation"
ONE_ACTIVE = Rule("one_active_per_task", "exactly one active client per task of the generation's topology")
ONE_ROLE = Rule("one_role_per_client_task", "no client holds a task in two roles (active/standby/warm-up)")
STANDBYS = Rule(
    "standbys_per_stateful_task", "min(num_standby_replicas, clients - 1) standbys per stateful task"
)
DIVERSITY = Rule(
    "standby_tag_diversity",
    "no standby of a task no client has state for could move to a free client differing from the task's "
    "other replicas on more tags (KIP-708, tags in precedence order)",
)
ONE_CLIENT_ROW = Rule("one_row_per_client", "one subscription row per client and generation")
ONE_TOPOLOGY = Rule(
    "one_topology_per_generation", "every client of a generation subscribed with one topology"
)


def assignment_rules(config: AssignmentConfig) -> tuple[Rule, ...]:
    """The rules of an assignment table's suite (tag diversity only with rack-aware tags)."""
    rules = (ONE_ACTIVE, ONE_ROLE, STANDBYS)
    return (*rules, DIVERSITY) if config.rack_aware_assignment_tags else rules


def subscription_rules() -> tuple[Rule, ...]:
    """The rules of a subscriptions table's suite."""
    return (ONE_CLIENT_ROW, ONE_TOPOLOGY)


def assignment_violations(
    assignment: DataFrame, subscriptions: DataFrame, config: AssignmentConfig
) -> DataFrame:
    """The violation rows of ``assignment`` against the ``subscriptions`` of its generations."""
    generations = assignment.select(GENERATION).distinct()
    members = subscriptions.join(generations, on=GENERATION, how="left_semi")
    found = [_replica_counts(assignment, members, config), _role_overlaps(assignment)]
    if config.rack_aware_assignment_tags:
        found.append(_improvable_standbys(assignment, members, config.rack_aware_assignment_tags))
    result = found[0]
    for more in found[1:]:
        result = result.unionByName(more)
    return result


def subscription_violations(subscriptions: DataFrame) -> DataFrame:
    """The violation rows of a subscriptions table."""
    rows = subscriptions.groupBy(GENERATION, "process_id").agg(F.count(F.lit(1)).alias("rows"))
    topologies = subscriptions.groupBy(GENERATION).agg(
        F.min(_topology()).alias("first"), F.max(_topology()).alias("last")
    )
    client_key = F.format_string("generation=%d client=%s", F.col(GENERATION), F.col("process_id"))
    generation_key = F.format_string("generation=%d", F.col(GENERATION))
    return violations_of(
        ONE_CLIENT_ROW, rows.where(F.col("rows") > 1), client_key, F.format_string("%d rows", "rows")
    ).unionByName(
        violations_of(
            ONE_TOPOLOGY,
            topologies.where(F.col("first") != F.col("last")),
            generation_key,
            F.lit("clients subscribed with different task sets"),
        )
    )


def _topology() -> Column:
    return F.struct(F.col("stateful_tasks"), F.col("stateless_tasks"))


def _task_key() -> Column:
    return F.format_string("generation=%d task=%s", F.col(GENERATION), F.col("task"))


def _topology_tasks(members: DataFrame) -> DataFrame:
    """(generation, task, stateful, clients) for every task of each generation's topology."""
    per_generation = members.groupBy(GENERATION).agg(
        F.min("stateful_tasks").alias("stateful"),
        F.min("stateless_tasks").alias("stateless"),
        F.count(F.lit(1)).alias("clients"),
    )
    stateful = per_generation.select(
        GENERATION, F.explode("stateful").alias("task"), F.lit(True).alias("stateful"), "clients"
    )
    stateless = per_generation.select(
        GENERATION, F.explode("stateless").alias("task"), F.lit(False).alias("stateful"), "clients"
    )
    return stateful.unionByName(stateless)


def _replica_counts(assignment: DataFrame, members: DataFrame, config: AssignmentConfig) -> DataFrame:
    """Actives of every task and standbys of every stateful task, from one aggregate and one join."""
    counts = assignment.groupBy(GENERATION, "task").agg(
        F.count_if(F.col("role") == F.lit(Role.ACTIVE.value)).alias("actives"),
        F.count_if(F.col("role") == F.lit(Role.STANDBY.value)).alias("standbys"),
    )
    joined = _topology_tasks(members).join(counts, on=[GENERATION, "task"], how="full_outer")
    actives = F.coalesce(F.col("actives"), F.lit(0))
    standbys = F.coalesce(F.col("standbys"), F.lit(0))
    expected = F.least(F.lit(config.num_standby_replicas), F.col("clients") - 1)
    flagged = joined.select(
        GENERATION,
        "task",
        (actives != 1).alias(ONE_ACTIVE.name),
        (F.coalesce(F.col("stateful"), F.lit(False)) & (standbys != expected)).alias(STANDBYS.name),
        F.format_string("%d active clients, %d standbys (expected %d)", actives, standbys, expected).alias(
            DETAIL_COL
        ),
    )
    return violation_rows(flagged, (ONE_ACTIVE, STANDBYS), _task_key(), F.col(DETAIL_COL))


def _role_overlaps(assignment: DataFrame) -> DataFrame:
    roles = assignment.groupBy(GENERATION, "client", "task").agg(
        F.sort_array(F.collect_list("role")).alias("roles")
    )
    key = F.format_string(
        "generation=%d task=%s client=%s", F.col(GENERATION), F.col("task"), F.col("client")
    )
    return violations_of(ONE_ROLE, roles.where(F.size("roles") > 1), key, F.concat_ws(",", F.col("roles")))


def _improvable_standbys(assignment: DataFrame, members: DataFrame, tags: tuple[str, ...]) -> DataFrame:
    """Standbys some free client of the generation would replace with a lexicographically greater gain.

    ``seen(values)`` marks, per tag key, whether the value is used by the task's other replicas; a
    smaller ``seen`` (arrays compare lexicographically) is a greater gain. A standby new on every key
    (``seen`` all false) cannot be improved.
    """
    values = members.select(
        GENERATION,
        F.col("process_id").alias("client"),
        F.array(*[F.col("tags")[key] for key in tags]).alias("values"),
    )
    replicas = assignment.where(F.col("role").isin(Role.ACTIVE.value, Role.STANDBY.value)).join(
        values, on=[GENERATION, "client"], how="inner"
    )
    per_task = replicas.groupBy(GENERATION, "task").agg(
        F.collect_list(F.struct("client", "values")).alias("replicas")
    )
    standbys = (
        replicas.where(F.col("role") == F.lit(Role.STANDBY.value))
        .join(_tasks_with_state(members), on=[GENERATION, "task"], how="left_anti")
        .join(per_task, on=[GENERATION, "task"], how="inner")
    )
    others = F.filter("replicas", lambda r: r["client"] != F.col("client"))
    standbys = standbys.select(
        GENERATION, "task", "client", "replicas", _seen(F.col("values"), others, len(tags)).alias("seen")
    ).where(F.exists("seen", lambda used: used))
    candidates = values.select(
        GENERATION, F.col("client").alias("candidate"), F.col("values").alias("candidate_values")
    )
    paired = standbys.join(candidates, on=GENERATION, how="inner").join(
        assignment.select(GENERATION, "task", F.col("client").alias("candidate")),
        on=[GENERATION, "task", "candidate"],
        how="left_anti",
    )
    scored = paired.where(_seen(F.col("candidate_values"), others, len(tags)) < F.col("seen"))
    better = scored.groupBy(GENERATION, "task", "client").agg(F.min("candidate").alias("candidate"))
    key = F.format_string(
        "generation=%d task=%s client=%s", F.col(GENERATION), F.col("task"), F.col("client")
    )
    return violations_of(DIVERSITY, better, key, F.format_string("%s would differ on more tags", "candidate"))


def _tasks_with_state(members: DataFrame) -> DataFrame:
    """(generation, task) of every task some client reported a previous role or a lag for."""
    reported = F.array_union(
        F.array_union(F.col("prev_active"), F.col("prev_standby")), F.map_keys(F.col("task_lags"))
    )
    return members.select(GENERATION, F.explode(reported).alias("task")).distinct()


def _seen(values: Column, others: Column, keys: int) -> Column:
    """Per tag key, whether ``values`` has a value one of ``others`` (replica structs) has too."""
    return F.transform(
        F.sequence(F.lit(0), F.lit(keys - 1)),
        lambda i: F.exists(others, lambda other: F.get(other["values"], i) == F.get(values, i)),
    )
