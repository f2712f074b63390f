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
  standard environment (``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ``AWS_REGION``, ...);
* a store's refusal or failure (missing bucket, credentials, unreachable endpoint) is raised as
  one :class:`~hoodline.errors.StorageError` by :func:`storage_errors`, whose message names the
  URL, the action, the store's reason in short and what to do; a missing object stays a
  :class:`FileNotFoundError`.

An :class:`ObjectPath` pickles as its URL and options (Spark ships it to executors); each
process opens its own store, once per location.
"""

from __future__ import annotations

import os
import posixpath
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TypeAlias

from hoodline.config.masking import mask_all_but
from hoodline.config.units import Duration
from hoodline.errors import ConfigError, StorageError
from hoodline.storage.slow import watched

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
        shown = shown_storage_options(dict(self.options))
        return f"ObjectRoot({self.url!r}, options={shown!r})"

    def reader_options(self) -> dict[str, str]:
        """The options as other object_store-based readers (hudi-rs) take them (hoodline's
        retry settings are its own)."""
        options = {k: v for k, v in self.options if k not in RETRY_OPTIONS}
        if _endpoint(options, OBJECT_SCHEMES[self.scheme])[0].startswith("http://"):
            options.setdefault("allow_http", "true")
        return options


#: HTTP client settings (obstore's ``ClientConfig``), as opposed to the store's own settings
CLIENT_OPTIONS = frozenset({
    "allow_http", "allow_invalid_certificates", "connect_timeout", "default_content_type",
    "http1_only", "http2_only", "pool_idle_timeout", "pool_max_idle_per_host", "proxy_url",
    "timeout", "user_agent",
})


#: how failed requests are retried (obstore's ``RetryConfig``): ``max_retries`` (default 10)
#: and ``retry_timeout`` (a duration, default 3 minutes)
RETRY_OPTIONS = frozenset({"max_retries", "retry_timeout"})


def _retry_config(given: Mapping[str, str], root: ObjectRoot) -> dict[str, Any] | None:
    """obstore's retry settings from the ``RETRY_OPTIONS`` in ``given``, checked."""
    if not given:
        return None
    from datetime import timedelta

    out: dict[str, Any] = {}
    for key, raw in given.items():
        try:
            if key == "max_retries":
                out[key] = int(raw)
                ok = out[key] >= 0
            else:
                seconds = float(Duration(raw))
                out[key] = timedelta(seconds=seconds)
                ok = 0 < seconds < float("inf")
        except ValueError:
            ok = False
        if not ok:
            expected = ("a whole number >= 0" if key == "max_retries"
                        else "a duration like 30s or 2min")
            raise ConfigError(f"storage option '{key}' = {raw!r} of '{root.url}' is invalid: "
                              f"give {expected}")
    return out


_UNREACHABLE = "cannot reach"
_SERVER_FAILED = "a failure on the store's side, which may pass"


def is_store_outage(exc: BaseException) -> bool:
    """Whether ``exc`` (also a Spark job's error, which carries only the task's error text)
    is an object store that did not answer or failed on its side: an outage that may end,
    unlike a missing bucket or rejected credentials."""
    text = str(exc)
    return (isinstance(exc, StorageError) or "StorageError" in text) and (
        _UNREACHABLE in text or _SERVER_FAILED in text)


def is_server_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is an object store failing on its side (a 5xx answer, throttling): no
    setting of the caller's is at fault."""
    return _SERVER_FAILED in str(exc)


#: obstore's default ``retry_timeout``: how long its client retries a failed request
DEFAULT_RETRY_TIMEOUT_S = 180.0


def retry_timeout_s(options: Mapping[str, object]) -> float:
    """The ``retry_timeout`` of storage ``options`` in seconds (its default when not set or
    not readable: the store's own check names a bad value)."""
    raw = options.get("retry_timeout")
    if raw is None:
        return DEFAULT_RETRY_TIMEOUT_S
    try:
        seconds = float(Duration(raw))
    except ValueError:
        return DEFAULT_RETRY_TIMEOUT_S
    return seconds if 0 < seconds < float("inf") else DEFAULT_RETRY_TIMEOUT_S


