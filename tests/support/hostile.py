"""Hostile files for the converter, folder and file-server probes (issue 45, reliability round
four): a deadline that interrupts any Python code or regex, PDFs written object by object
(encryption aside, every damage a reader meets: a page tree that loops, an outline that
cycles, information that is not text), zips that lie, and the rule every answer keeps: a
one-line error or a result a store can hold."""

from __future__ import annotations

import signal
import struct
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from documents import raw_pdf  # noqa: F401 - used here and by the probes, which import it from here


class Hang(BaseException):  # noqa: N818 (a BaseException, so a converter's `except Exception` cannot swallow it)
    """The probe ran past its deadline."""


@contextmanager
def within(seconds: float) -> Iterator[None]:
    """Raise Hang when the block runs longer than `seconds` (SIGALRM: it interrupts Python
    code and the regex engine alike; main thread only)."""

    def expire(signum: int, frame: Any) -> None:
        raise Hang(f"still running after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def assert_one_line(message: str) -> None:
    """What a user reads on a `failed:` line: one line, short, no traceback, no object address."""
    assert message and "\n" not in message and len(message) < 400, message
    assert "Traceback" not in message and " object at 0x" not in message, message


def assert_storable(text: str, what: str = "text") -> None:
    """What every store holds: no NUL, no lone surrogate."""
    assert "\x00" not in text, f"{what} holds a NUL"
    text.encode("utf-8")  # raises on a lone surrogate


# --------------------------------------------------------------------------- PDF
def stream(data: bytes, extra: bytes = b"") -> bytes:
    return b"<< /Length %d%s >>\nstream\n" % (len(data), extra) + data + b"\nendstream"


HELVETICA = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def one_page_pdf(
    text: bytes = b"Hello from a hostile page.",
    media_box: bytes = b"0 0 612 842",
    info: bytes | None = None,
    catalog: bytes = b"",
    font: bytes = HELVETICA,
    resources: bytes = b"/Font << /F1 3 0 R >>",
    content: bytes | None = None,
    extra: Sequence[bytes] = (),
) -> bytes:
    """One page of `text` (objects 1-5: catalog, pages, font, page, content), then `extra`
    (objects 6...), then the information dictionary `info`."""
    content = content if content is not None else b"BT /F1 12 Tf 50 700 Td (" + text + b") Tj ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R%s >>" % catalog,
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        font,
        b"<< /Type /Page /Parent 2 0 R /MediaBox [%s] /Resources << %s >> /Contents 5 0 R >>" % (media_box, resources),
        stream(content),
        *extra,
    ]
    if info is not None:
        objects.append(info)
    return raw_pdf(objects, info=len(objects) if info is not None else None)


def outlined_pdf(items: Sequence[bytes]) -> bytes:
    """One page whose outline root is object 6 and its items objects 7...: `items[0]` is the root."""
    return one_page_pdf(text=b"Outlined page text.", catalog=b" /Outlines 6 0 R", extra=items)


# --------------------------------------------------------------------------- zips
def overlapping_zip(copies: int, size: int, name: bytes = b"word/document.xml") -> bytes:
    """A zip whose `copies` central-directory entries all point at one deflated entry of `size`
    zero bytes (David Fifield's overlapping bomb): a few KB that list `copies * size` bytes."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    packed = deflate.compress(b"\0" * size) + deflate.flush()
    crc = zlib.crc32(b"\0" * size)
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(packed), size, len(name), 0) + name
    central = b""
    for i in range(copies):
        entry = name if i == 0 else b"word/part%d.xml" % i
        central += struct.pack(
            "<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0, crc, len(packed), size, len(entry), 0, 0, 0, 0, 0, 0
        )
        central += entry
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, copies, copies, len(central), len(local) + len(packed), 0)
    return local + packed + central + end


def lying_sizes(zipped: bytes, name: str, size: int) -> bytes:
    """`zipped` with the entry `name` declaring `size` bytes, whatever it inflates to."""
    data, wanted = bytearray(zipped), name.encode()
    at = 0
    while (at := data.find(b"PK\x01\x02", at)) >= 0:  # central directory: sizes at 24, name at 46
        length = struct.unpack("<H", data[at + 28 : at + 30])[0]
        if bytes(data[at + 46 : at + 46 + length]) == wanted:
            data[at + 24 : at + 28] = struct.pack("<I", size)
        at += 4
    at = 0
    while (at := data.find(b"PK\x03\x04", at)) >= 0:  # local headers: size at 22, name at 30
        length = struct.unpack("<H", data[at + 26 : at + 28])[0]
        if bytes(data[at + 30 : at + 30 + length]) == wanted:
            data[at + 22 : at + 26] = struct.pack("<I", size)
        at += 4
    return bytes(data)
