"""What an image or a PDF sent inline to a provider can cost in input tokens, read from the file.

The proxy holds an upper bound on a request's input tokens before it forwards it. For text the
body's byte count is such a bound, but inline media are billed by rules of their own: an image
by its pixels, a PDF by its pages and its text. A 100-byte PNG can declare 8000x8000 pixels and a
few kilobytes of PDF can hold hundreds of pages in a compressed object stream, so their byte
size bounds nothing. This module reads just enough of each file (an image's header, a PDF's page
objects) to bound what any of the providers bills for it, and refuses, with ``Unreadable``,
what it cannot read well enough to bound.

It is pure: bytes in, numbers out, no file or network I/O, and only the standard library, so it
can run on every request inside the proxy and be tested on hand-built files.
"""

from __future__ import annotations

import base64
import re
import zlib

__all__ = [
    "IMAGE_TOKENS_FLOOR",
    "PDF_PAGE_TOKENS",
    "Unreadable",
    "decode_base64",
    "image_size",
    "image_tokens",
    "pdf_pages",
    "pdf_tokens",
]


class Unreadable(ValueError):
    """The media cannot be read well enough to bound its cost.

    Its message says why in words a user understands (e.g. "the PNG's header is cut short",
    "the PDF is encrypted", "no page of the PDF could be found"): the proxy refuses the request
    with it, since forwarding media whose cost it cannot bound could overrun the budget.
    """


# --------------------------------------------------------------------------------------------
# base64


_BASE64_WHITESPACE = re.compile(r"[ \t\r\n\f\v]+")
_BASE64_BODY = re.compile(r"[A-Za-z0-9+/]*")
_URLSAFE_TO_STANDARD = str.maketrans("-_", "+/")


def decode_base64(data: str, *, limit: int) -> bytes:
    """The bytes that base64 text ``data`` encodes, refused past ``limit`` bytes.

    Strict about the alphabet (a provider would refuse what is not base64, and a lax decoder
    would silently drop characters and read a different file from the one the provider reads),
    lenient where decoders commonly are: whitespace and line breaks are ignored, the url-safe
    characters ``-`` and ``_`` stand for ``+`` and ``/``, and missing ``=`` padding is supplied.
    The decoded size is computed from the text's length and checked against ``limit`` before
    anything is decoded, so an oversized payload costs no memory.

    Raises ``Unreadable`` if ``data`` is not base64 or decodes to more than ``limit`` bytes.
    """
    if not data.isascii():
        raise Unreadable("the data is not valid base64 (it holds characters outside base64)")
    text = _BASE64_WHITESPACE.sub("", data).translate(_URLSAFE_TO_STANDARD)
    body = text.rstrip("=")
    padding = len(text) - len(body)
    if _BASE64_BODY.fullmatch(body) is None:
        raise Unreadable("the data is not valid base64 (it holds characters outside base64)")
    remainder = len(body) % 4
    if remainder == 1 or padding > 2 or (padding and (remainder == 0 or len(text) % 4)):
        raise Unreadable("the data is not valid base64 (its length or '=' padding is wrong)")
    size = len(body) // 4 * 3 + (remainder - 1 if remainder else 0)
    if size > limit:
        raise Unreadable(f"the data decodes to {size:,} bytes, over the limit of {limit:,} bytes")
    padded = body + "=" * (-len(body) % 4)
    try:
        return base64.b64decode(padded, validate=True)
    except ValueError as error:  # binascii.Error; not expected after the checks above
        raise Unreadable(f"the data is not valid base64 ({error})") from None


# --------------------------------------------------------------------------------------------
# Images


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_GIF_SIGNATURES = (b"GIF87a", b"GIF89a")
_JPEG_SOI = b"\xff\xd8"
# Start-of-frame markers: C0..CF except DHT (C4), JPG (C8) and DAC (CC), which share the range.
_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
# Markers that stand alone, with no length after them: TEM and the restart markers RST0..RST7.
_JPEG_STANDALONE = frozenset({0x01, *range(0xD0, 0xD8)})