#: storage options whose values messages show; every other value is masked (a misspelt key, or
#: one of the providers' many aliases, may hold a secret)
SHOWN_STORAGE_OPTIONS = frozenset({
    "endpoint", "aws_endpoint", "aws_endpoint_url", "azure_storage_endpoint", "region",
    "aws_region", "aws_default_region", "allow_http", "virtual_hosted_style_request",
    "aws_virtual_hosted_style_request", "account_name", "azure_storage_account_name",
    "use_emulator", "azure_storage_use_emulator", "conditional_put", "aws_conditional_put",
    "timeout", "connect_timeout", "max_retries", "retry_timeout",
})


def shown_storage_options(options: Mapping[str, object]) -> dict[str, object]:
    """``options`` safe to show (see :data:`SHOWN_STORAGE_OPTIONS`)."""
    return mask_all_but(options, SHOWN_STORAGE_OPTIONS)


#: where a store's endpoint may be set, by obstore scheme: option names, then environment
#: variables (as obstore reads them)
_ENDPOINT_SOURCES = {
    "s3": (("endpoint", "aws_endpoint", "aws_endpoint_url"), ("AWS_ENDPOINT_URL", "AWS_ENDPOINT")),
    "az": (("endpoint", "azure_storage_endpoint"), ("AZURE_STORAGE_ENDPOINT",)),
    "abfs": (("endpoint", "azure_storage_endpoint"), ("AZURE_STORAGE_ENDPOINT",)),
}


def _endpoint(options: Mapping[str, str], scheme: str) -> tuple[str, str]:
    """The endpoint the store will use and where it was set ('' when none is)."""
    names, variables = _ENDPOINT_SOURCES.get(scheme, (("endpoint",), ()))
    for name in names:
        if options.get(name):
            return str(options[name]), f"storage option '{name}'"
    for var in variables:
        if os.environ.get(var):
            return os.environ[var], f"environment variable {var}"
    return "", ""


def _open_store(root: ObjectRoot) -> Any:
    from obstore.store import from_url

    options = dict(root.options)
    client = {k: options.pop(k) for k in list(options) if k in CLIENT_OPTIONS}
    retry = _retry_config({k: options.pop(k) for k in list(options) if k in RETRY_OPTIONS}, root)
    scheme = OBJECT_SCHEMES[root.scheme]
    if scheme == "s3":
        # exclusive creation (If-None-Match) for instants and the writer lock
        options.setdefault("conditional_put", "etag")
    endpoint, where = _endpoint(options, scheme)
    if endpoint and not endpoint.startswith(("http://", "https://")):
        # the store's Rust side panics on it at the first request (a 200-line backtrace)
        raise ConfigError(
            f"the endpoint {endpoint!r} of '{root.url}' ({where}) has no scheme: give it as "
            f"http://{endpoint} (an emulator such as moto or Azurite) or https://{endpoint}")
    virtual = any(str(options.get(k, "")).lower() == "true"
                  for k in ("virtual_hosted_style_request", "aws_virtual_hosted_style_request"))
    host = endpoint.partition("://")[2].split("/", 1)[0]
    if scheme == "s3" and virtual and endpoint and not host.startswith(f"{root.bucket}."):
        # the store then takes the endpoint as the bucket's own address, and the path's first
        # folder as a key of it: requests went to another bucket than the one named
        raise ConfigError(
            f"virtual_hosted_style_request = true needs an endpoint that names the bucket "
            f"'{root.bucket}' (e.g. https://{root.bucket}.{host or 's3.example.com'}), but "
            f"{where} is {endpoint!r}: name the bucket in it, or drop "
            "virtual_hosted_style_request (path-style requests)")
    if endpoint.startswith("http://"):  # a local emulator (moto, Azurite)
        client.setdefault("allow_http", "true")
    try:
        return from_url(
            f"{scheme}://{root.bucket}",
            config=options or None,  # type: ignore[arg-type]
            client_options=client or None,  # type: ignore[arg-type]
            retry_config=retry,  # type: ignore[arg-type]
        )
    except BaseException as exc:  # obstore errors, and panics of the Rust side on bad keys
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        reason = error_head(str(exc))
        raise ConfigError(
            f"cannot open the object store '{root.url}' with options "
            f"{shown_storage_options(options)}: {reason}"
        ) from None


# --- store errors ------------------------------------------------------------------------------
#: how the stores are called in messages, by obstore scheme
_PROVIDER = {"s3": "S3", "gs": "GCS", "abfs": "Azure", "az": "Azure"}

