"""Where a table lives: a local :class:`~pathlib.Path`, or an :class:`ObjectPath` in an object
store (``s3://`` / ``s3a://``, ``gs://``, ``abfs://`` / ``az://``).

An :class:`ObjectPath` offers the part of ``pathlib``'s API the table layer uses (``/``,
``name``, ``parent``, ``read_bytes``, ``write_bytes``, ``exists``, ``iterdir``, ``unlink``, ...)
over obstore (the Rust ``object_store`` crate's Python binding), so code written against a
``Path`` works on both; what differs (exclusive creation, atomic replacement, listing, Parquet
I/O) goes through :mod:`hoodline.storage.ops`. Semantics on an object store:

* a write is one PUT: readers see the whole object or nothing, never a partial file;
* folders do not exist: ``mkdir`` does nothing, a "folder" exists when an object is under it;
* credentials and endpoints come from the options given (``[table.storage]``) or the provider's
  standard environment (``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ``AWS_REGION``, ...).

An :class:`ObjectPath` pickles as its URL and options (Spark ships it to executors); each
process opens its own store, once per location.
"""

from __future__ import annotations

import os
import posixpath
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TypeAlias

from hoodline.config.masking import mask_secrets
from hoodline.errors import ConfigError

#: URL schemes of object stores, and the scheme obstore knows them by
OBJECT_SCHEMES = {"s3": "s3", "s3a": "s3", "gs": "gs", "abfs": "abfs", "abfss": "abfs",
                  "az": "az"}

_stores: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}
_stores_lock = threading.Lock()


@dataclass(frozen=True)
class ObjectRoot:
    """An object store location: ``scheme://bucket`` and the options to open it with."""

    scheme: str
    bucket: str
    options: tuple[tuple[str, str], ...] = ()

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.bucket}"

    def store(self) -> Any:
        """The obstore store of this bucket (opened once per process)."""
        key = (self.url, self.options)
        with _stores_lock:
            found = _stores.get(key)
            if found is None:
                found = _open_store(self)
                _stores[key] = found
            return found

    def __repr__(self) -> str:
        shown = mask_secrets(dict(self.options))
        return f"ObjectRoot({self.url!r}, options={shown!r})"

    def reader_options(self) -> dict[str, str]:
        """The options as other object_store-based readers (hudi-rs) take them."""
        options = dict(self.options)
        endpoint = options.get("endpoint", options.get("aws_endpoint",
                                                       options.get("azure_storage_endpoint", "")))
        if endpoint.startswith("http://"):
            options.setdefault("allow_http", "true")
        return options


#: HTTP client settings (obstore's ``ClientConfig``), as opposed to the store's own settings
CLIENT_OPTIONS = frozenset({
    "allow_http", "allow_invalid_certificates", "connect_timeout", "default_content_type",
    "http1_only", "http2_only", "pool_idle_timeout", "pool_max_idle_per_host", "proxy_url",
    "timeout", "user_agent",
})


def _open_store(root: ObjectRoot) -> Any:
    from obstore.store import from_url

    options = dict(root.options)
    client = {k: options.pop(k) for k in list(options) if k in CLIENT_OPTIONS}
    scheme = OBJECT_SCHEMES[root.scheme]
    endpoint = options.get("endpoint", options.get("aws_endpoint",
                                                   options.get("azure_storage_endpoint", "")))
    if scheme == "s3":
        # exclusive creation (If-None-Match) for instants and the writer lock
        options.setdefault("conditional_put", "etag")
        endpoint = endpoint or os.environ.get("AWS_ENDPOINT_URL", "")
    if endpoint.startswith("http://"):  # a local emulator (moto, Azurite)
        client.setdefault("allow_http", "true")
    try:
        return from_url(
            f"{scheme}://{root.bucket}",
            config=options or None,  # type: ignore[arg-type]
            client_options=client or None,  # type: ignore[arg-type]
        )
    except BaseException as exc:  # obstore errors, and panics of the Rust side on bad keys
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise ConfigError(
            f"cannot open the object store '{root.url}' with options "
            f"{mask_secrets(options)}: {exc}"
        ) from None


@dataclass(frozen=True)
class ObjectInfo:
    """What :meth:`ObjectPath.stat` returns (the fields the table layer reads)."""

    st_size: int
    st_mtime: float