_KNOWN_FORMATS = "a PNG, JPEG, GIF or WebP image"


def _u16be(data: bytes, at: int) -> int:
    return int.from_bytes(data[at : at + 2], "big")


def _u32be(data: bytes, at: int) -> int:
    return int.from_bytes(data[at : at + 4], "big")


def _u16le(data: bytes, at: int) -> int:
    return int.from_bytes(data[at : at + 2], "little")


def _u24le(data: bytes, at: int) -> int:
    return int.from_bytes(data[at : at + 3], "little")


def _u32le(data: bytes, at: int) -> int:
    return int.from_bytes(data[at : at + 4], "little")


def _cut_short(kind: str) -> Unreadable:
    return Unreadable(f"the {kind}'s header is cut short")


def _inconsistent(kind: str, what: str) -> Unreadable:
    return Unreadable(f"the {kind}'s header is inconsistent ({what})")


def _png_size(data: bytes) -> tuple[int, int]:
    # Signature, then the IHDR chunk first: length (13), type, width, height, five more bytes.
    if len(data) < 29:
        raise _cut_short("PNG")
    if data[12:16] != b"IHDR":
        raise _inconsistent("PNG", "its first chunk is not IHDR")
    if _u32be(data, 8) != 13:
        raise _inconsistent("PNG", "its IHDR chunk is not 13 bytes long")
    return _u32be(data, 16), _u32be(data, 20)


def _gif_size(data: bytes) -> tuple[int, int]:
    # Signature, then the logical screen descriptor: width, height, flags, background, aspect.
    if len(data) < 13:
        raise _cut_short("GIF")
    return _u16le(data, 6), _u16le(data, 8)


def _jpeg_size(data: bytes) -> tuple[int, int]:
    # The frame header (SOFn) comes before the first scan; every segment before it (APPn, DQT,
    # DHT, COM...) carries its length, so the markers are walked segment by segment. An EXIF
    # thumbnail, itself a JPEG with a frame header, sits inside APP1 and is skipped with it.
    at = 2
    end = len(data)
    while True:
        if at >= end:
            raise _cut_short("JPEG")
        if data[at] != 0xFF:
            raise _inconsistent("JPEG", "a segment does not end where its length says")
        while at < end and data[at] == 0xFF:  # fill bytes: any number of 0xFF before a marker
            at += 1
        if at >= end:
            raise _cut_short("JPEG")
        marker = data[at]
        at += 1
        if marker in _JPEG_STANDALONE:
            continue
        if marker in (0x00, 0xD8):
            raise _inconsistent("JPEG", f"marker 0x{marker:02X} out of place")
        if marker == 0xD9:
            raise Unreadable("the JPEG ends before its frame header")
        if marker == 0xDA:
            raise Unreadable("the JPEG's scan starts before its frame header")
        if at + 2 > end:
            raise _cut_short("JPEG")
        length = _u16be(data, at)
        if length < 2:
            raise _inconsistent("JPEG", "a segment's length is below 2")
        if marker in _JPEG_SOF:
            # length, precision, height, width, component count, then 3 bytes per component.
            if length < 8:
                raise _inconsistent("JPEG", "its frame header is too short")
            if at + length > end:
                raise _cut_short("JPEG")
            components = data[at + 7]
            if components == 0 or length != 8 + 3 * components:
                raise _inconsistent("JPEG", "its frame header's length disagrees with it")
            return _u16be(data, at + 5), _u16be(data, at + 3)
        at += length