#: where each store's credentials come from: (option names of ``[table.storage]``, the
#: provider's environment variables), as the README documents them
_CREDENTIALS = {
    "s3": ("access_key_id and secret_access_key (and region; endpoint for a store other than "
           "AWS)", "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION (and AWS_ENDPOINT_URL)"),
    "gs": ("service_account", "GOOGLE_SERVICE_ACCOUNT (or GOOGLE_APPLICATION_CREDENTIALS)"),
    "abfs": ("account_name and account_key (or a SAS/OAuth setting)",
             "AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY"),
}
#: where each store's endpoint is set (option, environment variable)
_ENDPOINT = {
    "s3": ("endpoint", "AWS_ENDPOINT_URL"),
    "gs": ("", ""),
    "abfs": ("endpoint", "AZURE_STORAGE_ENDPOINT"),
}


#: where obstore's messages start their multi-line Rust debug dump
_DEBUG_SOURCE = "\n\nDebug source:"


def error_head(text: str) -> str:
    """An obstore error message without its Rust debug dump."""
    return text.partition(_DEBUG_SOURCE)[0].strip()


def credentials_environment(url: str) -> str:
    """The environment variables holding the credentials of the store of ``url``."""
    scheme = OBJECT_SCHEMES.get(url.partition("://")[0].lower(), "")
    return _CREDENTIALS.get("abfs" if scheme == "az" else scheme, ("", "the provider's"))[1]


def _hint(path: ObjectPath, scheme: str, what: str) -> str:
    """Where to set ``what`` (``credentials`` or ``endpoint``) of ``path``'s store: the
    pipeline's ``[table.storage]`` when the location was opened with such options (a pipeline's
    table), else the environment alone (the ``table`` commands, the file source)."""
    option, env = (_CREDENTIALS if what == "credentials" else _ENDPOINT)[scheme]
    if not env:
        return "the network path to the store"
    if path.root.options and option:
        return f"set {option} in the pipeline's [table.storage], or {env} in the environment"
    return f"set {env} in the environment"


#: error codes (S3 / GCS XML, Azure) of a missing bucket or container
_NO_BUCKET = frozenset({"NoSuchBucket", "ContainerNotFound"})
#: error codes of missing, unknown or invalid credentials
_BAD_CREDENTIALS = frozenset({
    "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken",
    "TokenRefreshRequired", "InvalidClientTokenId", "AuthenticationFailed",
    "AuthenticationRequired", "NoAuthenticationInformation", "InvalidAuthenticationInfo",
    "MissingSecurityHeader",
})
#: error codes of a transient overload of the store
_BUSY = frozenset({"SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout",
                   "ServerBusy", "OperationTimedOut", "RequestTimeTooSkewed"})
#: cloud instance metadata endpoints, where obstore looks for credentials when none are set
_METADATA_HOSTS = ("169.254.169.254", "169.254.170.2", "metadata.google.internal")

_XML_CODE = re.compile(r"<Code>([^<]*)</Code>")
_XML_MESSAGE = re.compile(r"<Message>([^<]*)</Message>")
_JSON_MESSAGE = re.compile(r'"message"\s*:\s*"([^"]*)"')
_STATUS = re.compile(r"status code: (\d{3})( [A-Za-z][A-Za-z ]*)?(?:: ?)?(.*)", re.DOTALL)
_REQUEST = re.compile(r"Error performing [A-Z]+ (https?://[^/\s?]+)")
_RETRIES = re.compile(r"after (\d+) retries")
_URL_QUERY = re.compile(r"(https?://[^\s?]*)\?\S*")  # query strings may hold SAS tokens


@dataclass(frozen=True)
class StoreFailure:
    """What an object store error says, in short (see :func:`describe_store_error`)."""

    #: bucket | credentials | permission | endpoint | server | invalid | other
    kind: str
    #: the store's reason on one line: status, error code and message, no debug dump
    reason: str
    #: ``scheme://host[:port]`` the failed request went to ("" when not said)
    endpoint: str = ""


