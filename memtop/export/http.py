"""The exporter's HTTP server: small, bounded, and quiet about clients that misbehave.

It runs an asyncio loop in a thread of its own, so a connection costs a socket and a coroutine,
not a thread: reading a request's headers takes no slot. Each connection has one deadline for the
whole exchange (the request's headers and the answer's body), so a client that trickles a header
byte every few seconds is dropped when the deadline passes, not kept alive by each byte. At most
``MAX_CONNECTIONS`` connections are open and at most ``MAX_PER_ADDRESS`` from one client address;
when either is full, a new connection displaces the oldest one still sending its headers (the
slow ones; a scraper sends its request at once), and is refused with a 503 only when every open
connection is already being answered.

Client errors (a deadline passed, an early disconnect or reset, a malformed request, a refused
connection) are counted by reason, never printed: a scanner or a flaky network must not fill the
journal. Anything else is a server error: counted, and its traceback printed the first time only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: the deadline of one exchange, from the connection's accept to the answer's last byte
#: (Prometheus's default scrape timeout is 10 s too)
REQUEST_DEADLINE_S = 10.0
MAX_CONNECTIONS = 64
MAX_PER_ADDRESS = 8
#: a request's line and headers, together (a scraper sends a few hundred bytes)
MAX_HEADER_BYTES = 16384
#: the answer goes out in chunks of this size, each drained: a client that does not read holds
#: at most one chunk of memory, not a copy of the whole exposition
CHUNK_BYTES = 65536

#: the reasons ``client_errors`` counts, all present from the start (a zero series, not no data)
CLIENT_ERROR_REASONS = ("deadline", "disconnect", "bad_request", "refused")


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    headers: Mapping[str, str]  # names lower-cased


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    content_type: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


#: builds the answer to a request; runs in the server's one worker thread (it may take the state's
#: lock and build an exposition, which must not stall the loop that reads other requests)
Handler = Callable[[Request], Response]

_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class BadRequest(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


@dataclass
class Stats:
    """What the server counts, read by the exporter's self-metrics (under ``lock``)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    client_errors: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CLIENT_ERROR_REASONS, 0))
    server_errors: int = 0
    requests: int = 0

    def client_error(self, reason: str) -> None:
        with self.lock:
            self.client_errors[reason] += 1

    def server_error(self, exc: BaseException | None, what: str) -> None:
        """Count it; the first one's traceback goes to stderr (later ones would repeat it)."""
        with self.lock:
            self.server_errors += 1
            first = self.server_errors == 1
        if first:
            sys.stderr.write(
                f"memtop: exporter: {what} (further errors are counted in memtop_exporter_server_errors_total)\n"
            )
            if exc is not None:
                traceback.print_exception(exc, file=sys.stderr)

    def snapshot(self) -> tuple[dict[str, int], int, int]:
        with self.lock:
            return dict(self.client_errors), self.server_errors, self.requests


@dataclass(eq=False)
class _Conn:
    address: str
    started: float
    writer: asyncio.StreamWriter
    answering: bool = False


def parse_head(head: bytes) -> Request:
    """The request line and headers (up to the blank line) -> Request; BadRequest when malformed."""
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError:  # latin-1 decodes every byte; kept for clarity
        raise BadRequest(400) from None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1.") or not parts[1].startswith("/"):
        raise BadRequest(400)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise BadRequest(400)
        key = name.lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return Request(parts[0], parts[1], headers)


def accepts_gzip(accept_encoding: str) -> bool:
    """Whether ``Accept-Encoding`` allows gzip (``gzip`` or ``*`` with a q above 0)."""
    for item in accept_encoding.split(","):
        coding, *params = (p.strip() for p in item.split(";"))
        if coding.lower() not in ("gzip", "x-gzip", "*"):
            continue
        q = 1.0
        for p in params:
            k, _, v = p.partition("=")
            if k.strip().lower() == "q":
                try:
                    q = float(v)
                except ValueError:
                    q = 0.0
        if q > 0:
            return True
    return False


def _head(status: int, content_type: str, length: int, extra: tuple[tuple[str, str], ...]) -> bytes:
    lines = [
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}",
        f"Content-Type: {content_type}",
        f"Content-Length: {length}",
        "Connection: close",
        "Server: memtop-exporter",
        *(f"{k}: {v}" for k, v in extra),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _plain(status: int) -> bytes:
    body = f"{_REASONS.get(status, 'Error').lower()}\n".encode()
    return _head(status, "text/plain; charset=utf-8", len(body), ()) + body


