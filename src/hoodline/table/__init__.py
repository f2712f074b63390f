"""Apache Hudi copy-on-write tables (table version 6, timeline layout 1), engine-agnostic.

Metadata and reads (one concept per module):

* :mod:`~hoodline.table.properties` - ``hoodie.properties`` <-> :class:`TableConfig`
* :mod:`~hoodline.table.instant` - instant names, states, ordering, instant-time generator
* :mod:`~hoodline.table.timeline` - atomic state transitions, commit metadata, extra metadata
* :mod:`~hoodline.table.commit_metadata` - the JSON body of a completed commit
* :mod:`~hoodline.table.fs_view` - committed file groups / slices (as hudi-rs picks them)
* :mod:`~hoodline.table.markers`, :mod:`~hoodline.table.rollback` - failed-write cleanup
* :mod:`~hoodline.table.lock` - single-writer lock with heartbeat and expiry
* :mod:`~hoodline.table.clean` - removal of file versions older than the retained commits
* :mod:`~hoodline.table.schema` - Arrow <-> Avro schema, schema evolution rules
* :mod:`~hoodline.table.read` - snapshot, time-travel, incremental reads returning Arrow

Writes live in :mod:`hoodline.table.write` (key generation, index, bucket assignment, writers).
"""
