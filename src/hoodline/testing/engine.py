"""An in-process engine: runs a round's tasks one after another in this process (no Spark).

For fast tests of the round driver's policy (restore, retries, the double-commit guard, failure
handling) and of connector plug-ins end to end through a real table. It runs exactly the task
functions the Spark engine runs (:class:`~hoodline.pipeline.tasks.RoundJob`), with the same
shuffles (by partition and key to assigners, by file group to writers) done in memory, and checks
the task reports with the same :class:`~hoodline.pipeline.engine.RoundOutputBuilder`.

``before_job`` is called with every job before it runs and may raise to simulate a failed job
(e.g. a lost executor: raise :class:`~hoodline.errors.EngineJobError`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodline.pipeline.engine import Engine, RoundOutput, RoundOutputBuilder
from hoodline.pipeline.plugin import ReadOutcome
from hoodline.pipeline.tasks import ErrorRows, RoundJob, TaskFailure
from hoodline.table.write.records import FILE_ID, PARTITION_PATH, RECORD_KEY, dictionary_codes

__all__ = ["InProcessEngine"]


def _shuffle(
    batches: Sequence[pa.RecordBatch], schema: pa.Schema, columns: Sequence[str], parts: int
) -> list[list[pa.RecordBatch]]:
    """``batches`` split into ``parts`` so that rows with equal ``columns`` values meet."""
    out: list[list[pa.RecordBatch]] = [[] for _ in range(parts)]
    table = pa.Table.from_batches(list(batches), schema=schema) if batches else None
    if table is None or table.num_rows == 0:
        return out
    if len(columns) == 1:
        key = table.column(columns[0])
    else:
        key = pc.binary_join_element_wise(*(table.column(c) for c in columns), "\x00")
    codes, _ = dictionary_codes(key)
    target = codes % parts
    for p in range(parts):
        rows = table.take(pa.array(np.flatnonzero(target == p)))
        out[p] = rows.combine_chunks().to_batches()
    return out


class InProcessEngine(Engine):
    """Runs round jobs in this process (see module docs)."""

    def __init__(
        self,
        parallelism: int = 2,
        *,
        before_job: Callable[[RoundJob], None] | None = None,
    ) -> None:
        self._parallelism = parallelism
        self.before_job = before_job
        #: jobs started so far
        self.jobs = 0
        self._attempts = 0

    @property
    def default_parallelism(self) -> int:
        return self._parallelism

    def run_round(self, job: RoundJob) -> RoundOutput:
        self.jobs += 1
        if self.before_job is not None:
            self.before_job(job)
        out = RoundOutputBuilder(job.readers, job.writer_tasks)
        if job.direct_write:
            for i in range(job.readers):
                self._attempts += 1
                for item in job.read_and_write(i, self._attempts):
                    if isinstance(item, bytes):
                        out.write_status(i, item)
                    else:
                        self._reader_item(out, i, item)
                out.writer_done(i)
            return out.build()
        records: list[pa.RecordBatch] = []
        for i in range(job.readers):
            for item in job.read(i):
                if isinstance(item, pa.RecordBatch):
                    records.append(item)
                else:
                    self._reader_item(out, i, item)
        schema = job.record_schema
        if job.key_shuffle:
            shares = _shuffle(records, schema, [PARTITION_PATH, RECORD_KEY], job.writers)
            records = []
            for task, share in enumerate(shares):
                for result in job.assign(share, task):
                    if isinstance(result, TaskFailure):
                        out.failure(result)
                    else:
                        records.extend(result.combine_chunks().to_batches())
        for task, share in enumerate(_shuffle(records, schema, [FILE_ID], job.writers)):
            self._attempts += 1
            for status in job.write(share, task, self._attempts):
                if isinstance(status, TaskFailure):
                    out.failure(status)
                else:
                    out.write_status(task, status)
            out.writer_done(task)
        return out.build()

    @staticmethod
    def _reader_item(
        out: RoundOutputBuilder, subtask: int, item: ErrorRows | ReadOutcome | TaskFailure
    ) -> None:
        if isinstance(item, ErrorRows):
            out.bad_records(item.batch)
        elif isinstance(item, ReadOutcome):
            out.reader_outcome(subtask, item)
        else:
            out.failure(item)

    def wait_until_idle(self, timeout_s: float = 60.0) -> None:
        return None  # tasks run inside run_round: none is left running