class HttpServer:
    """Serve ``handler`` on ``address`` from a thread of its own until :meth:`close`."""

    def __init__(
        self,
        address: tuple[str, int],
        handler: Handler,
        *,
        deadline_s: float = REQUEST_DEADLINE_S,
        max_connections: int = MAX_CONNECTIONS,
        max_per_address: int = MAX_PER_ADDRESS,
    ) -> None:
        self.handler = handler
        self.deadline_s = deadline_s
        self.max_connections = max_connections
        self.max_per_address = max_per_address
        self.stats = Stats()
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        # bound here, in the caller's thread, so a taken address is an error the caller sees
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.sock.bind(address)
            self.sock.listen(128)
            self.sock.setblocking(False)
        except BaseException:
            self.sock.close()
            raise
        self._conns: dict[_Conn, None] = {}  # insertion order: the oldest first
        self._worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="memtop-export-build")
        self._loop = asyncio.new_event_loop()
        self._loop.set_exception_handler(self._loop_error)
        self._stopped = asyncio.Event()
        self._thread = threading.Thread(target=self._run, name="memtop-export-http", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    # -- the loop -----------------------------------------------------------------------------------
    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._main())
        finally:
            self._loop.close()

    async def _main(self) -> None:
        server = await asyncio.start_server(self._serve, sock=self.sock, limit=MAX_HEADER_BYTES)
        async with server:
            await self._stopped.wait()
            server.close()
            for conn in list(self._conns):
                conn.writer.transport.abort()

    def close(self) -> None:
        """Stop serving, drop open connections and wait for the thread (bounded)."""
        if self._thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop already gone
                self._loop.call_soon_threadsafe(self._stopped.set)
            self._thread.join(10)
        self._worker.shutdown(wait=False, cancel_futures=True)
        self.sock.close()

    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, (ConnectionError, TimeoutError)):
            self.stats.client_error("disconnect")
            return
        self.stats.server_error(exc if isinstance(exc, BaseException) else None, str(context.get("message")))

    # -- a connection -------------------------------------------------------------------------------
    def _admit(self, conn: _Conn) -> bool:
        """Make room for ``conn`` under both limits by displacing the oldest connections still
        sending their headers; False when there is no such connection to displace."""
        for limit, same in (
            (self.max_per_address, lambda c: c.address == conn.address),
            (self.max_connections, lambda c: True),
        ):
            held = [c for c in self._conns if same(c)]
            while len(held) >= limit:
                victim = next((c for c in held if not c.answering), None)
                if victim is None:
                    return False
                held.remove(victim)
                self._drop(victim)
        self._conns[conn] = None
        return True

    def _drop(self, conn: _Conn) -> None:
        self._conns.pop(conn, None)
        self.stats.client_error("refused")
        transport = conn.writer.transport
        if not transport.is_closing():
            transport.write(_plain(503))
            transport.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        conn = _Conn(str(peer[0]) if peer else "", time.monotonic(), writer)
        writer.transport.set_write_buffer_limits(high=CHUNK_BYTES)
        if not self._admit(conn):
            self.stats.client_error("refused")
            with contextlib.suppress(OSError):
                writer.transport.write(_plain(503))
            writer.transport.close()
            return
        try:
            async with asyncio.timeout_at(asyncio.get_running_loop().time() + self.deadline_s):
                await self._exchange(conn, reader, writer)
        except TimeoutError:
            self.stats.client_error("deadline")
        except (ConnectionError, asyncio.IncompleteReadError):
            self.stats.client_error("disconnect")
        except asyncio.LimitOverrunError:
            self.stats.client_error("bad_request")
            await self._send_quietly(writer, _plain(431))
        except BadRequest as exc:
            self.stats.client_error("bad_request")
            await self._send_quietly(writer, _plain(exc.status))
        except Exception as exc:  # noqa: BLE001 - any other failure is ours: counted, told once
            self.stats.server_error(exc, "a request failed")
            await self._send_quietly(writer, _plain(500))
        finally:
            self._conns.pop(conn, None)
            if not writer.transport.is_closing():  # the deadline or an error: nothing left to send
                writer.transport.abort()

    async def _send_quietly(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        """A last short answer (an error status) if the client still listens; no wait for it."""
        transport = writer.transport
        if not transport.is_closing():
            with contextlib.suppress(OSError):
                transport.write(data)
            transport.close()

    async def _exchange(
        self, conn: _Conn, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        if len(head) > MAX_HEADER_BYTES:
            raise asyncio.LimitOverrunError("headers too long", len(head))
        request = parse_head(head[:-4])
        if request.method not in ("GET", "HEAD"):
            raise BadRequest(405)
        conn.answering = True
        with self.stats.lock:
            self.stats.requests += 1
        loop = asyncio.get_running_loop()
        response = await loop.run_in_executor(self._worker, self.handler, request)
        body = b"" if request.method == "HEAD" else response.body
        writer.write(_head(response.status, response.content_type, len(response.body), response.headers))
        view = memoryview(body)
        for i in range(0, len(body), CHUNK_BYTES):
            if writer.transport.is_closing():
                raise ConnectionResetError("client gone")
            writer.write(view[i : i + CHUNK_BYTES])
            await writer.drain()
        await writer.drain()
        writer.transport.close()
