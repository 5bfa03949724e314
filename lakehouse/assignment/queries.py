"""The questions the issue asks of the assignment history, each ONE Spark SQL statement.

Each constant is a template over the tables :meth:`AssignmentStore.register` creates (``{prefix}`` is the
prefix given to it, e.g. ``lakehouse``) with placeholders for the question's values. :func:`statement`
fills them in as SQL literals; the result is a plain statement to run with ``spark.sql`` or type in any
Spark SQL shell.

- :data:`OWNER_NOW` (``task``): the client running the task actively in the latest generation.
- :data:`OWNER_AT` (``task``, ``at``): the active client at time ``at``, by generation time: the
  latest generation whose ``time <= at`` (an assignment holds until the next generation's time).
- :data:`OWNER_AS_OF` (``task``, ``at``): the same from the table as Delta had it at ``at``
  (``TIMESTAMP AS OF``: by commit time, so it also shows what a reader saw then).
- :data:`MOVES_BETWEEN` (``from_generation``, ``to_generation``): per task and role whose clients
  differ, the clients that lost it and those that gained it (``G`` and ``G + 1`` for one rebalance).
- :data:`TASKS_PER_TAG` (``tag``, e.g. ``'zone'``): tasks held per value of a client tag in the latest
  generation, by role.

Values are inlined as literals rather than bound as parameter markers: with Delta's SQL extension,
Spark 4.1+ drops ``spark.sql(query, args=...)`` parameters (delta-io/delta#7640, SPARK-59672).
"""

from __future__ import annotations

from datetime import UTC, datetime

from lakehouse.errors import InvalidInputError

OWNER_NOW = """
SELECT generation, client
FROM {prefix}_assignment
WHERE task = {task} AND role = 'active'
  AND generation = (SELECT max(generation) FROM {prefix}_assignment)
"""

OWNER_AT = """
SELECT generation, client
FROM {prefix}_assignment
WHERE task = {task} AND role = 'active'
  AND generation = (SELECT max(generation) FROM {prefix}_assignment WHERE time <= {at})
"""

OWNER_AS_OF = """
SELECT generation, client
FROM {prefix}_assignment TIMESTAMP AS OF {at}
WHERE task = {task} AND role = 'active'
  AND generation = (SELECT max(generation) FROM {prefix}_assignment TIMESTAMP AS OF {at})
"""

MOVES_BETWEEN = """
SELECT coalesce(old.task, new.task) AS task,
       coalesce(old.role, new.role) AS role,
       sort_array(collect_list(CASE WHEN new.client IS NULL THEN old.client END)) AS from_clients,
       sort_array(collect_list(CASE WHEN old.client IS NULL THEN new.client END)) AS to_clients
FROM (SELECT task, role, client FROM {prefix}_assignment WHERE generation = {from_generation}) AS old
FULL OUTER JOIN
     (SELECT task, role, client FROM {prefix}_assignment WHERE generation = {to_generation}) AS new
  ON old.task = new.task AND old.role = new.role AND old.client = new.client
WHERE old.client IS NULL OR new.client IS NULL
GROUP BY 1, 2
ORDER BY int(split(task, '_')[0]), int(split(task, '_')[1]), role
"""

TASKS_PER_TAG = """
SELECT s.tags[{tag}] AS tag_value,
       count_if(a.role = 'active') AS active,
       count_if(a.role = 'standby') AS standby,
       count_if(a.role = 'warmup') AS warmup,
       count(*) AS tasks
FROM {prefix}_assignment AS a
JOIN {prefix}_subscriptions AS s ON s.generation = a.generation AND s.process_id = a.client
WHERE a.generation = (SELECT max(generation) FROM {prefix}_assignment)
GROUP BY 1
ORDER BY 1
"""

QUERIES = {
    "owner_now": OWNER_NOW,
    "owner_at": OWNER_AT,
    "owner_as_of": OWNER_AS_OF,
    "moves_between": MOVES_BETWEEN,
    "tasks_per_tag": TASKS_PER_TAG,
}


def statement(template: str, prefix: str = "lakehouse", **values: object) -> str:
    """``template`` (a constant above, or a key of :data:`QUERIES`) for the tables of ``prefix``.

    ``values`` fill the placeholders as SQL literals: strings quoted, integers as they are, datetimes as
    ``TIMESTAMP`` literals (timezone-aware ones in UTC; naive ones are read in the session time zone).

    Examples:
        >>> print(statement("owner_now", "lh", task="0_3").splitlines()[-2])
        WHERE task = '0_3' AND role = 'active'
    """
    literals = {name: sql_literal(value) for name, value in values.items()}
    return QUERIES.get(template, template).format(prefix=prefix, **literals).strip()


def sql_literal(value: object) -> str:
    """``value`` as a Spark SQL literal.

    Raises:
        InvalidInputError: a type without a literal form here (bool, float, None, ...).
    """
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
            return f"TIMESTAMP '{value.isoformat(sep=' ')}+00:00'"
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    raise InvalidInputError(f"no SQL literal for {type(value).__name__} {value!r}")