def describe_store_error(text: str, error_type: str = "") -> StoreFailure:
    """Classify an obstore error message (``str(exc)``; ``error_type`` the class name, e.g.
    ``PermissionDeniedError``) and shorten it to one line: HTTP status, the XML ``<Code>`` and
    ``<Message>`` of S3/GCS/Azure, or the network failure; never the Rust debug dump, request
    ids or query strings."""
    head, _, debug = text.partition(_DEBUG_SOURCE)
    request = _REQUEST.search(head)
    endpoint = request.group(1) if request else ""
    code_match = _XML_CODE.search(head)
    code = code_match.group(1).strip() if code_match else ""
    message_match = _XML_MESSAGE.search(head)
    message = message_match.group(1).strip().splitlines()[0] if message_match else ""
    status = _STATUS.search(head)
    status_text = ""
    status_code = 0
    if status:
        status_code = int(status.group(1))
        status_text = (status.group(1) + (status.group(2) or "")).strip()
        body = status.group(3).strip()
        if not code and body:
            json_message = _JSON_MESSAGE.search(body)
            if json_message:
                message = json_message.group(1)
            elif not body.startswith("<"):
                message = body.splitlines()[0]
    parts = [p for p in (status_text, code) if p]
    reason = ", ".join(parts) + (f": {message}" if message else "")
    if not reason:
        reason = head.strip().splitlines()[0] if head.strip() else error_type or "unknown error"
    retries = _RETRIES.search(head)
    whole = f"{head}\n{debug}"
    network = (
        "connection refused" if "ConnectionRefused" in whole or "Connection refused" in whole
        else "host not found" if "dns error" in whole.lower()
        else "timed out" if "timed out" in whole.lower() or "TimedOut" in whole
        or "kind: Timeout" in whole
        else "no connection" if "error sending request" in whole
        else ""
    )
    if network and not status:
        reason = network + (f", after {retries.group(1)} retries" if retries else "")
    reason = _URL_QUERY.sub(r"\1?...", reason)
    if len(reason) > 240:
        reason = reason[:237] + "..."

    if code in _NO_BUCKET:
        kind = "bucket"
    elif any(host in endpoint for host in _METADATA_HOSTS):
        kind = "credentials"  # no credentials given: obstore asked the instance metadata
    elif (code in _BAD_CREDENTIALS or status_code == 401
          or error_type == "UnauthenticatedError"):
        kind = "credentials"
    elif status_code == 403 or code == "AccessDenied" or error_type == "PermissionDeniedError":
        kind = "permission"
    elif network and not status:
        kind = "endpoint"
    elif code in _BUSY or status_code >= 500 or status_code in (408, 429):
        kind = "server"
    elif error_type in ("InvalidPathError", "NotSupportedError") or 400 <= status_code < 500:
        kind = "invalid"
    else:
        kind = "other"
    return StoreFailure(kind, reason, endpoint)


def storage_error(exc: BaseException, path: ObjectPath, action: str) -> StorageError:
    """The :class:`StorageError` of an obstore error ``exc`` raised while doing ``action``
    (``read``, ``list`` ...) on ``path``: one line naming the URL, the store's reason in short
    and what to do. Never shows option values (keys)."""
    failure = describe_store_error(str(exc), type(exc).__name__)
    scheme = OBJECT_SCHEMES[path.root.scheme]
    scheme = "abfs" if scheme == "az" else scheme
    store = _PROVIDER[scheme]
    where = f"cannot {action} '{path}'"
    kind = failure.kind
    if kind == "bucket":
        noun = "container" if scheme == "abfs" else "bucket"
        return StorageError(
            f"{where}: the {noun} '{path.root.bucket}' does not exist ({store}: "
            f"{failure.reason}); create the {noun}, or fix the path (table.path, "
            "errors.table-path or the file source's 'path')", retryable=False)
    if kind == "credentials":
        if any(host in failure.endpoint for host in _METADATA_HOSTS):
            what = (f"no {store} credentials are set (looking for them at the instance "
                    f"metadata endpoint {failure.endpoint} failed: {failure.reason})")
        else:
            what = f"{store} rejected the credentials ({failure.reason})"
        return StorageError(f"{where}: {what}; {_hint(path, scheme, 'credentials')}",
                            retryable=False)
    if kind == "permission":
        return StorageError(
            f"{where}: {store} denied access ({failure.reason}); check that the credentials "
            f"are right and may {action} this path: {_hint(path, scheme, 'credentials')}",
            retryable=False)
    if kind == "endpoint":
        at = failure.endpoint or "the store"
        return StorageError(
            f"{where}: {_UNREACHABLE} {store} at {at} ({failure.reason}); check that the store "
            f"runs and is reachable there, or fix the endpoint: "
            f"{_hint(path, scheme, 'endpoint')}",
            retryable=True)
    if kind == "server":
        return StorageError(
            f"{where}: {store} failed ({failure.reason}); {_SERVER_FAILED}",
            retryable=True)
    if kind == "invalid":
        return StorageError(f"{where}: {store} refused it ({failure.reason})", retryable=False)
    return StorageError(f"{where}: {store} error ({failure.reason})", retryable=True)


