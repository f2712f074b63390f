"""Test harness for sources, shipped for connector authors.

* :class:`MockSplitEnumeratorContext` - enumerator context that records assignments/events and
  runs ``call_async`` work step by step (:mod:`.enumerator_context`).
* :class:`RecordingReaderContext` - reader context that records events (:mod:`.reader_context`).
* :class:`SourceLifecycleDriver` - plays FLIP-27/FLIP-537 lifecycles: checkpoints, single reader
  failover, global restart with another parallelism, with an exactly-once sink model
  (:mod:`.lifecycle`).
* ``hoodline.testing.reader_contract.SourceReaderContract`` - pytest contract-test base class for
  readers (imported explicitly; it needs pytest).
* :class:`ReferenceEnumerator` and :class:`NumberSource` - a small FLIP-537 enumerator and a
  source over integer ranges, used by the framework's own tests and as templates.
"""

from hoodline.testing.enumerator_context import MockSplitEnumeratorContext
from hoodline.testing.lifecycle import RestorePoint, SourceLifecycleDriver
from hoodline.testing.number_source import (
    NumberSource,
    NumberSourceReader,
    NumberSplit,
    NumberSplitSerializer,
    ReassigningNumberSource,
)
from hoodline.testing.reader_context import RecordingReaderContext
from hoodline.testing.reference_enumerator import (
    ReferenceEnumerator,
    ReferenceEnumState,
    ReferenceEnumStateSerializer,
)

__all__ = [
    "MockSplitEnumeratorContext",
    "NumberSource",
    "NumberSourceReader",
    "NumberSplit",
    "NumberSplitSerializer",
    "ReassigningNumberSource",
    "RecordingReaderContext",
    "ReferenceEnumState",
    "ReferenceEnumStateSerializer",
    "ReferenceEnumerator",
    "RestorePoint",
    "SourceLifecycleDriver",
]
