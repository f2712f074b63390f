"""The pipeline checkpoint stored in every data commit's ``extraMetadata``.

Key :data:`CHECKPOINT_KEY`; value: base64 of versioned bytes::

    b"HLPC" | int version (1) | long round id | utf source type | utf source identity |
    bytes SourceCheckpoint (enumerator state + every reader's split states, versioned)

The *source identity* is what must not change between runs for positions to mean the same
thing (Kafka: the subscription; files: the root directory and format). A restart whose
configuration names another source type, or an identity its plug-in does not accept as a change of
the stored one (a Kafka topic list may gain and lose topics), is refused with
:class:`CheckpointMismatchError` (start a new table to read another source). Secrets never enter it.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass

from hoodline.errors import CheckpointMismatchError, SplitSerializationError
from hoodline.runtime.source_rounds import SourceCheckpoint
from hoodline.source.serialization import BinaryReader, BinaryWriter, frame, unframe
from hoodline.table.commit_metadata import PIPELINE_CHECKPOINT_KEY

CHECKPOINT_KEY = PIPELINE_CHECKPOINT_KEY
_MAGIC = b"HLPC"
_VERSION = 1


@dataclass(frozen=True)
class PipelineCheckpoint:
    """Round id + which source + the source's checkpoint."""

    round_id: int
    source_type: str
    source_identity: str
    source: SourceCheckpoint

    def encode(self) -> str:
        body = (
            BinaryWriter()
            .write_long(self.round_id)
            .write_str(self.source_type)
            .write_str(self.source_identity)
            .write_bytes(self.source.to_bytes())
            .to_bytes()
        )
        return base64.b64encode(frame(_MAGIC, _VERSION, body)).decode("ascii")

    @classmethod
    def decode(cls, text: str) -> PipelineCheckpoint:
        try:
            raw = base64.b64decode(text.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError) as exc:
            raise SplitSerializationError(
                f"commit metadata '{CHECKPOINT_KEY}' is not base64: {exc}"
            ) from None
        _, body = unframe(raw, _MAGIC, (_VERSION,),
                          f"pipeline checkpoint (commit metadata '{CHECKPOINT_KEY}')")
        r = BinaryReader(body, "pipeline checkpoint")
        round_id = r.read_long()
        source_type = r.read_str()
        identity = r.read_str()
        source = SourceCheckpoint.from_bytes(r.read_bytes())
        r.expect_end()
        return cls(round_id, source_type, identity, source)

    def check_compatible(
        self, source_type: str, source_identity: str, table: str,
        accepts: Callable[[str], str | None] = lambda stored: None,
    ) -> str | None:
        """Refuse to resume from a checkpoint of another source. ``accepts(stored identity)``
        says whether a changed identity still fits the stored positions (see
        :meth:`hoodline.pipeline.plugin.SourcePlugin.identity_change`): what changed, to warn
        of, or ``None`` (refused). Returns that note, ``None`` when nothing changed."""
        if source_type != self.source_type:
            raise CheckpointMismatchError(
                f"table '{table}' was written from a '{self.source_type}' source (round "
                f"{self.round_id}) but the pipeline now reads a '{source_type}' source; its "
                f"checkpoint cannot be resumed. Write to a new table path instead"
            )
        if source_identity == self.source_identity:
            return None
        note = accepts(self.source_identity)
        if note is None:
            raise CheckpointMismatchError(
                f"table '{table}' was written from source {self.source_identity!r} (round "
                f"{self.round_id}) but the pipeline now reads {source_identity!r}; a table "
                f"keeps the source its checkpoint's positions are of (a Kafka topic list may "
                f"gain or lose topics, keeping at least one). Write to a new table "
                f"path, or restore the original source settings"
            )
        return note
