"""Finding files: directory walk with filters, and the "file is complete" (stability) rule.

Rules, in order:

1. Names starting with ``.`` or ``_`` are ignored, for files and for directories (their whole
   subtree): in-progress uploads (``.part``, ``_tmp``), ``_SUCCESS`` markers, ``_temporary/``.
2. The path relative to the root must match the glob (``**`` spans directories) and end with
   one of the accepted extensions.
3. Continuous mode only: a file becomes *eligible* once it was seen with the same size and
   modification time in ``stable_scans`` consecutive scans (:class:`StabilityTracker`). A file
   renamed into place complete is safe with ``stable_scans=1``.

Directory symlinks are not followed (no loops); file symlinks are.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from hoodline.connectors.files.location import is_url, list_objects
from hoodline.errors import FileSourceError, StorageError
from hoodline.storage.paths import credentials_environment, error_head


def require_directory(root: str) -> None:
    """FileSourceError naming ``root`` unless it is a directory (an object store prefix needs
    no folder: an empty one lists nothing)."""
    if is_url(root):
        return
    if not os.path.isdir(root):
        raise FileSourceError(
            f"source directory '{root}' does not exist or is not a directory; "
            "check option 'path'"
        )


@dataclass(frozen=True, order=True)
class FileEntry:
    """One file version as seen by a scan."""

    path: str
    size: int
    mtime_ns: int


@lru_cache(maxsize=64)
def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """Compile a "/"-separated glob: ``**`` spans directories, ``*`` a name part, ``?``."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = pattern.find("]", i + 1)
            if j == -1:
                out.append(re.escape(c))
                i += 1
            else:
                body = pattern[i + 1 : j]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out) + r"\Z")


def is_hidden(name: str) -> bool:
    return name.startswith((".", "_"))


class DirectoryLister:
    """Lists the candidate files below a root (rules 1 and 2 of the module docs)."""

    def __init__(self, root: str, glob: str = "**/*", extensions: tuple[str, ...] = ()) -> None:
        self.root = root if is_url(root) else os.path.abspath(root)
        self._glob = glob_to_regex(glob)
        self._extensions = tuple(e.lower() for e in extensions)
        #: files of the last listing that 'glob' takes but whose names have none of the
        #: extensions (visible files only), sorted
        self.unmatched: list[str] = []
        self._unmatched: list[str] = []  # gathered by the listing under way

    def accepts(self, relative_path: str) -> bool:
        return self._has_extension(relative_path) and self._glob.match(relative_path) is not None

    def _has_extension(self, relative_path: str) -> bool:
        name = relative_path.rsplit("/", 1)[-1]
        return not self._extensions or name.lower().endswith(self._extensions)

    def _note(self, relative_path: str) -> bool:
        """Whether the file is accepted; one only 'glob' takes is noted in :attr:`unmatched`."""
        if self.accepts(relative_path):
            return True
        if self._glob.match(relative_path) is not None:
            self._unmatched.append(relative_path)
        return False

    def list(self) -> list[FileEntry]:
        """All accepted files, sorted by path. Raises FileSourceError if the root is unusable."""
        require_directory(self.root)
        self._unmatched = []
        found = self._objects() if is_url(self.root) else self._walk(self.root, "")
        listed = sorted(found)
        self.unmatched = sorted(self._unmatched)
        return listed

    def _objects(self) -> Iterator[FileEntry]:
        try:
            for rel, url, size, mtime_ns in list_objects(self.root):
                if any(is_hidden(part) for part in rel.split("/")) or not self._note(rel):
                    continue
                yield FileEntry(url, size, mtime_ns)
        except StorageError:  # the store's reason, the URL and what to set, in one line
            raise
        except Exception as exc:
            reason = error_head(str(exc))
            raise FileSourceError(
                f"cannot list '{self.root}': {reason}; check option 'path' and the storage "
                f"credentials in the environment ({credentials_environment(self.root)})"
            ) from exc

    def _walk(self, directory: str, prefix: str) -> Iterator[FileEntry]:
        try:
            entries = list(os.scandir(directory))
        except FileNotFoundError:
            return  # removed while we were walking: nothing to read there any more
        except OSError as exc:
            raise FileSourceError(
                f"cannot list directory '{directory}': {exc}; check its permissions"
            ) from exc
        for entry in entries:
            if is_hidden(entry.name):
                continue
            relative = prefix + entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    yield from self._walk(entry.path, relative + "/")
                elif entry.is_file() and self._note(relative):
                    st = entry.stat()
                    yield FileEntry(entry.path, st.st_size, st.st_mtime_ns)
            except FileNotFoundError:
                continue  # deleted between listing and stat


class StabilityTracker:
    """Rule 3: report a file version once it has been seen unchanged in ``required`` scans.

    Not thread-safe; owned by the one scanning callable.
    """

    def __init__(self, required: int) -> None:
        if required < 1:
            raise ValueError("required scans must be >= 1")
        self.required = required
        self._seen: dict[str, tuple[int, int, int]] = {}  # path -> (size, mtime_ns, times seen)

    def observe(self, listing: list[FileEntry]) -> list[FileEntry]:
        """Feed one scan; returns the entries that are stable as of this scan."""
        stable: list[FileEntry] = []
        current: dict[str, tuple[int, int, int]] = {}
        for e in listing:
            prev = self._seen.get(e.path)
            count = prev[2] + 1 if prev and prev[0] == e.size and prev[1] == e.mtime_ns else 1
            current[e.path] = (e.size, e.mtime_ns, count)
            if count >= self.required:
                stable.append(e)
        self._seen = current  # files that disappeared are forgotten
        return stable

    def settling(self) -> list[FileEntry]:
        """The file versions of the last scan not yet seen unchanged in enough scans (safe to
        call beside :meth:`observe`: it replaces the dict it reads, never changes it)."""
        seen = self._seen
        return [FileEntry(path, size, mtime) for path, (size, mtime, count) in seen.items()
                if count < self.required]
