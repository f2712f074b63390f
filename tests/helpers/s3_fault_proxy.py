"""An HTTP/1.1 proxy in front of moto's S3 server (127.0.0.1) that can lose the answer of a
request the store applied: :meth:`FaultProxy.fail_after_applying` forwards the next matching
requests and answers each with an S3 error instead of the store's answer, as a 5xx after the
fact or a dropped connection looks to a client."""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: hop-by-hop headers the proxy sets itself
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


class FaultProxy:
    """Forwards every request to ``127.0.0.1:target_port``; ``endpoint`` is its own URL."""

    def __init__(self, target_port: int) -> None:
        self._target = target_port
        self._lock = threading.Lock()
        self._pending: list[tuple[str, str, int]] = []  # (method, key suffix, status)
        #: (method, path) of the requests whose answers were replaced
        self.replaced: list[tuple[str, str]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def fail_after_applying(self, method: str, key_suffix: str, status: int = 500) -> None:
        """The next ``method`` request for a key ending in ``key_suffix`` reaches the store,
        and its client gets ``status`` (an S3 ``InternalError``) instead of the answer."""
        with self._lock:
            self._pending.append((method, key_suffix, status))

    def _take(self, method: str, path: str) -> int | None:
        key = path.split("?", 1)[0]
        with self._lock:
            for i, (m, suffix, status) in enumerate(self._pending):
                if m == method and key.endswith(suffix):
                    del self._pending[i]
                    self.replaced.append((method, path))
                    return status
        return None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def _forward(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size) if size else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                upstream = http.client.HTTPConnection("127.0.0.1", proxy._target, timeout=60)
                try:
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    answer = upstream.getresponse()
                    data = answer.read()
                finally:
                    upstream.close()
                status = proxy._take(self.command, self.path)
                if status is not None:
                    data = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError'
                            b"</Code><Message>We encountered an internal error. Please try "
                            b"again.</Message></Error>")
                    self.send_response_only(status)
                    self.send_header("Content-Type", "application/xml")
                else:
                    self.send_response_only(answer.status, answer.reason)
                    for k, v in answer.getheaders():
                        if k.lower() not in _HOP | {"server", "date"}:
                            self.send_header(k, v)
                length = answer.getheader("Content-Length") if self.command == "HEAD" else None
                self.send_header("Content-Length", length or str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        return Handler

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
