"""Spark master URLs hoodline understands, parsed without importing pyspark."""

from __future__ import annotations

import enum
import os
import re
from dataclasses import dataclass

from hoodline.errors import ConfigError

_LOCAL = re.compile(r"local(?:\[(\*|[1-9]\d*)(?:,\s*([1-9]\d*))?\])?")
#: Master URLs Spark accepts besides local ones (and ``yarn``).
_REMOTE_PREFIXES = ("spark://", "k8s://", "mesos://")
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*([1-9]\d*)\s*,\s*([1-9]\d*)\s*,\s*([1-9]\d*)\s*\]")


class MasterKind(enum.Enum):
    """Where a master URL runs the executors."""

    #: ``local[...]``: in the driver's JVM
    LOCAL = "local"
    #: ``local-cluster[...]``: executor JVMs on this machine, started by Spark
    LOCAL_CLUSTER = "local-cluster"
    #: ``spark://``, ``yarn``, ``k8s://``, ``mesos://``: elsewhere, sized by the cluster
    REMOTE = "remote"


@dataclass(frozen=True)
class Master:
    """A parsed Spark master URL."""

    url: str
    kind: MasterKind
    executors: int
    cores_per_executor: int

    @property
    def total_cores(self) -> int:
        return self.executors * self.cores_per_executor

    @property
    def is_local(self) -> bool:
        return self.kind is not MasterKind.REMOTE


def parse_master(url: str) -> Master:
    """Parse ``local``, ``local[N]``, ``local[*]``, ``local[N,F]`` or ``local-cluster[E,C,M]``.

    Other URLs (``spark://``, ``yarn``, ``k8s://``) are accepted as ``remote`` without sizing.
    Malformed ``local...`` URLs raise :class:`ConfigError`.
    """
    url = url.strip()
    m = _LOCAL.fullmatch(url)
    if m:
        n = m.group(1)
        if n is None:
            cores = 1
        elif n == "*":
            cores = os.cpu_count() or 1
        else:
            cores = int(n)
        return Master(url, MasterKind.LOCAL, 1, cores)
    m = _LOCAL_CLUSTER.fullmatch(url)
    if m:
        return Master(url, MasterKind.LOCAL_CLUSTER, int(m.group(1)), int(m.group(2)))
    if not url:
        raise ConfigError("Spark master is empty; use e.g. local[2]")
    if url.startswith("local"):
        raise ConfigError(
            f"Spark master {url!r} is malformed; use local, local[N], local[*], local[N,F] "
            "or local-cluster[EXECUTORS,CORES_PER_EXECUTOR,MEMORY_MB]"
        )
    if not (url == "yarn" or url.startswith(_REMOTE_PREFIXES)):
        raise ConfigError(
            f"Spark master {url!r} is not a Spark master URL; use local[N], local[*], "
            f"local[N,F], local-cluster[EXECUTORS,CORES_PER_EXECUTOR,MEMORY_MB], "
            f"spark://HOST:PORT, yarn or k8s://API_SERVER_URL"
        )
    return Master(url, MasterKind.REMOTE, 0, 0)


def standalone_addresses(url: str) -> list[tuple[str, int]]:
    """The (host, port) pairs of a ``spark://`` master URL (several for a standby list:
    ``spark://h1:7077,h2:7077``); [] for other masters."""
    if not url.startswith("spark://"):
        return []
    out = []
    for part in url.removeprefix("spark://").split(","):
        host, _, port = part.strip().rpartition(":")
        if host and port.isascii() and port.isdigit():
            out.append((host.strip("[]"), int(port)))
    return out


def unreachable_master(url: str, timeout_s: float = 5.0) -> str | None:
    """Why no master of a ``spark://`` URL accepts a connection (None: one does, or the URL
    is not a standalone master's). Spark itself retries registering for about a minute and
    prints a Java stack trace per attempt."""
    import socket

    reasons = []
    for host, port in standalone_addresses(url):
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return None
        except OSError as exc:
            reasons.append(f"{host}:{port}: {exc.strerror or exc}")
    return "; ".join(reasons) or None


def master_problem(url: str) -> str | None:
    """Validator for options: None when ``url`` parses, else the reason."""
    try:
        parse_master(url)
    except ConfigError as exc:
        return str(exc)
    return None


#: Spark's default port of a standalone master's web UI
MASTER_UI_PORT = 8080


def master_ui_url(url: str, configured: str = "") -> str | None:
    """The web UI of the standalone master of ``url``: ``configured`` (runtime.master-ui), or
    the first master's host on Spark's default UI port; None for other masters."""
    if configured:
        return configured.rstrip("/")
    addresses = standalone_addresses(url)
    if not addresses:
        return None
    host = addresses[0][0]
    return f"http://{f'[{host}]' if ':' in host else host}:{MASTER_UI_PORT}"


def master_knows_application(ui_url: str, app_id: str, timeout_s: float = 5.0) -> bool | None:
    """Whether the standalone master whose web UI is at ``ui_url`` lists application
    ``app_id`` among its active (running or waiting) applications; None when the UI does not
    answer with the JSON of an alive master (a standby one of a recovery setup knows none)."""
    import json
    import urllib.request

    try:
        with urllib.request.urlopen(f"{ui_url}/json/", timeout=timeout_s) as resp:
            state = json.loads(resp.read())
    except (OSError, ValueError):
        return None
    apps = state.get("activeapps") if isinstance(state, dict) else None
    if not isinstance(apps, list) or state.get("status", "ALIVE") != "ALIVE":
        return None  # not a master's JSON, or a standby / recovering master: it cannot say
    return any(isinstance(a, dict) and a.get("id") == app_id for a in apps)
