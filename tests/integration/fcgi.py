"""A minimal FastCGI client (standard library only) to drive php-fpm."""
import socket
import struct

BEGIN, PARAMS, STDIN, STDOUT, END = 1, 4, 5, 6, 3


def _rec(kind, rid, body):
    out = b""
    # records carry at most 65535 bytes; empty body = end of stream
    chunks = [body[i:i + 65535] for i in range(0, len(body), 65535)] or [b""]
    for c in chunks:
        out += struct.pack(">BBHHBB", 1, kind, rid, len(c), 0, 0) + c
    return out


def _nv(name, value):
    n, v = name.encode(), value.encode()

    def ln(x):
        return struct.pack(">B", len(x)) if len(x) < 128 else struct.pack(">I", len(x) | 0x80000000)
    return ln(n) + ln(v) + n + v


def request(host, port, script, timeout=10.0):
    """Runs one GET of `script`; returns the response body (after headers)."""
    params = {"SCRIPT_FILENAME": script, "SCRIPT_NAME": "/" + script.rsplit("/", 1)[-1],
              "REQUEST_METHOD": "GET", "SERVER_PROTOCOL": "HTTP/1.1", "QUERY_STRING": "",
              "GATEWAY_INTERFACE": "CGI/1.1", "REMOTE_ADDR": "127.0.0.1", "SERVER_NAME": "localhost",
              "SERVER_PORT": "80", "REQUEST_URI": "/x"}
    body = b"".join(_nv(k, v) for k, v in params.items())
    msg = (_rec(BEGIN, 1, struct.pack(">HB5x", 1, 0)) + _rec(PARAMS, 1, body) + _rec(PARAMS, 1, b"") +
           _rec(STDIN, 1, b""))
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(msg)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    out = b""
    i = 0
    while i + 8 <= len(data):
        _, kind, _, clen, plen, _ = struct.unpack(">BBHHBB", data[i:i + 8])
        if kind == STDOUT:
            out += data[i + 8:i + 8 + clen]
        i += 8 + clen + plen
        if kind == END:
            break
    _, _, resp = out.partition(b"\r\n\r\n")
    return resp.decode(errors="replace")
