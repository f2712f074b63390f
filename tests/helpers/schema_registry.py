"""A small Schema Registry speaking the Confluent REST API on 127.0.0.1, for the tests.

No registry server can be installed on this machine, so the tests run this one; hoodline (and
the tests' producers) talk to it only through confluent-kafka's ``SchemaRegistryClient``, over
HTTP, as they would to Confluent's. It keeps subjects, versions and schemas by id (ids global and
increasing, one id per distinct schema text) and checks compatibility on registration
(``BACKWARD`` by default, ``NONE`` settable per subject through ``PUT /config/<subject>``) with
Avro's resolution rules for flat records: a new version may add fields with defaults, drop
fields, and promote types (int -> long -> float -> double, string <-> bytes).

Endpoints: ``POST /subjects/<s>/versions`` (register), ``POST /subjects/<s>`` (look up),
``GET /subjects``, ``GET /subjects/<s>/versions``, ``GET /subjects/<s>/versions/<v|latest>``,
``GET /schemas/ids/<id>``, ``POST /compatibility/subjects/<s>/versions/<v|latest>``,
``GET|PUT /config/<s>``. Errors as Confluent's: ``{"error_code": 40401, "message": ...}``.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlparse

_PROMOTIONS = {
    "int": {"int", "long", "float", "double"},
    "long": {"long", "float", "double"},
    "float": {"float", "double"},
    "string": {"string", "bytes"},
    "bytes": {"bytes", "string"},
}


def _base(t: Any) -> Any:
    """The non-null branch of ``["null", T]``, else ``t``."""
    if isinstance(t, list):
        rest = [b for b in t if b != "null"]
        return rest[0] if len(rest) == 1 else t
    return t


def _type_readable(writer: Any, reader: Any) -> bool:
    w, r = _base(writer), _base(reader)
    if isinstance(w, str) and isinstance(r, str):
        return r in _PROMOTIONS.get(w, {w})
    if (isinstance(w, dict) and isinstance(r, dict) and w.get("type") == "record"
            and r.get("type") == "record"):
        return backward_problem(w, r) is None  # nested records: the same rules, recursively
    return json.dumps(w, sort_keys=True) == json.dumps(r, sort_keys=True)


def backward_problem(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """Why data written with ``old`` cannot be read with ``new`` (None: it can)."""
    old_fields = {f["name"]: f for f in old.get("fields", [])}
    for f in new.get("fields", []):
        before = old_fields.get(f["name"])
        if before is None:
            if "default" not in f:
                return f"new field '{f['name']}' has no default"
        elif not _type_readable(before["type"], f["type"]):
            return f"field '{f['name']}' changed type incompatibly"
    return None


@dataclass
class _State:
    next_id: int = 1
    #: id -> (schema text, schema type)
    schemas: dict[int, tuple[str, str]] = field(default_factory=dict)
    #: id -> its references ([{"name", "subject", "version"}])
    references: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    #: subject -> ids of its versions (version n = index n-1)
    subjects: dict[str, list[int]] = field(default_factory=dict)
    compatibility: dict[str, str] = field(default_factory=dict)
    requests: int = 0


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, code: int, message: str) -> None:
        self._send(status, {"error_code": code, "message": message})

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def _dispatch(self, method: str) -> None:
        reg = self.server.registry
        path = urlparse(self.path).path.rstrip("/")
        with reg.lock:
            reg.state.requests += 1
            if reg.fail_with is not None:
                self._error(reg.fail_with, 50001, "injected failure")
                return
            for pattern, handler in _ROUTES:
                m = re.fullmatch(pattern, path)
                if m and handler[0] == method:
                    handler[1](self, reg, *(unquote(g) for g in m.groups()))
                    return
        self._error(404, 404, f"no route {method} {path}")


def _schema_body(reg: SchemaRegistry, schema_id: int, subject: str | None = None,
                 version: int | None = None) -> dict[str, Any]:
    text, kind = reg.state.schemas[schema_id]
    body: dict[str, Any] = {"id": schema_id, "schema": text,
                            "references": reg.state.references.get(schema_id, [])}
    if kind != "AVRO":
        body["schemaType"] = kind
    if subject is not None:
        body.update(subject=subject, version=version)
    return body


def _version(reg: SchemaRegistry, h: _Handler, subject: str, version: str) -> int | None:
    ids = reg.state.subjects.get(subject)
    if not ids:
        h._error(404, 40401, f"Subject '{subject}' not found.")
        return None
    n = len(ids) if version in ("latest", "-1") else int(version)
    if not 1 <= n <= len(ids):
        h._error(404, 40402, f"Version {version} not found.")
        return None
    return n


def _get_schema(h: _Handler, reg: SchemaRegistry, sid: str) -> None:
    if int(sid) not in reg.state.schemas:
        h._error(404, 40403, "Schema not found")
        return
    h._send(200, _schema_body(reg, int(sid)))


def _get_subjects(h: _Handler, reg: SchemaRegistry) -> None:
    h._send(200, sorted(reg.state.subjects))


def _get_versions(h: _Handler, reg: SchemaRegistry, subject: str) -> None:
    ids = reg.state.subjects.get(subject)
    if not ids:
        h._error(404, 40401, f"Subject '{subject}' not found.")
        return
    h._send(200, list(range(1, len(ids) + 1)))


def _get_version(h: _Handler, reg: SchemaRegistry, subject: str, version: str) -> None:
    n = _version(reg, h, subject, version)
    if n is not None:
        h._send(200, _schema_body(reg, reg.state.subjects[subject][n - 1], subject, n))


def _register(h: _Handler, reg: SchemaRegistry, subject: str) -> None:
    body = h._body()
    text, kind = body["schema"], body.get("schemaType", "AVRO")
    ids = reg.state.subjects.setdefault(subject, [])
    for sid in ids:
        if reg.state.schemas[sid] == (text, kind):
            h._send(200, {"id": sid})
            return
    if (ids and kind == "AVRO" and not body.get("references")
            and reg.state.compatibility.get(subject, "BACKWARD") != "NONE"):
        old = json.loads(reg.state.schemas[ids[-1]][0])
        problem = backward_problem(old, json.loads(text))
        if problem is not None:
            h._error(409, 409, f"Schema being registered is incompatible: {problem}")
            return
    existing = [i for i, s in reg.state.schemas.items() if s == (text, kind)]
    sid = existing[0] if existing else reg.state.next_id
    if not existing:
        reg.state.schemas[sid] = (text, kind)
        reg.state.references[sid] = list(body.get("references") or [])
        reg.state.next_id += 1
    ids.append(sid)
    h._send(200, {"id": sid})


def _lookup(h: _Handler, reg: SchemaRegistry, subject: str) -> None:
    body = h._body()
    for n, sid in enumerate(reg.state.subjects.get(subject, []), start=1):
        if reg.state.schemas[sid][0] == body["schema"]:
            h._send(200, _schema_body(reg, sid, subject, n))
            return
    h._error(404, 40403, "Schema not found")


def _compatibility(h: _Handler, reg: SchemaRegistry, subject: str, version: str) -> None:
    n = _version(reg, h, subject, version)
    if n is None:
        return
    old = json.loads(reg.state.schemas[reg.state.subjects[subject][n - 1]][0])
    problem = backward_problem(old, json.loads(h._body()["schema"]))
    h._send(200, {"is_compatible": problem is None})


def _get_config(h: _Handler, reg: SchemaRegistry, subject: str) -> None:
    h._send(200, {"compatibilityLevel": reg.state.compatibility.get(subject, "BACKWARD")})


def _put_config(h: _Handler, reg: SchemaRegistry, subject: str) -> None:
    level = h._body()["compatibility"]
    reg.state.compatibility[subject] = level
    h._send(200, {"compatibility": level})


_ROUTES: list[tuple[str, tuple[str, Any]]] = [
    (r"/schemas/ids/(\d+)", ("GET", _get_schema)),
    (r"/subjects", ("GET", _get_subjects)),
    (r"/subjects/([^/]+)/versions", ("GET", _get_versions)),
    (r"/subjects/([^/]+)/versions/([^/]+)", ("GET", _get_version)),
    (r"/subjects/([^/]+)/versions", ("POST", _register)),
    (r"/subjects/([^/]+)", ("POST", _lookup)),
    (r"/compatibility/subjects/([^/]+)/versions/([^/]+)", ("POST", _compatibility)),
    (r"/config/([^/]+)", ("GET", _get_config)),
    (r"/config/([^/]+)", ("PUT", _put_config)),
]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    registry: SchemaRegistry


class SchemaRegistry:
    """The registry server, started on a free port of 127.0.0.1 (see module docs)."""

    def __init__(self) -> None:
        self.state = _State()
        self.lock = threading.Lock()
        #: when set, every request answers this HTTP status (an unreachable/failing registry)
        self.fail_with: int | None = None
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.registry = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="test-schema-registry")
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def register(self, subject: str, schema: dict[str, Any] | str) -> int:
        """Register directly (not over HTTP); returns the id (compatibility not checked)."""
        text = schema if isinstance(schema, str) else json.dumps(schema)
        with self.lock:
            existing = [i for i, s in self.state.schemas.items() if s == (text, "AVRO")]
            sid = existing[0] if existing else self.state.next_id
            if not existing:
                self.state.schemas[sid] = (text, "AVRO")
                self.state.next_id += 1
            ids = self.state.subjects.setdefault(subject, [])
            if sid not in ids:
                ids.append(sid)
            return sid

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
