"""Hudi's key generators: record keys and partition paths computed column-at-a-time.

* :mod:`~hoodline.table.keygen.kinds`: which generator a table uses (Java's class names).
* :mod:`~hoodline.table.keygen.values`: checking and rendering key and partition columns.
* :mod:`~hoodline.table.keygen.timestamp`: ``TimestampBasedKeyGenerator``'s partition paths.
* :mod:`~hoodline.table.keygen.joda`: the Joda date patterns those paths are written with.
* :mod:`~hoodline.table.keygen.generator`: :class:`KeyGenerator`, applying a table's generator.
"""
