"""A minimal gRPC client over cleartext HTTP/2, enough to ask `opm serve` questions.

grpcio is not a dependency of the project, and the questions are tiny: one request
message, a handful of response messages. This speaks HTTP/2 with prior knowledge
(h2c): the connection preface, SETTINGS, one HEADERS frame encoded with HPACK literals
(no Huffman, no table), one DATA frame, then reads DATA frames until the stream ends.
Protobuf messages are encoded and decoded by field number.
"""

from __future__ import annotations

import socket
import struct
from collections import defaultdict

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1


def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return (
        struct.pack(">I", len(payload))[1:]
        + bytes([kind, flags])
        + struct.pack(">I", stream)
        + payload
    )


def _hpack_int(value: int, prefix_bits: int = 7) -> bytes:
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([value])
    out, value = bytearray([limit]), value - limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _literal(name: str, value: str) -> bytes:
    """A header field "literal without indexing, new name", no Huffman coding."""
    raw_name, raw_value = name.encode(), value.encode()
    return b"\x00" + _hpack_int(len(raw_name)) + raw_name + _hpack_int(len(raw_value)) + raw_value


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_strings(fields: dict[int, str]) -> bytes:
    """A protobuf message whose fields are all strings."""
    out = bytearray()
    for number, value in sorted(fields.items()):
        raw = value.encode()
        out += _varint(number << 3 | 2) + _varint(len(raw)) + raw
    return bytes(out)


def decode(message: bytes) -> dict[int, list[bytes | int]]:
    """Field number -> values (bytes for length-delimited fields, ints for varints)."""
    fields: dict[int, list[bytes | int]] = defaultdict(list)
    index = 0

    def varint() -> int:
        nonlocal index
        shift = result = 0
        while True:
            byte = message[index]
            index += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return result

    while index < len(message):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            fields[number].append(varint())
        elif wire == 2:
            length = varint()
            fields[number].append(message[index : index + length])
            index += length
        elif wire == 1:
            index += 8
        elif wire == 5:
            index += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
    return dict(fields)


def _read_exact(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the server closed the connection")
        data += chunk
    return bytes(data)


def call(
    host: str, port: int, method: str, request: bytes = b"", *, timeout: float = 10
) -> list[bytes]:
    """Call `method` (e.g. "/api.Registry/ListPackages"); return the response messages."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(PREFACE + _frame(SETTINGS, 0, 0, b""))
        sock.sendall(_frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 30)))
        headers = b"".join(
            _literal(name, value)
            for name, value in (
                (":method", "POST"),
                (":scheme", "http"),
                (":path", method),
                (":authority", f"{host}:{port}"),
                ("content-type", "application/grpc"),
                ("te", "trailers"),
            )
        )
        sock.sendall(_frame(HEADERS, END_HEADERS, 1, headers))
        sock.sendall(
            _frame(DATA, END_STREAM, 1, b"\x00" + struct.pack(">I", len(request)) + request)
        )
        body = bytearray()
        while True:
            head = _read_exact(sock, 9)
            length = int.from_bytes(head[:3], "big")
            kind, flags = head[3], head[4]
            stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
            payload = _read_exact(sock, length)
            if kind == SETTINGS and not flags & ACK:
                sock.sendall(_frame(SETTINGS, ACK, 0, b""))
            elif kind == PING and not flags & ACK:
                sock.sendall(_frame(PING, ACK, 0, payload))
            elif kind == DATA and stream == 1:
                body += payload
                if payload:
                    increment = struct.pack(">I", len(payload))
                    sock.sendall(_frame(WINDOW_UPDATE, 0, 1, increment))
            elif kind in (RST_STREAM, GOAWAY):
                raise ConnectionError(f"the server reset the call (frame type {kind})")
            if stream == 1 and kind in (DATA, HEADERS) and flags & END_STREAM:
                break
    messages, index = [], 0
    while index + 5 <= len(body):
        size = int.from_bytes(body[index + 1 : index + 5], "big")
        messages.append(bytes(body[index + 5 : index + 5 + size]))
        index += 5 + size
    return messages