def _webp_size(data: bytes) -> tuple[int, int]:
    # RIFF header ("RIFF", size, "WEBP"), then the first chunk: its four-character code and
    # size, then the bitstream header that carries the dimensions.
    if len(data) < 20:
        raise _cut_short("WebP")
    chunk = data[12:16]
    chunk_size = _u32le(data, 16)
    if chunk == b"VP8 ":
        # Lossy: a 3-byte frame tag, the key frame start code, then 14-bit width and height
        # (the top two bits of each are an upscaling hint that decoders ignore).
        if len(data) < 30:
            raise _cut_short("WebP")
        if chunk_size < 10:
            raise _inconsistent("WebP", "its VP8 chunk is too short")
        if data[20] & 1:
            raise _inconsistent("WebP", "its VP8 frame is not a key frame")
        if data[23:26] != b"\x9d\x01\x2a":
            raise _inconsistent("WebP", "its VP8 start code is missing")
        return _u16le(data, 26) & 0x3FFF, _u16le(data, 28) & 0x3FFF
    if chunk == b"VP8L":
        # Lossless: a signature byte, then 14 bits of width - 1, 14 of height - 1, 1 of alpha
        # and 3 of version (0).
        if len(data) < 25:
            raise _cut_short("WebP")
        if chunk_size < 5:
            raise _inconsistent("WebP", "its VP8L chunk is too short")
        if data[20] != 0x2F:
            raise _inconsistent("WebP", "its VP8L signature is missing")
        bits = _u32le(data, 21)
        if bits >> 29:
            raise _inconsistent("WebP", "its VP8L version is unknown")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        # Extended (alpha, animation, metadata): flags, 3 reserved bytes, then the canvas's
        # 24-bit width - 1 and height - 1, which every frame must fit inside.
        if len(data) < 30:
            raise _cut_short("WebP")
        if chunk_size < 10:
            raise _inconsistent("WebP", "its VP8X chunk is too short")
        return _u24le(data, 24) + 1, _u24le(data, 27) + 1
    raise _inconsistent("WebP", "its first chunk is not VP8, VP8L or VP8X")


def _is_webp(data: bytes) -> bool:
    return data[:4] == b"RIFF" and data[8:12] == b"WEBP"


def _is_cut_signature(data: bytes) -> bool:
    """Whether ``data`` is the beginning of a known format's signature, cut before its end."""
    signatures = (_PNG_SIGNATURE, *_GIF_SIGNATURES, _JPEG_SOI)
    if any(len(data) < len(sig) and sig.startswith(data) for sig in signatures):
        return True
    return len(data) < 12 and b"RIFF".startswith(data[:4]) and b"WEBP".startswith(data[8:])


def image_size(data: bytes) -> tuple[int, int]:
    """The image's ``(width, height)`` in pixels, read from its header.

    What a provider bills for an image follows from its pixel count, which the header declares
    whatever the file's byte size; reading only the header keeps this cheap on every request.
    Reads PNG (the IHDR chunk), GIF (the logical screen, which every frame is drawn inside),
    JPEG (the first frame header, SOF0 to SOF15) and WebP (VP8 lossy, VP8L lossless and the
    VP8X extended canvas). These are the formats the providers accept inline.

    Raises ``Unreadable`` for any other format, for a header cut short or inconsistent with
    itself, and for a width or height of 0 (nothing a provider would bill could be read).
    """
    if data.startswith(_PNG_SIGNATURE):
        kind, (width, height) = "PNG", _png_size(data)
    elif data.startswith(_GIF_SIGNATURES):
        kind, (width, height) = "GIF", _gif_size(data)
    elif data.startswith(_JPEG_SOI):
        kind, (width, height) = "JPEG", _jpeg_size(data)
    elif _is_webp(data):
        kind, (width, height) = "WebP", _webp_size(data)
    elif not data:
        raise Unreadable("the image is empty")
    elif _is_cut_signature(data):
        raise Unreadable("the image's header is cut short")
    else:
        raise Unreadable(f"the image is not {_KNOWN_FORMATS}")
    if width == 0 or height == 0:
        raise Unreadable(f"the {kind} declares a size of {width}x{height} pixels")
    return width, height


