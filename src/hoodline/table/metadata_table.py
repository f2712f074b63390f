"""Java Hudi's metadata table (``.hoodie/metadata``), which hoodline does not maintain.

Java writers keep the metadata table in step with every commit and expect every writer to. A
writer that does not (Java's with ``hoodie.metadata.enable=false``) removes it before writing:
``HoodieTable.maybeDeleteMetadataTable`` → ``HoodieTableMetadataUtil.deleteMetadataTable`` clears
``hoodie.table.metadata.partitions`` (and ``….inflight``) in ``hoodie.properties``, then deletes
the folder. Readers then list files instead; a Java writer with the metadata table enabled
rebuilds it from the timeline on its next write. hoodline does the same when it opens a table
for writing, so no reader ever trusts a metadata table that misses hoodline's commits.
"""

from __future__ import annotations

import logging

from hoodline.errors import TableError
from hoodline.storage.ops import remove_tree
from hoodline.table.properties import loads_properties, properties_path, update_properties
from hoodline.table.table import HudiTable

log = logging.getLogger(__name__)

METADATA_FOLDER = "metadata"
K_PARTITIONS = "hoodie.table.metadata.partitions"
K_PARTITIONS_INFLIGHT = "hoodie.table.metadata.partitions.inflight"


def remove_metadata_table(table: HudiTable) -> bool:
    """Clear the metadata partitions in ``hoodie.properties`` and delete ``.hoodie/metadata``
    (each only if present); True when there was anything to remove."""
    folder = table.meta_path / METADATA_FOLDER
    path = properties_path(table.base_path)
    props = loads_properties(path.read_text(encoding="utf-8"))
    listed = [k for k in (K_PARTITIONS, K_PARTITIONS_INFLIGHT) if props.get(k)]
    if not listed and not folder.exists():
        return False
    log.warning(
        "removing the metadata table of '%s' (%s): hoodline does not maintain it, and a stale "
        "one would hide hoodline's commits from Java readers; a Java writer with "
        "hoodie.metadata.enable=true rebuilds it", table.base_path,
        ", ".join(f"{k}={props[k]}" for k in listed) or str(folder),
    )
    if listed:  # only these keys change: the rest of Java's properties stays as written
        table.config = update_properties(table.base_path, dict.fromkeys(listed, ""))
    remove_tree(folder)
    if folder.exists():
        raise TableError(f"could not delete the metadata table '{folder}'; delete it by hand")
    return True
