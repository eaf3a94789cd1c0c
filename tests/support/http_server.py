#!/usr/bin/env python3
"""A loopback HTTP server for the fetch-data tests: no internet in tests.

    http_server.py ROOT [--log FILE] [--tls CERT KEY]

Serves the files under ROOT on 127.0.0.1 at a free port, printed as the first line of stdout
("PORT 12345"). Range requests (bytes=N-) get 206 with Content-Range. The first path component
chooses a behaviour for the file named by the rest:

    /files/NAME       the file, honouring Range
    /drop-once/NAME   the first GET sends half the body then closes the connection; later GETs
                      are served normally (an interrupted transfer)
    /drop-always/NAME every GET sends half of what it was asked for, then closes
    /stall/NAME       sends the headers and the first half, then sends nothing until the client
                      gives up (a stalled server)
    /no-range/NAME    ignores Range: always 200 with the whole file
    /flaky-once/NAME  503 on the first GET, then the file
    anything else     404

Each request is appended to the log file as "METHOD PATH RANGE" (RANGE is "-" when absent), so
tests can check that a rerun resumed with the right offset. With --tls the server speaks HTTPS
with the given PEM certificate and key (tests/release/release_test.sh: a CA outside Debian's
paths).
"""
import argparse
import http.server
import os
import select
import socket
import sys
import threading
import time

SEEN = set()
SEEN_LOCK = threading.Lock()


def first_time(key):
    with SEEN_LOCK:
        if key in SEEN:
            return False
        SEEN.add(key)
        return True


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    root = "."
    log_file = None

    def log_message(self, format, *args):  # noqa: A002 - the base class names it so
        pass

    def record(self):
        if self.log_file:
            with open(self.log_file, "a", encoding="utf-8") as out:
                out.write(f"{self.command} {self.path} {self.headers.get('Range', '-')}\n")

    def send_plain(self, status, text):
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802 - the base class names it so
        self.record()
        parts = self.path.lstrip("/").split("/", 1)
        mode, name = (parts[0], parts[1]) if len(parts) == 2 else ("", "")
        path = os.path.join(self.root, name)
        modes = {"files", "drop-once", "drop-always", "stall", "no-range", "flaky-once"}
        if mode not in modes or not name or ".." in name.split("/") or not os.path.isfile(path):
            self.send_plain(404, "not found\n")
            return
        if mode == "flaky-once" and first_time(self.path):
            self.send_plain(503, "try again\n")
            return
        with open(path, "rb") as f:
            data = f.read()
        start = 0
        ranged = False
        wanted = self.headers.get("Range")
        if wanted and mode != "no-range" and wanted.startswith("bytes=") and wanted.endswith("-"):
            start = int(wanted[len("bytes="):-1])
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            ranged = True
        body = data[start:]
        self.send_response(206 if ranged else 200)
        if ranged:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        cut = len(body) // 2
        if mode == "drop-always" or (mode == "drop-once" and first_time(self.path)):
            self.wfile.write(body[:cut])
            self.wfile.flush()
            self.close_connection = True
            return
        if mode == "stall":
            self.wfile.write(body[:cut])
            self.wfile.flush()
            # Nothing more until the client hangs up (or 5 minutes, as a backstop).
            deadline = time.time() + 300
            while time.time() < deadline:
                ready, _, _ = select.select([self.connection], [], [], 0.1)
                if ready:
                    try:
                        if not self.connection.recv(1, socket.MSG_PEEK):
                            break
                    except OSError:
                        break
            self.close_connection = True
            return
        self.wfile.write(body)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("--log")
    parser.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    args = parser.parse_args()
    Handler.root = args.root
    Handler.log_file = args.log
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    if args.tls:
        import ssl

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls[0], args.tls[1])
        server.socket = context.wrap_socket(server.socket, server_side=True)
    print(f"PORT {server.server_address[1]}", flush=True)
    # Dies with the test: stdin closes when the parent goes away.
    threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