IMAGE_TOKENS_FLOOR: int = 4_000
"""The least an image is held at: the providers' per-image fixed costs and their rules' maxima
for small and medium images (see ``image_tokens``)."""


def image_tokens(data: bytes) -> int:
    """An upper bound on the input tokens any of the providers bills for this image.

    ``max(IMAGE_TOKENS_FLOOR, ceil(width * height / 500))``, from the header's pixel size:

    - Anthropic bills about ``width * height / 750`` tokens, after resizing the image down to
      its limits; resizing only lowers the pixel count, so the original's ``w * h / 750`` bounds
      it, and ``/ 500`` leaves a margin on "about".
    - OpenAI's tile rule (85 tokens plus 170 per 512-pixel tile, after scaling the image into
      2048x2048 and then to 768 pixels on its short side) never exceeds 1,500 tokens.
    - OpenAI's patch rule (32-pixel patches, at most 1,536 of them, times a model's multiplier
      of up to about 2.5) never exceeds 4,000 tokens.

    The floor covers those capped rules and the fixed per-image costs, so a small image is
    still held at what its most expensive provider could bill.

    Raises ``Unreadable`` if the image's size cannot be read (see ``image_size``).
    """
    width, height = image_size(data)
    return max(IMAGE_TOKENS_FLOOR, -(-width * height // 500))


# --------------------------------------------------------------------------------------------
# PDFs


PDF_PAGE_TOKENS: int = 5_000
"""What a PDF is held at per page, on top of its text: the page rendered as an image (about
1,600 tokens) plus Anthropic's documented 1,500 to 3,000 text tokens a page, with a margin."""

_PDF_INFLATE_LIMIT = 64 * 1024 * 1024
_PDF_JUNK_LIMIT = 1024  # bytes before "%PDF-" that readers tolerate
_PDF_MAX_COUNT = 2**31 - 1  # the largest integer a PDF reader must accept

# PDF's lexical classes: white space, and the delimiters that end a name as white space does.
_WS = rb"\x00\t\n\x0c\r "
_DELIMITERS = rb"()<>\[\]{}/%"
# White space and comments between tokens; possessive, so that a line of '%' cannot make the
# match backtrack through every way of splitting it into comments.
_GAP = rb"(?:[" + _WS + rb"]++|%[^\r\n]*+)*+"
_GAP1 = rb"(?:[" + _WS + rb"]++|%[^\r\n]*+)++"
_NAME_ENDS = rb"(?![^" + _WS + _DELIMITERS + rb"])"

# A page object's type entry: /Type /Page, not /Pages or any longer name.
_PAGE_TYPE = re.compile(rb"/Type" + _GAP + rb"/Page" + _NAME_ENDS)
# A /Count entry: a page tree node's page count (or an outline's item count: an overcount).
_COUNT = re.compile(rb"/Count" + _GAP1 + rb"\+?([0-9]++)")
# An /Encrypt entry, with the indirect reference or dictionary the spec requires as its value.
_ENCRYPT = re.compile(
    rb"/Encrypt"
    + _NAME_ENDS
    + _GAP
    + rb"(?:[0-9]++"
    + _GAP1
    + rb"[0-9]++"
    + _GAP1
    + rb"R"
    + _NAME_ENDS
    + rb"|<<)"
)
# The keyword that starts a stream's data, and its end of line (a lone CR, which the spec
# forbids but writers produce, is accepted too); "endstream" is excluded by the look-behind.
_STREAM = re.compile(rb"(?<![A-Za-z])stream[ \t]*+(?:\r\n|\n|\r)")
_ENDSTREAM = b"endstream"

# Streams are inflated feeding at most _INFLATE_IN bytes and taking at most _INFLATE_OUT bytes
# per call, so that a stream failing part-way has cost at most _INFLATE_OUT bytes unaccounted:
# that much is charged to the limit for each failure, so failures cannot make the work unbounded.
_INFLATE_IN = 4096
_INFLATE_OUT = 16384


def _megabytes(limit: int) -> str:
    if limit >= 1024 * 1024:
        return f"{limit / (1024 * 1024):g} MB"
    return f"{limit:,} bytes"


def _zlib_header(stream: memoryview) -> bool:
    """Whether ``stream`` starts with a zlib header (deflate, no preset dictionary): a stream
    that does not (an image's DCT data, an uncompressed content stream) is skipped without
    inflating anything."""
    if len(stream) < 2:
        return False
    cmf, flg = stream[0], stream[1]
    return cmf & 0x0F == 8 and cmf >> 4 <= 7 and not flg & 0x20 and (cmf * 256 + flg) % 31 == 0


class _Reading:
    """A PDF read for its cost: the page objects and largest /Count seen, and the inflated
    size of its streams, with the limit on inflating."""

    def __init__(self, inflate_limit: int) -> None:
        self.inflate_limit = inflate_limit
        self.charged = 0  # bytes inflated (and charged for failures) so far, across all streams
        self.inflated = 0  # bytes of the streams that inflated
        self.page_objects = 0
        self.max_count = 0

    def scan(self, text: bytes) -> None:
        """Count the page objects and read the /Count entries in ``text``."""
        self.page_objects += sum(1 for _ in _PAGE_TYPE.finditer(text))
        for match in _COUNT.finditer(text):
            digits = match.group(1)
            count = int(digits) if len(digits) <= 10 else _PDF_MAX_COUNT + 1
            if count > _PDF_MAX_COUNT:
                shown = digits[:12].decode() + ("..." if len(digits) > 12 else "")
                raise Unreadable(f"the PDF declares an impossible page count ({shown})")
            self.max_count = max(self.max_count, count)

    def _charge(self, size: int) -> None:
        self.charged += size
        if self.charged > self.inflate_limit:
            raise Unreadable(f"the PDF's streams inflate past {_megabytes(self.inflate_limit)}")

    def inflate(self, stream: memoryview) -> bytes | None:
        """The stream's data inflated, or None if it is not zlib data or fails to inflate.

        A stream cut short (its data holding the bytes "endstream", or the file ending) yields
        what inflated before the cut: page objects in it still count.
        """
        if not _zlib_header(stream):
            return None
        inflater = zlib.decompressobj()
        pieces: list[bytes] = []
        at = 0
        pending = b""
        full = False  # the last call filled its output: more may be buffered inside zlib
        try:
            while not inflater.eof:
                if not pending and not full:
                    if at >= len(stream):
                        break
                    pending = bytes(stream[at : at + _INFLATE_IN])
                    at += _INFLATE_IN
                piece = inflater.decompress(pending, _INFLATE_OUT)
                self._charge(len(piece))
                pieces.append(piece)
                full = len(piece) == _INFLATE_OUT
                pending = inflater.unconsumed_tail
        except zlib.error:
            self._charge(_INFLATE_OUT)
            return None
        return b"".join(pieces)


#: Stream filters that could hide page objects from a reader that inflates only zlib (the
#: image-only filters, DCT, JPX, CCITT and JBIG2, hold pixels, not objects).
_HIDING_FILTERS = re.compile(
    rb"/(?:LZWDecode|ASCIIHexDecode|ASCII85Decode|RunLengthDecode|LZW|AHx|A85|RL)(?![A-Za-z0-9])"
)
_ESCAPED_NAME = re.compile(rb"/[A-Za-z0-9]*#[0-9A-Fa-f]{2}[#0-9A-Za-z]*")
_COUNTED_NAMES = {b"Type", b"Page", b"Pages", b"Count", b"ObjStm", b"Filter", b"FlateDecode"}


def _hidden_names(data: bytes) -> None:
    """Refuse a PDF that could hide its pages from this reader: a page-tree name written with
    ``#xx`` escapes (``/T#79pe``), or objects in streams encoded by a filter other than zlib."""
    if _HIDING_FILTERS.search(data) is not None:
        raise Unreadable("a stream of the PDF is encoded in a way the proxy does not read")
    for match in _ESCAPED_NAME.finditer(data):
        name = re.sub(rb"#([0-9A-Fa-f]{2})", lambda m: bytes([int(m.group(1), 16)]), match[0])
        if name[1:] in _COUNTED_NAMES:
            raise Unreadable("the PDF writes the names that count its pages in escapes")


def _read_pdf(data: bytes, inflate_limit: int) -> tuple[int, int]:
    """The PDF's page count and the total inflated size of its streams."""
    if data.find(b"%PDF-", 0, _PDF_JUNK_LIMIT + 5) < 0:
        raise Unreadable("the file is not a PDF (it does not start with '%PDF-')")
    if _ENCRYPT.search(data) is not None:
        # /Encrypt is an entry of the trailer (or of the cross-reference stream's dictionary,
        # which stands for it) and of nothing else, and both are written in the clear even in
        # an encrypted file; it is looked for in the whole file rather than in parsed trailers,
        # so that a file with a broken or hidden cross-reference section is still caught.
        raise Unreadable("the PDF is encrypted")
    _hidden_names(data)
    reading = _Reading(inflate_limit)
    reading.scan(data)
    view = memoryview(data)
    end = -1
    for match in _STREAM.finditer(data):
        start = match.end()
        if end < start:  # the ends only move forward: each byte is searched once
            end = data.find(_ENDSTREAM, start)
            if end < 0:
                end = len(data)
        inflated = reading.inflate(view[start:end])
        if inflated is not None:
            reading.inflated += len(inflated)
            reading.scan(inflated)
    pages = max(reading.page_objects, reading.max_count)
    if pages == 0:
        raise Unreadable("no page of the PDF could be found")
    return pages, reading.inflated


def pdf_pages(data: bytes, *, inflate_limit: int = _PDF_INFLATE_LIMIT) -> int:
    """The number of pages of the PDF, read from the file: an upper bound, never an undercount
    of what a reader would find.

    Providers bill a PDF by its pages, which its byte size does not bound: a few kilobytes can
    hold hundreds of pages. The file must start with ``%PDF-`` (after at most 1024 bytes of
    junk, as readers allow). The count is the larger of:

    - the page objects (``/Type /Page``, with white space or comments allowed in between, and
      not ``/Pages`` or any longer name) in the file and inside every stream that inflates with
      zlib: modern PDFs keep their page objects in compressed object streams;
    - the largest integer following ``/Count`` in the same places: a page tree's root declares
      the page count (outlines use ``/Count`` too, which can only overcount).

    Objects rewritten by incremental updates are counted each time they are written, which
    also only overcounts.

    Raises ``Unreadable`` if the file is not a PDF, is encrypted (its object streams cannot be
    read), holds no page, or its streams inflate past ``inflate_limit`` bytes in total (a
    deflate bomb: a small file inflating to gigabytes). A stream that fails to inflate is
    skipped.
    """
    pages, _ = _read_pdf(data, inflate_limit)
    return pages


def pdf_tokens(data: bytes) -> int:
    """An upper bound on the input tokens a provider bills for this PDF.

    ``pages * PDF_PAGE_TOKENS`` plus the total inflated size, in bytes, of its streams plus the
    raw size of the file: the text extracted from a page cannot be longer than the content that
    draws it, and a token is at least a byte of it. The per-page figure covers the page
    rendered as an image (about 1,600 tokens) and Anthropic's documented 1,500 to 3,000 text
    tokens a page.

    Raises ``Unreadable`` as ``pdf_pages`` does, with its default limit on inflating.
    """
    pages, inflated = _read_pdf(data, _PDF_INFLATE_LIMIT)
    return pages * PDF_PAGE_TOKENS + inflated + len(data)
