"""Azurite's Blob service on 127.0.0.1 (Microsoft's Azure Storage emulator, from npm; ``./dev``
installs it into ``.venv/azurite``) for the Azure (``az://`` / ``abfs://``) tests."""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from hoodline.broker import free_port

#: Azurite's well-known development account (public, documented by Microsoft)
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
BINARY = Path(__file__).resolve().parents[2] / ".venv" / "azurite" / "node_modules" / ".bin" / (
    "azurite-blob")


@dataclass
class Azurite:
    log: Path
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    containers: list[str] = field(default_factory=list)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/{ACCOUNT}"

    @property
    def options(self) -> dict[str, str]:
        """Storage options of a table on this emulator (``[table.storage]``)."""
        return {"account_name": ACCOUNT, "account_key": KEY, "endpoint": self.endpoint}

    def start(self) -> Azurite:
        binary = Path(os.environ.get("HOODLINE_AZURITE", BINARY))
        if not binary.exists():
            raise RuntimeError(f"Azurite is not installed at {binary}: run ./dev (it installs "
                               "azurite from npm into .venv/azurite) or set HOODLINE_AZURITE")
        self.port = free_port()
        workdir = self.log.parent / "azurite"
        workdir.mkdir(exist_ok=True)
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [str(binary), "--blobHost", "127.0.0.1", "--blobPort", str(self.port),
                 "--inMemoryPersistence", "--disableTelemetry", "--skipApiVersionCheck"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=workdir,
            )
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/", timeout=1)
            except urllib.error.HTTPError:
                return self  # answering (400: no account in the path)
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"Azurite did not start: {self.log.read_text(errors='replace')}"
                    ) from None
                time.sleep(0.1)
            else:
                return self

    def new_container(self) -> str:
        from azure.storage.blob import BlobServiceClient

        name = f"t{uuid.uuid4().hex[:12]}"
        conn = (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
                f"BlobEndpoint={self.endpoint};")
        BlobServiceClient.from_connection_string(conn).create_container(name)
        self.containers.append(name)
        return name

    def blobs(self, container: str, prefix: str = "") -> list[str]:
        from azure.storage.blob import BlobServiceClient

        conn = (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
                f"BlobEndpoint={self.endpoint};")
        client = BlobServiceClient.from_connection_string(conn).get_container_client(container)
        return sorted(b.name for b in client.list_blobs(name_starts_with=prefix))

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)
