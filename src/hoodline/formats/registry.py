"""Schema Registry access: settings, one client per process, writer and reader schemas.

hoodline talks to a Confluent-compatible Schema Registry only through confluent-kafka's
``SchemaRegistryClient``. Settings come from the source's options: every
``schema.registry.<key>`` option is the client's ``<key>`` (``url``, ``basic.auth.user.info``,
``ssl.ca.location``, ``timeout``, ...; secrets masked wherever settings are shown). Which
subject the table's schema follows is the pipeline's ``source.schema-subject`` /
``source.schema-version``.

Two kinds of lookup:

* **writer schemas** by the id in each message (tasks): cached per process, so a task asks the
  registry once per id. A missing id (HTTP 404) is :data:`UNKNOWN` -- its records become bad
  records -- while other failures raise :class:`SchemaRegistryError` (retryable: the round is
  retried).
* the **reader schema** (driver): the subject's latest or pinned version, what the table's
  columns follow.

Both keep asking while the registry is unreachable (connection refused, timeouts) or answers
408/429/5xx, with backoff and a warning per attempt, for ``schema.registry.unavailable.timeout``
seconds (hoodline's own key, not the client's; default 60, as ``scan.broker-unavailable.timeout``
for the brokers); then :class:`SchemaRegistryUnavailableError` stops the job.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa

from hoodline.config.enums import ConfigEnum
from hoodline.config.masking import MASK, mask_secrets, mask_url_credentials
from hoodline.config.units import Duration
from hoodline.errors import (
    ConfigError,
    SchemaRegistryError,
    SchemaRegistryUnavailableError,
    TableError,
)
from hoodline.table.schema import avro_schema_json_to_arrow

__all__ = [
    "REGISTRY_PREFIX",
    "RegistrySettings",
    "SchemaKind",
    "SubjectSchema",
    "WriterSchema",
    "fetch_subject_schema",
    "registry_options",
    "take_unavailable_timeout",
    "writer_schema",
]

log = logging.getLogger(__name__)

#: Source options with this prefix configure the registry client (prefix removed).
REGISTRY_PREFIX = "schema.registry."
#: the one ``schema.registry.*`` key that is hoodline's, not the client's: seconds a lookup keeps
#: retrying while the registry is unreachable or answers "unavailable"
UNAVAILABLE_TIMEOUT = "unavailable.timeout"
#: seconds a registry request may take unless ``schema.registry.timeout`` says otherwise
DEFAULT_REQUEST_TIMEOUT_S = 30
DEFAULT_UNAVAILABLE_TIMEOUT_S = 60.0


def registry_options(options: Mapping[str, object]) -> tuple[dict[str, object], dict[str, str]]:
    """Split source options into (the connector's own, the registry client's ``<key>``s)."""
    own: dict[str, object] = {}
    registry: dict[str, str] = {}
    for key, value in options.items():
        if key.startswith(REGISTRY_PREFIX):
            registry[key[len(REGISTRY_PREFIX):]] = str(value)
        else:
            own[key] = value
    return own, registry


def take_unavailable_timeout(client: dict[str, str]) -> float:
    """Remove hoodline's ``schema.registry.unavailable.timeout`` from the registry client's
    settings ``client``: its seconds (default 60), checked."""
    raw = client.pop(UNAVAILABLE_TIMEOUT, None)
    if raw is None:
        return DEFAULT_UNAVAILABLE_TIMEOUT_S
    try:
        return float(Duration(raw))
    except ValueError:
        raise ConfigError(
            f"option '{REGISTRY_PREFIX}{UNAVAILABLE_TIMEOUT}' = {raw!r} is invalid: give how long "
            "lookups keep retrying an unavailable Schema Registry, in seconds or as a duration "
            "like 60s or 2min") from None


@dataclass(frozen=True)
class RegistrySettings:
    """How to reach the registry and which subject the table follows (picklable)."""

    #: the client's settings (``url`` first); values of secret keys never shown
    client: tuple[tuple[str, str], ...]
    subject: str
    #: None: the latest version; else the pinned version number
    version: int | None = None
    #: Protobuf: the message of the schema file the table follows (its full name; "" = the
    #: file's first message)
    message_path: str = ""
    #: seconds a lookup keeps retrying an unavailable registry (``schema.registry.unavailable.
    #: timeout``)
    unavailable_timeout_s: float = DEFAULT_UNAVAILABLE_TIMEOUT_S

    def __post_init__(self) -> None:
        if not dict(self.client).get("url"):
            raise ConfigError(
                f"option '{REGISTRY_PREFIX}url' is required with a Schema Registry format: give "
                "the registry's URL, e.g. schema.registry.url = \"http://registry:8081\""
            )

    @property
    def url(self) -> str:
        return dict(self.client)["url"]

    @property
    def shown_url(self) -> str:
        """:attr:`url` for messages: a password in it masked."""
        return mask_url_credentials(self.url)

    def redact(self, text: str) -> str:
        """``text`` (a message, maybe quoting the client's errors) without the password of
        :attr:`url`, also where the client quotes the URL without its scheme."""
        password = urlsplit(self.url).password
        text = mask_url_credentials(text)
        return text.replace(password, MASK) if password else text

    def __repr__(self) -> str:
        shown = mask_secrets(dict(self.client))
        return (f"RegistrySettings(client={shown!r}, subject={self.subject!r}, "
                f"version={self.version!r}, unavailable_timeout_s={self.unavailable_timeout_s!r})")

    __str__ = __repr__


_clients: dict[tuple[tuple[str, str], ...], Any] = {}
_clients_lock = threading.Lock()


def _client(settings: RegistrySettings) -> Any:
    """The process's client for these settings (clients cache schemas by id)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    with _clients_lock:
        found = _clients.get(settings.client)
        if found is None:
            conf: dict[str, Any] = dict(settings.client)
            # hoodline asks an unavailable registry again itself (schema.registry.unavailable.
            # timeout); the client's own retries would stretch that time (3 by default)
            conf.setdefault("max.retries", "0")
            # the client waits for an answer forever by default: a registry that accepted
            # connections and never answered hung the run without a word (CDC review)
            conf.setdefault("timeout", str(DEFAULT_REQUEST_TIMEOUT_S))
            numbers: dict[str, type[int] | type[float]] = {
                "timeout": int, "max.retries": int, "retries.wait.ms": int,
                "retries.max.wait.ms": int, "cache.capacity": int, "cache.latest.ttl.sec": float}
            for key, kind in numbers.items():
                if key in conf:
                    try:
                        conf[key] = kind(conf[key])
                    except ValueError:
                        raise ConfigError(
                            f"option '{REGISTRY_PREFIX}{key}' has invalid value {conf[key]!r}: "
                            f"must be {'an integer' if kind is int else 'a number'}"
                        ) from None
            try:
                found = SchemaRegistryClient(conf)
            except (ValueError, TypeError) as exc:
                shown = ", ".join(f"{REGISTRY_PREFIX}{k}" for k in sorted(conf))
                raise ConfigError(settings.redact(
                    f"Schema Registry client settings ({shown}) are invalid: {exc}"
                )) from None
            _clients[settings.client] = found
        return found


#: Confluent's error codes of a 404: subject, version, schema (id) not found
SUBJECT_NOT_FOUND, VERSION_NOT_FOUND, SCHEMA_NOT_FOUND = 40401, 40402, 40403


def _not_found(exc: Exception, *codes: int) -> bool:
    """A registry's answer that one of ``codes`` is not there. A 404 without such a code (a
    wrong URL path, a proxy's page) is not: that registry answers nothing."""
    return (getattr(exc, "http_status_code", None) == 404
            and getattr(exc, "error_code", None) in codes)


def _registry_failure(settings: RegistrySettings, what: str, exc: Exception) -> SchemaRegistryError:
    return SchemaRegistryError(settings.redact(
        f"Schema Registry {settings.shown_url} failed to return {what}: {type(exc).__name__}: {exc}"
    ))


#: HTTP statuses of a registry that is there but cannot answer now
_UNAVAILABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})