@dataclass(frozen=True)
class ObjectPath:
    """A key in an object store, with a ``pathlib``-like API (see the module docs)."""

    root: ObjectRoot
    key: str = ""

    # -- pure path operations ---------------------------------------------------------------
    def __truediv__(self, other: str | os.PathLike[str]) -> ObjectPath:
        rel = os.fspath(other).strip("/")
        if not rel:
            return self
        key = posixpath.normpath(f"{self.key}/{rel}" if self.key else rel)
        if key.startswith(".."):
            raise ValueError(f"{other!r} leaves the bucket of {self}")
        return ObjectPath(self.root, "" if key == "." else key)

    def __str__(self) -> str:
        return f"{self.root.url}/{self.key}" if self.key else self.root.url

    def as_posix(self) -> str:
        return str(self)

    def absolute(self) -> ObjectPath:
        return self

    def resolve(self) -> ObjectPath:
        return self

    @property
    def name(self) -> str:
        return posixpath.basename(self.key)

    @property
    def suffix(self) -> str:
        return PurePosixPath(self.name).suffix

    @property
    def stem(self) -> str:
        return PurePosixPath(self.name).stem

    @property
    def parent(self) -> ObjectPath:
        return ObjectPath(self.root, posixpath.dirname(self.key))

    def with_name(self, name: str) -> ObjectPath:
        return self.parent / name

    def relative_to(self, other: ObjectPath) -> PurePosixPath:
        if other.root != self.root:
            raise ValueError(f"{self} is not under {other}")
        return PurePosixPath(self.key).relative_to(other.key or ".") if other.key else (
            PurePosixPath(self.key)
        )

    # -- store operations -------------------------------------------------------------------
    @property
    def store(self) -> Any:
        return self.root.store()

    def read_bytes(self) -> bytes:
        import obstore

        try:
            return bytes(obstore.get(self.store, self.key).bytes())
        except FileNotFoundError:
            raise FileNotFoundError(str(self)) from None

    def read_text(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return self.read_bytes().decode(encoding, errors)

    def write_bytes(self, data: bytes) -> int:
        import obstore

        obstore.put(self.store, self.key, data)
        return len(data)

    def write_text(self, text: str, encoding: str = "utf-8") -> int:
        return self.write_bytes(text.encode(encoding))

    def create_exclusive(self, data: bytes) -> bool:
        """Write the object only if it does not exist (S3 ``If-None-Match: *``, GCS / Azure
        preconditions); False when it exists."""
        import obstore
        from obstore.exceptions import AlreadyExistsError

        try:
            obstore.put(self.store, self.key, data, mode="create")
        except AlreadyExistsError:
            return False
        return True

    def stat(self) -> ObjectInfo:
        import obstore

        try:
            meta = obstore.head(self.store, self.key)
        except FileNotFoundError:
            raise FileNotFoundError(str(self)) from None
        return ObjectInfo(int(meta["size"]), meta["last_modified"].timestamp())

    def is_file(self) -> bool:
        try:
            self.stat()
        except FileNotFoundError:
            return False
        return True

    def is_dir(self) -> bool:
        import obstore

        prefix = f"{self.key}/" if self.key else ""
        for chunk in obstore.list(self.store, prefix, chunk_size=1):
            if chunk:
                return True
        return False

    def exists(self) -> bool:
        return self.is_file() or self.is_dir()

    def unlink(self, missing_ok: bool = False) -> None:
        import obstore

        if not missing_ok and not self.is_file():
            raise FileNotFoundError(str(self))
        try:
            obstore.delete(self.store, self.key)
        except FileNotFoundError:  # S3 deletes missing keys silently; Azure answers 404
            if not missing_ok:
                raise

    def mkdir(self, mode: int = 0o777, parents: bool = False, exist_ok: bool = False) -> None:
        """Nothing to do: an object store has no folders."""

    def rmdir(self) -> None:
        """Nothing to do: an object store has no folders."""

    def listing(self) -> tuple[list[tuple[str, int, float]], list[str]]:
        """(name, size, mtime) of the objects directly under this "folder", and the names of
        its sub-folders."""
        import obstore

        prefix = f"{self.key}/" if self.key else ""
        result = obstore.list_with_delimiter(self.store, prefix or None)
        objects = [
            (posixpath.basename(o["path"]), int(o["size"]), o["last_modified"].timestamp())
            for o in result["objects"]
        ]
        folders = [posixpath.basename(p.rstrip("/")) for p in result["common_prefixes"]]
        return objects, folders

    def iterdir(self) -> Iterator[ObjectPath]:
        objects, folders = self.listing()
        for name in sorted([*(o[0] for o in objects), *folders]):
            yield self / name

    def walk_objects(self) -> Iterator[tuple[str, int, float]]:
        """(key relative to this path, size, modification time) of every object under it."""
        import obstore

        prefix = f"{self.key}/" if self.key else ""
        for chunk in obstore.list(self.store, prefix or None):
            for o in chunk:
                yield o["path"][len(prefix):], int(o["size"]), o["last_modified"].timestamp()

    def __reduce__(self) -> tuple[Any, ...]:
        return (ObjectPath, (self.root, self.key))


#: where a table, or one of its files, lives
TablePath: TypeAlias = Path | ObjectPath


def parse_location(
    location: str | os.PathLike[str] | ObjectPath, options: Mapping[str, str] | None = None
) -> Path | ObjectPath:
    """A table location as given by the user (``/data/t``, ``file:///data/t``,
    ``s3://bucket/prefix/t``, ...) with the storage options for object stores."""
    if isinstance(location, ObjectPath):
        return location
    if isinstance(location, Path):
        return location.absolute()
    text = os.fspath(location)
    scheme, sep, rest = text.partition("://")
    if not sep:
        return Path(text).absolute()
    scheme = scheme.lower()
    if scheme == "file":
        return Path(rest if rest.startswith("/") else "/" + rest)
    if scheme not in OBJECT_SCHEMES:
        raise ConfigError(
            f"table location {text!r}: scheme '{scheme}://' is not supported; use a local path, "
            f"file://, or one of {', '.join(s + '://' for s in OBJECT_SCHEMES)}"
            + (" (HDFS: mount it, e.g. with the NFS gateway)" if scheme == "hdfs" else "")
        )
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise ConfigError(f"table location {text!r} names no bucket")
    root = ObjectRoot(scheme, bucket, tuple(sorted((options or {}).items())))
    return ObjectPath(root) / key if key.strip("/") else ObjectPath(root)


def is_object_path(path: object) -> bool:
    return isinstance(path, ObjectPath)
