"""The zip of the running ``hoodline`` package that a session ships to its executors.

Executors do not see the driver's ``sys.path``, so :func:`~hoodline.spark.session.start_session`
ships the imported package with ``addPyFile``. The archive holds the sources plus their
bytecode: zipimport never compiles into an archive, so without it every new Python worker would
compile every module again; unchecked hash-based ``.pyc`` files need no source timestamps, and
the sources stay for tracebacks.

Compiling the ~200 modules costs ~0.7-0.9 s of CPU on this machine, on the cores the JVM is
starting on, at every session start. :func:`shipped_archive` therefore keeps built archives in the
cache directory (:func:`hoodline.spark.class_cache.cache_dir`) under a key made from every file's
path, size and modification time and from the interpreter's bytecode magic number: an edited
source or another Python gets a new archive, an unchanged installation reuses it. A session
ships a copy under a unique name in its scratch directory, so a cached archive is never handed
to Spark itself. Without a writable cache directory the archive is built in the scratch directory,
as before.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import py_compile
import shutil
import tempfile
import uuid
import zipfile
from pathlib import Path

import hoodline

__all__ = ["build_archive", "package_key", "shipped_archive"]

log = logging.getLogger(__name__)

#: cached archives of other package versions kept besides the one in use (a checkout that is
#: being edited makes a new one at every change)
KEEP_OTHERS = 3
_PREFIX = "hoodline-package-"


def _package_root() -> Path:
    return Path(hoodline.__file__).resolve().parent


def _package_files(root: Path) -> list[Path]:
    return [
        path for path in sorted(root.rglob("*"))
        if "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo")
    ]


def package_key(root: Path | None = None) -> str:
    """Hex digest naming the archive of the package at ``root`` (default: the imported one) for
    this interpreter: every file's relative path, size and modification time, and the bytecode
    magic number."""
    root = root or _package_root()
    digest = hashlib.sha256(importlib.util.MAGIC_NUMBER)
    # files only: a folder's mtime moves when Python writes its __pycache__ into it
    for path in _package_files(root):
        if path.is_dir():
            continue
        st = path.stat()
        digest.update(f"{path.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:24]


def build_archive(dest: Path, root: Path | None = None) -> Path:
    """Zip the package at ``root`` (default: the imported one) with bytecode into ``dest``."""
    root = root or _package_root()
    with tempfile.TemporaryDirectory(prefix="hoodline-pyc-") as scratch, \
            zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in _package_files(root):
            arcname = Path("hoodline") / path.relative_to(root)
            if path.is_dir():
                # zipimport cannot import namespace packages: give such folders an __init__.
                if any(path.glob("*.py")) and not (path / "__init__.py").exists():
                    zf.writestr(str(arcname / "__init__.py"), "")
                continue
            zf.write(path, arcname)
            if path.suffix == ".py":
                zf.writestr(str(arcname.with_suffix(".pyc")),
                            _bytecode(path, arcname, Path(scratch)))
    return dest


def _bytecode(source: Path, arcname: Path, scratch: Path) -> bytes:
    target = scratch / "bytecode.pyc"
    py_compile.compile(
        str(source), cfile=str(target), dfile=str(arcname), doraise=True,
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    data = target.read_bytes()
    target.unlink()
    return data


def shipped_archive(scratch: Path, cache: Path | None) -> Path:
    """The archive a session ships, as a uniquely named file in ``scratch``: a copy of the cached
    archive of this package version when ``cache`` holds one (built there first when not), else
    built in ``scratch``."""
    dest = scratch / f"hoodline-{uuid.uuid4().hex[:12]}.zip"
    if cache is None:
        return build_archive(dest)
    cached = cache / f"{_PREFIX}{package_key()}.zip"
    built = False
    try:
        if not cached.is_file():
            cache.mkdir(parents=True, exist_ok=True)
            partial = cache / f".{cached.name}.{os.getpid()}.{uuid.uuid4().hex[:6]}.tmp"
            try:
                build_archive(partial)
                os.replace(partial, cached)  # atomic: concurrent starts never see half a zip
            finally:
                partial.unlink(missing_ok=True)
            built = True
        shutil.copyfile(cached, dest)
    except OSError as exc:  # unwritable cache, or pruned by another start meanwhile
        log.debug("package archive cache %s not used: %s", cache, exc)
        return build_archive(dest)
    if built:
        _prune(cache, keep=cached)
    return dest


def _prune(cache: Path, keep: Path) -> None:
    """Delete all but the :data:`KEEP_OTHERS` newest cached archives besides ``keep`` (best
    effort: the archive in use is already copied)."""
    others: list[tuple[float, Path]] = []
    for path in cache.glob(f"{_PREFIX}*.zip"):
        try:
            if path != keep:
                others.append((path.stat().st_mtime, path))
        except FileNotFoundError:  # pruned by a concurrent start
            continue
    for _, old in sorted(others, reverse=True)[KEEP_OTHERS:]:
        try:
            old.unlink(missing_ok=True)
        except OSError as exc:
            log.debug("could not prune the package archive %s: %s", old, exc)