def _unavailable(exc: Exception) -> bool:
    """Whether ``exc`` says the registry cannot answer now (asking again later may work): a
    408/429/5xx answer, or no answer (the HTTP library's ``TransportError``s: connection refused,
    timeouts; confluent-kafka's client runs on httpx or httpx2, whichever is installed)."""
    if getattr(exc, "http_status_code", None) in _UNAVAILABLE_STATUS:
        return True
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    return any(cls.__name__ == "TransportError" for cls in type(exc).__mro__)


def _asking(
    settings: RegistrySettings,
    what: str,
    call: Callable[[], Any],
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Any:
    """``call()`` (a lookup of ``what``), asked again while the registry is unavailable: after
    1, 2, 4, ... (at most 16) seconds, until ``settings.unavailable_timeout_s`` have passed, then
    :class:`SchemaRegistryUnavailableError`. Other errors are raised as they are."""
    started = clock()
    backoff = 1.0
    attempts = 0
    budget = settings.unavailable_timeout_s
    while True:
        attempts += 1
        try:
            return call()
        except Exception as exc:
            if not _unavailable(exc):
                raise
            elapsed = clock() - started
            if elapsed >= budget:
                raise SchemaRegistryUnavailableError(settings.redact(
                    f"Schema Registry {settings.shown_url} (option '{REGISTRY_PREFIX}url') is "
                    f"unavailable: fetching {what} failed {attempts} time(s) over "
                    f"{elapsed:.1f}s, giving up after '{REGISTRY_PREFIX}{UNAVAILABLE_TIMEOUT}' = "
                    f"{budget:g}s. Last error: {type(exc).__name__}: {exc}. Check that the "
                    "registry runs and is reachable from this machine at that URL."
                )) from exc
            wait = min(backoff, budget - elapsed)
            log.warning(
                "Schema Registry %s unavailable: fetching %s failed (attempt %d, %.1fs so far): "
                "%s: %s; retrying in %.1fs, giving up after '%s%s' = %gs", settings.shown_url, what,
                attempts, elapsed, type(exc).__name__, settings.redact(str(exc)), wait,
                REGISTRY_PREFIX, UNAVAILABLE_TIMEOUT, budget)
            sleep(wait)
            backoff = min(backoff * 2, 16.0)


class SchemaKind(ConfigEnum):
    """The registry's schema types (``schemaType``; none given means Avro)."""

    AVRO = "AVRO"
    JSON = "JSON"
    PROTOBUF = "PROTOBUF"


@dataclass(frozen=True)
class WriterSchema:
    """A schema a record was written with: its id, kind, the schema itself (Avro and JSON
    Schema: the parsed JSON document, Avro with referenced named types inlined; Protobuf: the
    serialized ``FileDescriptorProto`` s, referenced files first) and whether hoodline can read
    it (``problem`` says why not)."""

    schema_id: int
    parsed: Any
    problem: str | None = None
    kind: SchemaKind = SchemaKind.AVRO


#: The registry has no schema with this id (its records are bad records).
UNKNOWN = "unknown"

_writers: dict[tuple[tuple[tuple[str, str], ...], int], WriterSchema | str] = {}
_writers_lock = threading.Lock()


def writer_schema(settings: RegistrySettings, schema_id: int) -> WriterSchema | str:
    """The schema with ``schema_id`` (cached per process), or :data:`UNKNOWN`."""
    key = (settings.client, schema_id)
    with _writers_lock:
        found = _writers.get(key)
    if found is not None:
        return found
    client = _client(settings)

    def fetch() -> Any:
        schema = client.get_schema(schema_id)
        if (schema.schema_type or "").upper() == SchemaKind.PROTOBUF and not _is_base64(
                schema.schema_str):
            schema = client.get_schema(schema_id, fmt="serialized")
        return schema

    try:
        schema = _asking(settings, f"schema id {schema_id}", fetch)
    except SchemaRegistryUnavailableError:
        raise
    except Exception as exc:
        if _not_found(exc, SCHEMA_NOT_FOUND):
            return UNKNOWN  # not cached: it may be registered by the next time it is asked
        raise _registry_failure(settings, f"schema id {schema_id}", exc) from exc
    result = _parse_writer(schema_id, schema, client)
    with _writers_lock:
        _writers[key] = result
    return result


def _is_base64(text: str) -> bool:
    try:
        base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        return False
    return True


def _parse_writer(schema_id: int, schema: Any, client: Any = None) -> WriterSchema:
    try:
        kind = SchemaKind.parse((schema.schema_type or "AVRO").upper())
    except ValueError:
        return WriterSchema(schema_id, None, f"schema id {schema_id} has the unknown schema "
                            f"type {schema.schema_type!r}")
    try:
        refs = _references(client, schema, kind, 0) if schema.references else []
    except _ReferenceProblem as exc:
        return WriterSchema(schema_id, None, f"schema id {schema_id}: {exc}", kind)
    if kind is SchemaKind.PROTOBUF:
        try:
            main = base64.b64decode(schema.schema_str.encode("ascii"), validate=True)
        except (ValueError, UnicodeEncodeError):
            return WriterSchema(schema_id, None, f"schema id {schema_id}: the registry did not "
                                "return the Protobuf schema serialized (format=serialized)", kind)
        # the referenced files first, then the schema's own
        return WriterSchema(schema_id, (*refs, main), None, kind)
    try:
        parsed = json.loads(schema.schema_str)
    except json.JSONDecodeError as exc:
        return WriterSchema(schema_id, None, f"schema id {schema_id} is not valid JSON: {exc}",
                            kind)
    if refs:
        if kind is not SchemaKind.AVRO:
            return WriterSchema(schema_id, None, f"schema id {schema_id} references other "
                                "JSON Schemas (not supported: register it self-contained)", kind)
        parsed = _inline_avro(parsed, refs)
    return WriterSchema(schema_id, parsed, None, kind)


class _ReferenceProblem(Exception):
    pass


def _references(client: Any, schema: Any, kind: SchemaKind, depth: int) -> list[Any]:
    """The schemas ``schema`` references (Avro: parsed named types; Protobuf: serialized
    files), each after its own references, fetched through the client."""
    if client is None:
        raise _ReferenceProblem("uses schema references")
    if depth > 16:
        raise _ReferenceProblem("schema references nest deeper than 16 levels")
    out: list[Any] = []
    for ref in schema.references:
        fmt = "serialized" if kind is SchemaKind.PROTOBUF else None
        try:
            registered = client.get_version(ref.subject, ref.version, fmt=fmt)
        except Exception as exc:
            raise _ReferenceProblem(f"referenced subject '{ref.subject}' version {ref.version} "
                                    f"cannot be read: {exc}") from None
        sub = registered.schema
        if sub.references:
            out.extend(_references(client, sub, kind, depth + 1))
        if kind is SchemaKind.PROTOBUF:
            try:
                out.append(base64.b64decode(sub.schema_str.encode("ascii"), validate=True))
            except (ValueError, UnicodeEncodeError):
                raise _ReferenceProblem(f"referenced subject '{ref.subject}' is not returned "
                                        "serialized") from None
        else:
            out.append(json.loads(sub.schema_str))
    return out


def _inline_avro(schema: Any, named: list[Any]) -> Any:
    """``schema`` with each referenced named type's definition in place of its first use."""
    by_name: dict[str, Any] = {}
    for t in named:
        if isinstance(t, dict) and "name" in t:
            full = f"{t['namespace']}.{t['name']}" if t.get("namespace") else str(t["name"])
            by_name[full] = t
            by_name.setdefault(str(t["name"]), t)
    defined_ids: set[int] = set()

    def walk(node: Any, namespace: str) -> Any:
        if isinstance(node, str):
            key = node if node in by_name else f"{namespace}.{node}" if namespace else node
            target = by_name.get(key)
            if target is not None and id(target) not in defined_ids:
                defined_ids.add(id(target))
                return walk(target, str(target.get("namespace", namespace)))
            return node
        if isinstance(node, list):
            return [walk(n, namespace) for n in node]
        if isinstance(node, dict):
            ns = str(node.get("namespace", namespace))
            out = dict(node)
            if "fields" in node:
                out["fields"] = [{**f, "type": walk(f["type"], ns)} for f in node["fields"]]
            for key in ("items", "values"):
                if key in node:
                    out[key] = walk(node[key], ns)
            if isinstance(node.get("type"), (dict, list)):
                out["type"] = walk(node["type"], ns)
            return out
        return node

    return walk(schema, str(schema.get("namespace", "")) if isinstance(schema, dict) else "")


def latest_schema_id(settings: RegistrySettings) -> int:
    """The schema id of the subject's latest version, asked now (not from a cache)."""
    client = _client(settings)
    what = f"subject '{settings.subject}' latest version"

    def fetch() -> Any:
        client.clear_latest_caches()
        return client.get_latest_version(settings.subject)

    try:
        return int(_asking(settings, what, fetch).schema_id)
    except SchemaRegistryUnavailableError:
        raise
    except Exception as exc:
        raise _registry_failure(settings, what, exc) from exc


@dataclass(frozen=True)
class SubjectSchema:
    """A version of the subject the table follows (driver side)."""

    schema_id: int
    version: int
    #: the schema as :class:`WriterSchema` holds it
    parsed: Any
    #: its columns (every column nullable: rows written before a field existed read as null)
    arrow: pa.Schema
    #: Avro default values of the fields that declare one (records written without the field)
    defaults: Mapping[str, Any] = field(default_factory=dict)
    kind: SchemaKind = SchemaKind.AVRO


def fetch_subject_schema(settings: RegistrySettings,
                         kind: SchemaKind = SchemaKind.AVRO) -> SubjectSchema:
    """The subject's latest (or pinned) version, as the table's record schema."""
    client = _client(settings)
    what = (f"subject '{settings.subject}' version "
            f"{'latest' if settings.version is None else settings.version}")
    fmt = "serialized" if kind is SchemaKind.PROTOBUF else None

    def fetch() -> Any:
        if settings.version is None:
            client.clear_latest_caches()
            return client.get_latest_version(settings.subject, fmt=fmt)
        return client.get_version(settings.subject, settings.version, fmt=fmt)

    try:
        registered = _asking(settings, what, fetch)
    except SchemaRegistryUnavailableError:
        raise
    except Exception as exc:
        if _not_found(exc, SUBJECT_NOT_FOUND, VERSION_NOT_FOUND):
            raise ConfigError(
                f"Schema Registry {settings.shown_url} has no {what}: register the schema first "
                "or set source.schema-subject / source.schema-version"
            ) from None
        raise _registry_failure(settings, what, exc) from exc
    parsed = _parse_writer(int(registered.schema_id), registered.schema, client)
    version = int(registered.version)
    way_out = ("; to go on, pin an earlier version the table can take "
               f"(source.schema-version, e.g. {version - 1}) or declare the columns in [schema]"
               if settings.version is None and version > 1 else "")
    if parsed.problem is not None:
        raise ConfigError(f"{what} cannot be the table's schema: {parsed.problem}{way_out}")
    if parsed.kind is not kind:
        raise ConfigError(f"{what} is a {parsed.kind} schema; the source's format reads "
                          f"{kind} (check source.format and source.schema-subject)")
    try:
        arrow, defaults = _columns(parsed, settings)
    except (TableError, ValueError) as exc:
        raise ConfigError(f"{what} cannot be the table's schema: {exc}{way_out}") from None
    arrow = pa.schema([f.with_nullable(True) for f in arrow])
    return SubjectSchema(int(registered.schema_id), version, parsed.parsed, arrow, defaults,
                         kind)


def _columns(schema: WriterSchema, settings: RegistrySettings) -> tuple[pa.Schema, dict[str, Any]]:
    if schema.kind is SchemaKind.JSON:
        from hoodline.formats.json_schema import json_schema_to_arrow

        return json_schema_to_arrow(schema.parsed), {}
    if schema.kind is SchemaKind.PROTOBUF:
        from hoodline.formats.protobuf import message_type, protobuf_to_arrow, table_columns

        message = message_type(schema.parsed, settings.message_path)
        return table_columns(protobuf_to_arrow(message)), {}
    avro = schema.parsed
    if not isinstance(avro, dict) or avro.get("type") != "record":
        raise ValueError("it is not an Avro record schema; a table needs named fields")
    arrow = avro_schema_json_to_arrow(json.dumps(avro))
    defaults = {str(f["name"]): f["default"] for f in avro.get("fields", [])
                if "default" in f and f["default"] is not None}
    return arrow, defaults
