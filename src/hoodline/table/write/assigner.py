"""Bucket assigner (Hudi RFC-24): give every untagged record (an insert) a file group.

Per partition, inserts (sorted by record key, so files get narrow key ranges) first fill the
partition's small files up to the max file size, then go to new file groups of
``max file size / average record size`` records each.

Distributed use: the assigner runs once per task on that task's share of the records (records of
one key must all be in one task). Two tasks never pick the same file group:

* a small file is only filled by the task ``crc32(file id) % num_tasks`` (Flink Hudi assigns
  small files to tasks the same way), or on merge-on-read (:attr:`WriteProfile.ranked`) the
  i-th smallest candidate by task i, so every task has one to fill, and
* new file ids are UUIDs derived from (instant, partition, task id, sequence number), unique per
  task and identical when a task is retried with the same input.
"""

from __future__ import annotations

import uuid
import zlib

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from hoodline.table.index.bloom_index import file_id_column
from hoodline.table.parallel import map_in_threads
from hoodline.table.write.profile import WriteProfile
from hoodline.table.write.records import (
    FILE_ID,
    PARTITION_PATH,
    RECORD_KEY,
    dictionary_codes,
    group_slices,
    string_sort_order,
    take_rows,
)

_NAMESPACE = uuid.UUID("0b6c0f52-4a59-4d8e-a0f3-2f9c71e5d4b7")


def new_file_id(instant_ts: str, partition: str, task_id: int, seq: int) -> str:
    """Hudi-style file id (``<uuid>-0``) unique per (instant, partition, task, sequence)."""
    return f"{uuid.uuid5(_NAMESPACE, f'{instant_ts}/{partition}/{task_id}/{seq}')}-0"


def owns_small_file(file_id: str, task_id: int, num_tasks: int) -> bool:
    return zlib.crc32(file_id.encode()) % max(1, num_tasks) == task_id


class BucketAssigner:
    """Assigns file ids to the inserts of one task for one instant."""

    def __init__(
        self,
        profile: WriteProfile,
        instant_ts: str,
        task_id: int = 0,
        num_tasks: int = 1,
        use_small_files: bool = True,
        threads: int = 1,
        dictionary_file_ids: bool = False,
    ) -> None:
        if not 0 <= task_id < max(1, num_tasks):
            raise ValueError(f"task id {task_id} is not in [0, {num_tasks})")
        self.profile = profile
        self.instant_ts = instant_ts
        self.task_id = task_id
        self.num_tasks = max(1, num_tasks)
        self.use_small_files = use_small_files
        self.threads = threads
        #: give the file id column dictionary-encoded (see ``tag_and_assign``)
        self.dictionary_file_ids = dictionary_file_ids
        self._seq = 0

    def assign(self, tagged: pa.Table) -> pa.Table:
        """Fill null ``_hoodline_file_id`` values; tagged (update) records keep theirs.

        Inserts of a partition that go to more than one file group are cut in record-key
        order (partitions sorted on ``threads`` threads); when a partition's inserts all go to
        one group, no sort is needed."""
        if tagged.num_rows == 0:
            return tagged
        file_col = tagged.column(FILE_ID)
        is_insert = np.asarray(pc.is_null(file_col).to_numpy(zero_copy_only=False), dtype=bool)
        if not is_insert.any():
            return tagged
        insert_rows = np.flatnonzero(is_insert)
        every_row = len(insert_rows) == tagged.num_rows

        def of_inserts(name: str) -> pa.ChunkedArray:
            col = tagged.select([name])
            return (col if every_row else take_rows(col, insert_rows)).column(0)

        codes, partitions = dictionary_codes(of_inserts(PARTITION_PATH))
        order, runs = group_slices(codes)  # each partition's inserts, in input order
        runs.sort(key=lambda run: partitions[run[0]])
        plans = [self._plan(partitions[code], stop - start) for code, start, stop in runs]
        keys = of_inserts(RECORD_KEY) if any(len(p) > 1 for p in plans) else None

        def rows_in_key_order(i: int) -> npt.NDArray[np.int64]:
            _code, start, stop = runs[i]
            rows = order[start:stop]
            if len(plans[i]) == 1 or keys is None:
                return rows
            part_keys = take_rows(pa.table({RECORD_KEY: keys}), rows).column(0)
            by_key: npt.NDArray[np.int64] = rows[string_sort_order(part_keys)]
            return by_key

        def sort_cost(i: int) -> int:
            return runs[i][2] - runs[i][1] if len(plans[i]) > 1 else 0

        # partitions are sorted on several threads (Arrow's sort releases the GIL)
        ordered = map_in_threads(rows_in_key_order, range(len(runs)), self.threads, sort_cost)
        ids: list[str] = []
        assigned = np.empty(len(insert_rows), dtype=np.int64)
        for counts, rows in zip(plans, ordered, strict=True):
            base = len(ids)
            ids.extend(fid for fid, _ in counts)
            assigned[rows] = np.repeat(np.arange(base, base + len(counts)), [c for _, c in counts])
        existing = np.full(tagged.num_rows, -1, dtype=np.int64)
        existing_ids: list[str] = []
        known = np.flatnonzero(~is_insert)
        if len(known):
            kcodes, kvalues = dictionary_codes(file_col.take(pa.array(known)))
            existing[known] = kcodes
            existing_ids = kvalues
        existing[insert_rows] = assigned + len(existing_ids)
        col = file_id_column(existing, existing_ids + ids, self.dictionary_file_ids)
        idx = tagged.schema.get_field_index(FILE_ID)
        return tagged.set_column(idx, FILE_ID, col)

    def _plan(self, partition: str, count: int) -> list[tuple[str, int]]:
        """(file id, number of inserts) for ``count`` inserts into ``partition``."""
        plan: list[tuple[str, int]] = []
        left = count
        if self.use_small_files:
            candidates = self.profile.small_files(partition, self.num_tasks)
            if self.profile.ranked:
                mine = candidates[self.task_id:self.task_id + 1]
            else:
                mine = [s for s in candidates
                        if owns_small_file(s.file_id, self.task_id, self.num_tasks)]
            smalls = sorted(mine, key=lambda s: (s.size_bytes, s.file_id))
            for small in smalls:
                if left == 0:
                    break
                room = min(self.profile.room_in(small), left)
                if room > 0:
                    plan.append((small.file_id, room))
                    left -= room
        per_file = self.profile.records_per_new_file()
        while left > 0:
            take = min(per_file, left)
            plan.append((new_file_id(self.instant_ts, partition, self.task_id, self._seq), take))
            self._seq += 1
            left -= take
        return plan
