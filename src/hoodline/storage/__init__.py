"""Where tables live: local paths and object stores (S3, GCS, Azure), behind one set of
operations (:mod:`.paths`, :mod:`.ops`)."""
