"""The host side of the guest agent's framing (targets/qemu/wire/frame.cc): one
`@@KC <seq> <hex payload> <crc32>@@` line per JSON record on the frame port."""

from __future__ import annotations

import dataclasses
import json
import re
import zlib

FRAME_RE = re.compile(r"@@KC (\d{1,19}) ([0-9a-f]*) ([0-9a-f]{8})@@")


def encode_frame(seq: int, payload: bytes) -> str:
    """One frame line (the agent's encode_frame), for tests."""
    return f"@@KC {seq} {payload.hex()} {zlib.crc32(payload):08x}@@\n"


def decode_frame(line: str) -> tuple[str, int, bytes]:
    """("ok", seq, payload) | ("none", ...) for a line without a frame |
    ("malformed", ...) for a cut or garbled frame | ("badcrc", ...)."""
    start = line.find("@@KC ")
    if start < 0:
        return "none", -1, b""
    m = FRAME_RE.match(line, start)
    if not m or len(m.group(2)) % 2:
        return "malformed", -1, b""
    payload = bytes.fromhex(m.group(2))
    if zlib.crc32(payload) != int(m.group(3), 16):
        return "badcrc", -1, b""
    return "ok", int(m.group(1)), payload


@dataclasses.dataclass
class FrameStream:
    """Turns the bytes of the frame port into records; counts what was lost."""
    records: list = dataclasses.field(default_factory=list)
    garbled: int = 0          # lines with a frame start that did not decode
    gaps: int = 0             # frames missing by sequence number
    _buf: bytes = b""
    _next: int = 0

    def feed(self, data: bytes) -> list[dict]:
        self._buf += data
        *lines, self._buf = self._buf.split(b"\n")
        new = []
        for raw in lines:
            status, seq, payload = decode_frame(raw.decode("latin-1"))
            if status == "none":
                continue
            if status != "ok":
                self.garbled += 1
                continue
            try:
                rec = json.loads(payload)
            except ValueError:
                self.garbled += 1
                continue
            if seq == 0 and self._next:   # a new boot starts counting again
                self._next = 0
            if seq > self._next:
                self.gaps += seq - self._next
            self._next = seq + 1
            new.append(rec)
        self.records += new
        return new
