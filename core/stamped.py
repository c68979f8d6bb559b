"""Values built from rows, kept in this process by row id under the row's `updated_at` as read beside them: a reader
reads the ids and stamps of the rows it needs, and the rows themselves again only where a stamp is not the one their
value was kept with (tools.selectors.agent_tool_specs, memory.selectors.agent_block_specs: every step reads them).

An entry is stored under the stamp read in the same statement as its data, so what is kept never outlives a change, as
long as every write of such a row sets its stamp. Bounded by a budget of `cost` (1 an entry unless given): the least
recently used go first.
"""

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from django.db import connection

V = TypeVar("V")


class StampedCache(Generic[V]):
    def __init__(self, budget: int, cost: Callable[[V], int] = lambda _value: 1):
        self.budget, self.cost, self.spent = budget, cost, 0
        self._entries: OrderedDict[str, tuple[object, V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, row_id: str, stamp) -> V | None:
        with self._lock:
            entry = self._entries.get(row_id)
            if entry is None or entry[0] != stamp:
                return None
            self._entries.move_to_end(row_id)
            return entry[1]

    def put(self, row_id: str, stamp, value: V) -> None:
        with self._lock:
            if (old := self._entries.pop(row_id, None)) is not None:
                self.spent -= self.cost(old[1])
            self._entries[row_id] = (stamp, value)
            self.spent += self.cost(value)
            while self.spent > self.budget and self._entries:
                self.spent -= self.cost(self._entries.popitem(last=False)[1][1])

    def read(
        self,
        *,
        stamps_sql: str,
        params: Sequence,
        rows_sql: Callable[[int], str],
        build: Callable[[tuple], V],
    ) -> tuple[list[str], dict[str, V], list[tuple]]:
        """The values of the rows `stamps_sql` names (its columns: id, stamp), in its order: one statement of ids and
        stamps, and one more (`rows_sql(count)`: id, stamp, then any columns; `build` makes a value of such a row) for
        the rows whose value is not kept under their stamp. Returns their ids in order (one deleted meanwhile left
        out), the values by id, and every (id, stamp) read (a row read again comes twice: its newer stamp last)."""
        with connection.cursor() as cursor:
            cursor.execute(stamps_sql, params)
            stamps = cursor.fetchall()
            values = {row_id: self.get(row_id, stamp) for row_id, stamp in stamps}
            missing = [row_id for row_id, value in values.items() if value is None]
            if missing:  # read with their stamps: a row changed since the statement above is kept as it is now
                cursor.execute(rows_sql(len(missing)), missing)
                for row in cursor.fetchall():
                    row_id, stamp = row[0], row[1]
                    value = values[row_id] = build(row)
                    self.put(row_id, stamp, value)
                    stamps.append((row_id, stamp))
        ids = [row_id for row_id in dict.fromkeys(row_id for row_id, _ in stamps) if values.get(row_id) is not None]
        return ids, values, stamps