@contextmanager
def storage_errors(path: ObjectPath, action: str) -> Iterator[None]:
    """Run obstore calls on ``path``: their errors leave as one :class:`StorageError` (see
    :func:`storage_error`); a missing object as ``FileNotFoundError(url)``, unless the store
    says the bucket itself is missing. A call that runs long is reported while it runs
    (:mod:`hoodline.storage.slow`)."""
    from obstore.exceptions import BaseError

    try:
        with watched(f"{action} {path}"):
            yield
    except FileNotFoundError as exc:
        code = _XML_CODE.search(error_head(str(exc)))
        if code and code.group(1) in _NO_BUCKET:
            raise storage_error(exc, path, action) from exc
        if exc.args == (str(path),):
            raise
        raise FileNotFoundError(str(path)) from None
    except BaseError as exc:
        raise storage_error(exc, path, action) from exc


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

        with storage_errors(self, "read"):
            return bytes(obstore.get(self.store, self.key).bytes())

    def read_text(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return self.read_bytes().decode(encoding, errors)

    def write_bytes(self, data: bytes) -> int:
        import obstore

        with storage_errors(self, "write"):
            obstore.put(self.store, self.key, data)
        return len(data)

    def write_text(self, text: str, encoding: str = "utf-8") -> int:
        return self.write_bytes(text.encode(encoding))

    def create_exclusive(self, data: bytes) -> bool:
        """Write the object only if it does not exist (S3 ``If-None-Match: *``, GCS / Azure
        preconditions); False when it exists."""
        import obstore
        from obstore.exceptions import AlreadyExistsError, NotFoundError

        with storage_errors(self, "create"):
            try:
                obstore.put(self.store, self.key, data, mode="create")
            except AlreadyExistsError:
                # the client retries a request whose answer was lost (a 5xx after the store
                # applied it, a dropped connection): its own first attempt may be what exists
                # (S3 review: an instant file "already existed" and the pipeline stopped).
                # Identical bytes of another writer pass too: only empty requested/inflight
                # files can be, and a second writer at the same instant is kept out by the
                # writer lock; its commit file would differ and be refused
                try:
                    return bytes(obstore.get(self.store, self.key).bytes()) == data
                except NotFoundError:  # created and deleted since: not this call's
                    return False
        return True

    def stat(self) -> ObjectInfo:
        import obstore

        with storage_errors(self, "look up"):
            meta = obstore.head(self.store, self.key)
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
        with storage_errors(self, "list"):
            for chunk in obstore.list(self.store, prefix, chunk_size=1):
                if chunk:
                    return True
        return False

    def check_bucket(self) -> None:
        """Raise :class:`StorageError` when the bucket does not exist or refuses access (one
        listing of at most one key): what a missing object alone cannot tell."""
        ObjectPath(self.root).is_dir()

    def exists(self) -> bool:
        return self.is_file() or self.is_dir()

    def unlink(self, missing_ok: bool = False) -> None:
        import obstore

        if not missing_ok and not self.is_file():
            raise FileNotFoundError(str(self))
        with storage_errors(self, "delete"):
            try:
                obstore.delete(self.store, self.key)
            except FileNotFoundError:  # S3 deletes missing keys silently; Azure answers 404
                if not missing_ok:
                    raise

    def mkdir(self, mode: int = 0o777, parents: bool = False, exist_ok: bool = False) -> None:
        """Nothing to do: an object store has no folders."""

    def listing(self) -> tuple[list[tuple[str, int, float]], list[str]]:
        """(name, size, mtime) of the objects directly under this "folder", and the names of
        its sub-folders."""
        import obstore

        prefix = f"{self.key}/" if self.key else ""
        with storage_errors(self, "list"):
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

    def walk_objects(self, after: str | None = None) -> Iterator[tuple[str, int, float]]:
        """(key relative to this path, size, modification time) of every object under it, in
        key order; with ``after``, only the keys that sort after that relative key (S3 and GCS
        skip the others server-side; Azure lists them, and they are dropped here). Pages are
        fetched as the iteration goes on."""
        import obstore

        prefix = f"{self.key}/" if self.key else ""
        offset = prefix + after if after is not None else None
        with storage_errors(self, "list"):
            for chunk in obstore.list(self.store, prefix or None, offset=offset):
                for o in chunk:
                    rel = o["path"][len(prefix):]
                    if after is None or rel > after:
                        yield rel, int(o["size"]), o["last_modified"].timestamp()

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
