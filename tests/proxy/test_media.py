"""What inline images and PDFs are held at: real files built here byte by byte (no image or PDF
library is installed, and none is added), read for their declared pixels and pages. A header
cut anywhere, random bytes, an encrypted PDF or a deflate bomb is refused with ``Unreadable``
and never with another exception; a tiny file declaring a huge image or many pages is held at
what the provider bills for it, not at its byte size."""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from overnight.proxy.media import (
    IMAGE_TOKENS_FLOOR,
    PDF_PAGE_TOKENS,
    Unreadable,
    decode_base64,
    image_size,
    image_tokens,
    pdf_pages,
    pdf_tokens,
)

MIB = 1024 * 1024

# --------------------------------------------------------------------------------------------
# Image builders: complete, decodable files of a given size.


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png(width: int, height: int, *, bit_depth: int = 8) -> bytes:
    """A greyscale PNG, every pixel 0: signature, IHDR, IDAT, IEND."""
    row = b"\x00" + bytes(-(-width * bit_depth // 8))  # filter type 0, then the packed pixels
    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", ihdr)
        + _png_chunk(b"IDAT", zlib.compress(row * height, 9))
        + _png_chunk(b"IEND", b"")
    )


class _Bits:
    """Bits packed least significant first, as GIF's LZW codes and WebP's VP8L are."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.value = 0
        self.count = 0

    def put(self, value: int, width: int) -> None:
        self.value |= value << self.count
        self.count += width
        while self.count >= 8:
            self.out.append(self.value & 0xFF)
            self.value >>= 8
            self.count -= 8

    def bytes(self) -> bytes:
        return bytes(self.out) + (bytes([self.value]) if self.count else b"")


def gif(width: int, height: int) -> bytes:
    """A GIF89a of a 4-colour palette, every pixel colour 0. Its LZW data clears the code table
    every two pixels, so that every code stays 3 bits wide."""
    palette = b"\x00\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00\xff"
    screen = struct.pack("<HHBBB", width, height, 0x80 | 0x01, 0, 0)  # global table of 4
    descriptor = b"\x2c" + struct.pack("<HHHHB", 0, 0, width, height, 0)
    clear, end = 4, 5
    bits = _Bits()
    pixels = width * height
    for start in range(0, pixels, 2):
        bits.put(clear, 3)
        for _ in range(min(2, pixels - start)):
            bits.put(0, 3)
    bits.put(end, 3)
    lzw = bits.bytes()
    blocks = b"".join(
        bytes([len(lzw[i : i + 255])]) + lzw[i : i + 255] for i in range(0, len(lzw), 255)
    )
    return b"GIF89a" + screen + palette + descriptor + b"\x02" + blocks + b"\x00" + b"\x3b"


def _jpeg_segment(marker: int, body: bytes) -> bytes:
    return bytes([0xFF, marker]) + struct.pack(">H", len(body) + 2) + body


def jpeg(
    width: int, height: int, *, sof: int = 0xC0, before_frame: bytes = b"", fill: int = 0
) -> bytes:
    """A baseline greyscale JPEG, every pixel mid-grey: each 8x8 block is a DC difference of 0
    and an end-of-block, each coded by a one-symbol Huffman table as the single bit 0. The
    Huffman tables come before the frame header, as the standard allows. ``before_frame`` is put
    after the tables, and ``fill`` 0xFF fill bytes before the frame header's marker."""
    jfif = _jpeg_segment(0xE0, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00")
    dqt = _jpeg_segment(0xDB, b"\x00" + bytes([1]) * 64)
    one_code = bytes([1]) + bytes(15)
    dht = _jpeg_segment(0xC4, b"\x00" + one_code + b"\x00") + _jpeg_segment(
        0xC4, b"\x10" + one_code + b"\x00"
    )
    frame = _jpeg_segment(sof, struct.pack(">BHHB", 8, height, width, 1) + b"\x01\x11\x00")
    scan = _jpeg_segment(0xDA, b"\x01\x01\x00\x00\x3f\x00")
    blocks = -(-width // 8) * -(-height // 8)
    bits = 2 * blocks
    entropy = bytes(bits // 8) + (bytes([(1 << (8 - bits % 8)) - 1]) if bits % 8 else b"")
    return (
        b"\xff\xd8"
        + jfif
        + dqt
        + dht
        + before_frame
        + b"\xff" * fill
        + frame
        + scan
        + entropy
        + b"\xff\xd9"
    )


def _riff_webp(*chunks: tuple[bytes, bytes]) -> bytes:
    body = b"WEBP"
    for kind, payload in chunks:
        body += kind + struct.pack("<I", len(payload)) + payload + b"\x00" * (len(payload) % 2)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def vp8l(width: int, height: int) -> bytes:
    """A VP8L (lossless) bitstream, every pixel opaque black: no transform, no colour cache, no
    meta prefix codes, and five one-symbol prefix codes, so that each pixel takes no bits."""
    bits = _Bits()
    bits.put(0x2F, 8)
    bits.put(width - 1, 14)
    bits.put(height - 1, 14)
    bits.put(1, 1)  # alpha is used
    bits.put(0, 3)  # version 0
    bits.put(0, 1)  # no transform
    bits.put(0, 1)  # no colour cache
    bits.put(0, 1)  # no meta prefix codes
    for symbol in (0, 0, 0, 255, 0):  # green, red, blue, alpha, distance
        bits.put(1, 1)  # a simple code
        bits.put(0, 1)  # of one symbol
        bits.put(1, 1)  # of 8 bits
        bits.put(symbol, 8)
    return bits.bytes()


def webp_lossless(width: int, height: int) -> bytes:
    return _riff_webp((b"VP8L", vp8l(width, height)))


def webp_extended(width: int, height: int, *, frame: tuple[int, int] | None = None) -> bytes:
    """A VP8X canvas (alpha flag set) holding a VP8L image of the same size (or of ``frame``'s,
    as one frame of an animation may be)."""
    vp8x = bytes([0x10, 0, 0, 0]) + (width - 1).to_bytes(3, "little")
    vp8x += (height - 1).to_bytes(3, "little")
    inner = vp8l(*(frame or (width, height)))
    return _riff_webp((b"VP8X", vp8x), (b"VP8L", inner))


def webp_lossy(width: int, height: int) -> bytes:
    """A VP8 (lossy) key frame laid out per RFC 6386: frame tag, start code, dimensions, then a
    first partition and a token partition of zero bytes. A boolean decoder reads zero bytes as
    zero bits whatever the probability, so every header field is 0 (no segmentation, no coeff
    updates, no skip flag), every macroblock is B_PRED with B_DC_PRED subblocks and DC chroma,
    and every block's first token is end-of-block: a flat image."""
    first_partition = bytes(512)
    tokens = bytes(256)
    tag = (1 << 4) | (len(first_partition) << 5)  # key frame, version 0, shown
    frame = tag.to_bytes(3, "little") + b"\x9d\x01\x2a" + struct.pack("<HH", width, height)
    return _riff_webp((b"VP8 ", frame + first_partition + tokens))


# --------------------------------------------------------------------------------------------
# Images: sizes read from real files


@pytest.mark.parametrize(
    ("build", "width", "height"),
    [
        (png, 1, 1),
        (png, 37, 5),
        (gif, 1, 1),
        (gif, 13, 7),
        (jpeg, 8, 8),
        (jpeg, 33, 17),
        (webp_lossy, 20, 30),
        (webp_lossless, 1, 1),
        (webp_lossless, 300, 7),
        (webp_extended, 65, 9),
    ],
)
def test_a_real_image_gives_its_size(
    build: Callable[[int, int], bytes], width: int, height: int
) -> None:
    assert image_size(build(width, height)) == (width, height)


def test_the_largest_sizes_each_header_can_declare_are_read_whole() -> None:
    assert image_size(png(2**20, 1, bit_depth=1)) == (2**20, 1)
    assert image_size(gif(65535, 1)) == (65535, 1)
    assert image_size(jpeg(65535, 8)) == (65535, 8)
    assert image_size(webp_lossless(16384, 16384)) == (16384, 16384)
    assert image_size(webp_lossy(16383, 16383)) == (16383, 16383)
    assert image_size(webp_extended(2**24, 2**24, frame=(1, 1))) == (2**24, 2**24)


@pytest.mark.parametrize("sof", [m for m in range(0xC0, 0xD0) if m not in (0xC4, 0xC8, 0xCC)])
def test_every_jpeg_frame_header_is_read(sof: int) -> None:
    assert image_size(jpeg(40, 24, sof=sof)) == (40, 24)


@pytest.mark.parametrize("marker", [0xC4, 0xC8, 0xCC])
def test_jpeg_markers_inside_the_frame_range_that_are_not_frames_are_skipped(marker: int) -> None:
    # DHT, JPG and DAC segments shaped exactly like a frame header declaring 9999x9999.
    decoy = _jpeg_segment(marker, struct.pack(">BHHB", 8, 9999, 9999, 1) + b"\x01\x11\x00")
    assert image_size(jpeg(40, 24, before_frame=decoy)) == (40, 24)


def test_a_jpeg_thumbnail_inside_exif_is_skipped_with_its_segment() -> None:
    thumbnail = jpeg(160, 120)
    exif = _jpeg_segment(0xE1, b"Exif\x00\x00" + thumbnail)
    assert image_size(jpeg(4000, 3000, before_frame=exif)) == (4000, 3000)


def test_jpeg_fill_bytes_before_a_marker_are_skipped() -> None:
    assert image_size(jpeg(64, 48, fill=5)) == (64, 48)


def test_a_jpeg_whose_scan_comes_before_its_frame_is_unreadable() -> None:
    data = b"\xff\xd8" + _jpeg_segment(0xDA, b"\x01\x01\x00\x00\x3f\x00") + bytes(16)
    with pytest.raises(Unreadable, match="scan starts before its frame header"):
        image_size(data)


def test_a_jpeg_segment_that_overruns_its_length_is_unreadable() -> None:
    data = jpeg(8, 8)
    broken = data[:2] + data[2:4] + b"\x00\x20" + data[6:]  # APP0 claims 32 bytes, not 16
    with pytest.raises(Unreadable, match="JPEG"):
        image_size(broken)


@pytest.mark.parametrize(
    "data",
    [
        png(0, 5),
        png(5, 0),
        gif(0, 3),
        jpeg(8, 8).replace(struct.pack(">BHHB", 8, 8, 8, 1), struct.pack(">BHHB", 8, 0, 8, 1)),
        webp_lossy(0, 16),
    ],
    ids=["png-width", "png-height", "gif", "jpeg-dnl-height", "webp-vp8"],
)
def test_a_width_or_height_of_zero_is_unreadable(data: bytes) -> None:
    with pytest.raises(Unreadable, match="size of"):
        image_size(data)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"BM" + bytes(60),  # BMP
        b"II*\x00" + bytes(60),  # TIFF
        b"\x00\x00\x00\x18ftypheic" + bytes(60),  # HEIC
        b"<svg xmlns='http://www.w3.org/2000/svg' width='9000' height='9000'/>",
        b"RIFF\x10\x00\x00\x00WAVEfmt " + bytes(20),  # a RIFF file that is not WebP
        b"RIFF\x10\x00\x00\x00WEBPALPH" + bytes(20),  # a WebP whose first chunk is unknown
        b"\x89PNG\r\n\x1a\n" + _png_chunk(b"CgBI", bytes(4)) + bytes(30),  # IHDR not first
    ],
)
def test_anything_else_is_unreadable(data: bytes) -> None:
    with pytest.raises(Unreadable):
        image_size(data)


def _jpeg_header_length(data: bytes) -> int:
    at = data.index(b"\xff\xc0")
    return at + 2 + int.from_bytes(data[at + 2 : at + 4], "big")


HEADERS = {
    "png": (png(640, 480), 29),
    "gif": (gif(64, 48), 13),
    "jpeg": (jpeg(64, 48, before_frame=_jpeg_segment(0xFE, b"a comment"), fill=2), None),
    "webp-vp8": (webp_lossy(640, 480), 30),
    "webp-vp8l": (webp_lossless(640, 480), 25),
    "webp-vp8x": (webp_extended(640, 480), 30),
}


@pytest.mark.parametrize("kind", list(HEADERS))
def test_a_header_cut_at_any_byte_is_unreadable(kind: str) -> None:
    data, length = HEADERS[kind]
    length = length if length is not None else _jpeg_header_length(data)
    expected = image_size(data)
    assert image_size(data[:length]) == expected  # the header alone is enough...
    for cut in range(length):  # ...and nothing shorter is
        with pytest.raises(Unreadable):
            image_size(data[:cut])


def _size_or_unreadable(data: bytes) -> None:
    try:
        width, height = image_size(data)
    except Unreadable:
        return
    assert width > 0
    assert height > 0
    assert image_tokens(data) >= IMAGE_TOKENS_FLOOR


@given(st.binary(max_size=96))
def test_random_bytes_give_a_positive_size_or_unreadable(data: bytes) -> None:
    _size_or_unreadable(data)


SIGNATURES = [
    b"\x89PNG\r\n\x1a\n",
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR",
    b"GIF87a",
    b"GIF89a",
    b"\xff\xd8",
    b"\xff\xd8\xff",
    b"\xff\xd8\xff\xe0\x00\x10JFIF\x00",
    b"RIFF\x00\x10\x00\x00WEBPVP8 ",
    b"RIFF\x00\x10\x00\x00WEBPVP8L",
    b"RIFF\x00\x10\x00\x00WEBPVP8X",
]


@given(st.sampled_from(SIGNATURES), st.binary(max_size=96))
def test_random_bytes_after_a_signature_give_a_positive_size_or_unreadable(
    signature: bytes, rest: bytes
) -> None:
    _size_or_unreadable(signature + rest)


@given(st.sampled_from([png(300, 200), jpeg(300, 200), webp_lossy(300, 200)]), st.data())
def test_a_real_header_with_random_bytes_written_over_it_is_never_an_error(
    data: bytes, draw: st.DataObject
) -> None:
    at = draw.draw(st.integers(0, 40))
    noise = draw.draw(st.binary(min_size=1, max_size=8))
    _size_or_unreadable(data[:at] + noise + data[at + len(noise) :])


# --------------------------------------------------------------------------------------------
# Image tokens


def test_a_tiny_png_declaring_8000_by_8000_is_held_at_its_pixels_not_its_bytes() -> None:
    data = png(8000, 8000, bit_depth=1)  # a complete, decodable image of 64 megapixels
    assert len(data) < 20_000
    tokens = image_tokens(data)
    assert tokens >= 8000 * 8000 / 750  # Anthropic's rule on the original size
    assert tokens == 8000 * 8000 // 500
    assert tokens > 10 * len(data)


def test_image_tokens_are_the_pixels_over_500_rounded_up() -> None:
    assert image_tokens(jpeg(2000, 1500)) == 6000
    assert image_tokens(png(2001, 1000)) == 4002  # 2,001,000 / 500: exact
    assert image_tokens(png(2001, 1001)) == 4007  # 2,003,001 / 500 = 4006.002: rounded up
    assert image_tokens(webp_lossless(3001, 3001)) == 18013  # 9,006,001 / 500 = 18012.002


def test_a_small_image_is_held_at_the_floor() -> None:
    assert image_tokens(png(1, 1)) == IMAGE_TOKENS_FLOOR
    assert image_tokens(png(1000, 1000)) == IMAGE_TOKENS_FLOOR  # 2,000 by pixels
    assert IMAGE_TOKENS_FLOOR == 4_000


def test_image_tokens_of_an_unreadable_image_are_unreadable() -> None:
    with pytest.raises(Unreadable):
        image_tokens(png(640, 480)[:20])


# --------------------------------------------------------------------------------------------
# PDF builders


def _classic_pdf(*objects: bytes, trailer: bytes = b"", junk: bytes = b"") -> bytes:
    """A PDF 1.4 file: numbered objects, a cross-reference table and a trailer."""
    out = bytearray(junk + b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R %s>>\n" % (len(objects) + 1, trailer)
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


def _stream(dictionary: bytes, data: bytes) -> bytes:
    return b"<< %s /Length %d >>\nstream\n%s\nendstream" % (dictionary, len(data), data)


CONTENT = b"BT /F1 24 Tf 72 700 Td (Hello) Tj ET"


def _plain_pages(pages: int, *, count: int | None = None) -> bytes:
    """A classic PDF of ``pages`` page objects, written uncompressed; its page tree's /Count is
    ``count`` (the true count unless a test says otherwise)."""
    kids = b" ".join(b"%d 0 R" % (3 + i) for i in range(pages))
    declared = pages if count is None else count
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, declared),
    ]
    contents = 3 + pages
    objects += [
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R >>" % contents
    ] * pages
    objects.append(_stream(b"", CONTENT))
    return _classic_pdf(*objects)


@dataclass(frozen=True)
class Modern:
    data: bytes
    inflated: int
    """The total size of its streams' data, inflated."""


def _modern_pdf(
    pages: int, *, count: int | None = None, xref_extra: bytes = b"", text: bytes = CONTENT
) -> Modern:
    """A PDF 1.5 file as current writers produce it: the catalog, the page tree and every page
    object in a compressed object stream, a compressed content stream, and a compressed
    cross-reference stream in place of the table and trailer."""
    declared = pages if count is None else count
    contents, objstm, xref = pages + 3, pages + 4, pages + 5
    kids = b" ".join(b"%d 0 R" % (3 + i) for i in range(pages))
    inner = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, declared),
    ]
    inner += [
        b"<</Type/Page/Parent 2 0 R/MediaBox[0 0 612 792]/Contents %d 0 R>>" % contents
    ] * pages
    offsets, body = [], b""
    for item in inner:
        offsets.append(len(body))
        body += item + b"\n"
    header = b" ".join(b"%d %d" % (1 + i, offset) for i, offset in enumerate(offsets)) + b"\n"
    objstm_data = header + body

    out = bytearray(b"%PDF-1.5\n%\xe2\xe3\xcf\xd3\n")
    at = {}
    at[contents] = len(out)
    out += b"%d 0 obj\n%s\nendobj\n" % (
        contents,
        _stream(b"/Filter /FlateDecode", zlib.compress(text)),
    )
    at[objstm] = len(out)
    dictionary = b"/Type /ObjStm /N %d /First %d /Filter /FlateDecode" % (len(inner), len(header))
    out += b"%d 0 obj\n%s\nendobj\n" % (objstm, _stream(dictionary, zlib.compress(objstm_data)))
    at[xref] = len(out)
    rows = [struct.pack(">BIH", 0, 0, 65535)]
    rows += [struct.pack(">BIH", 2, objstm, i) for i in range(len(inner))]
    rows += [struct.pack(">BIH", 1, at[n], 0) for n in (contents, objstm, xref)]
    xref_data = b"".join(rows)
    dictionary = b"/Type /XRef /Size %d /W [1 4 2] /Root 1 0 R %s/Filter /FlateDecode" % (
        xref + 1,
        xref_extra,
    )
    out += b"%d 0 obj\n%s\nendobj\n" % (xref, _stream(dictionary, zlib.compress(xref_data)))
    out += b"startxref\n%d\n%%%%EOF\n" % at[xref]
    return Modern(bytes(out), len(text) + len(objstm_data) + len(xref_data))


# --------------------------------------------------------------------------------------------
# PDF pages


def test_a_pdf_of_three_plain_page_objects_has_three_pages() -> None:
    assert pdf_pages(_plain_pages(3)) == 3


def test_page_objects_are_counted_when_the_page_tree_understates_them() -> None:
    assert pdf_pages(_plain_pages(3, count=1)) == 3


def test_pages_in_a_compressed_object_stream_are_counted() -> None:
    pdf = _modern_pdf(7, count=0)  # the page tree's /Count, also compressed, says nothing
    assert b"/Type /Page" not in pdf.data and b"/Type/Page" not in pdf.data
    assert pdf_pages(pdf.data) == 7


def test_the_page_trees_count_is_read_inside_a_compressed_object_stream() -> None:
    assert pdf_pages(_modern_pdf(2, count=12).data) == 12


def test_the_largest_count_bounds_pages_that_cannot_be_read() -> None:
    # One page object in the clear, the other six in a stream that does not inflate.
    hidden = _stream(b"/Type /ObjStm /N 6 /First 0 /Filter /FlateDecode", b"\x80\x0b\x60\x50")
    pdf = _classic_pdf(
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 7 >>",
        b"<< /Type /Page /Parent 2 0 R >>",
        hidden,
    )
    assert pdf_pages(pdf) == 7


@pytest.mark.parametrize(
    "hiding",
    [
        _stream(b"/Type /ObjStm /N 6 /First 0 /Filter /LZWDecode", b"\x80\x0b\x60\x50"),
        _stream(b"/Type /ObjStm /N 6 /First 0 /Filter [/AHx /FlateDecode]", b"78da"),
        b"<< /T#79pe /Page /Parent 2 0 R >>",
        b"<< /Type /P#61ge /Parent 2 0 R >>",
    ],
)
def test_a_pdf_that_could_hide_its_pages_from_the_count_is_refused(hiding: bytes) -> None:
    pdf = _classic_pdf(
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R >>",
        hiding,
    )
    with pytest.raises(Unreadable):
        pdf_pages(pdf)


def test_an_escaped_name_that_counts_nothing_is_read() -> None:
    pdf = _classic_pdf(
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /BaseFont /Arial#20Bold >>",
    )
    assert pdf_pages(pdf) == 1


def test_the_pages_node_alone_is_not_a_page() -> None:
    pdf = _classic_pdf(
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R 5 0 R] >>",  # no /Count: only the objects say
        b"<< /Type /Pages /Kids [] >>",
        b"<< /Type /Page /Parent 2 0 R >>",
        b"<< /Type /Page /Parent 2 0 R >>",
    )
    assert pdf_pages(pdf) == 2


def test_a_pdf_without_pages_is_unreadable() -> None:
    pdf = _classic_pdf(
        b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [] /Count 0 >>"
    )
    with pytest.raises(Unreadable, match="no page of the PDF could be found"):
        pdf_pages(pdf)


@pytest.mark.parametrize(
    ("entry", "pages"),
    [
        (b"<</Type/Page>>", 1),
        (b"<< /Type /Page /Parent 2 0 R >>", 1),
        (b"<< /Type\r\n/Page\r\n>>", 1),
        (b"<< /Type % the type\n%% another comment\r/Page >>", 1),
        (b"<< /Type /Page[", 1),
        (b"<< /Type /Page(", 1),
        (b"<< /Type /Page%", 1),
        (b"<< /Type /Page", 1),  # the file ends with the name
        (b"<< /Type /Pages >>", 0),
        (b"<< /Type /PageLabel >>", 0),
        (b"<< /Typed /Page >>", 0),
        (b"<< /Type (/Page) >>", 0),
        (b"<< /Count 4 >>", 4),
        (b"<< /Count\n% four\n+4 >>", 4),
        (b"<< /Count4 >>", 0),
        (b"<< /Counts 4 >>", 0),
        (b"<< /Count -4 >>", 0),
    ],
)
def test_only_a_type_page_entry_or_a_count_counts(entry: bytes, pages: int) -> None:
    data = b"%PDF-1.7\n1 0 obj\n" + entry
    if pages:
        assert pdf_pages(data) == pages
    else:
        with pytest.raises(Unreadable, match="no page"):
            pdf_pages(data)


def test_a_line_of_percent_signs_does_not_make_the_count_backtrack() -> None:
    data = b"%PDF-1.7\n/Type " + b"%" * 200_000 + b"\n/Pages /Count " + b"%" * 200_000
    with pytest.raises(Unreadable, match="no page"):
        pdf_pages(data)


def test_an_impossible_page_count_is_unreadable() -> None:
    with pytest.raises(Unreadable, match="impossible page count"):
        pdf_pages(_plain_pages(1, count=10**40))


def test_up_to_1024_bytes_of_junk_may_come_before_the_header() -> None:
    objects = (b"<< /Type /Pages /Count 2 >>",)
    assert pdf_pages(_classic_pdf(*objects, junk=b"\x00" * 1024)) == 2
    with pytest.raises(Unreadable, match="not a PDF"):
        pdf_pages(_classic_pdf(*objects, junk=b"\x00" * 1025))


@pytest.mark.parametrize("data", [b"", b"%PDF", b"%!PS-Adobe-3.0\n/Type /Page", png(10, 10)])
def test_what_is_not_a_pdf_is_unreadable(data: bytes) -> None:
    with pytest.raises(Unreadable, match="not a PDF"):
        pdf_pages(data)


def test_an_encrypted_pdf_is_unreadable() -> None:
    encrypt = b"<< /Filter /Standard /V 2 /R 3 /Length 128 /P -3904 /O <00> /U <00> >>"
    pdf = _classic_pdf(
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R >>",
        encrypt,
        trailer=b"/Encrypt 4 0 R /ID [<0123456789abcdef> <0123456789abcdef>] ",
    )
    with pytest.raises(Unreadable, match="the PDF is encrypted"):
        pdf_pages(pdf)


def test_an_encrypted_pdf_with_a_cross_reference_stream_is_unreadable() -> None:
    pdf = _modern_pdf(3, xref_extra=b"/Encrypt 12 0 R /ID[<ab><ab>]")
    with pytest.raises(Unreadable, match="the PDF is encrypted"):
        pdf_pages(pdf.data)
    direct = _modern_pdf(3, xref_extra=b"/Encrypt<</Filter/Standard/V 4/R 4>>")
    with pytest.raises(Unreadable, match="the PDF is encrypted"):
        pdf_tokens(direct.data)


def test_a_pdf_that_only_mentions_encryption_is_read() -> None:
    pdf = _classic_pdf(
        b"<< /Type /Catalog /Pages 2 0 R /Metadata 4 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R >>",
        b"<< /Title (How /Encrypt works) /Subject (Encrypt 4 0 R) /Encrypted true >>",
    )
    assert pdf_pages(pdf) == 1


def test_a_stream_that_fails_to_inflate_is_skipped() -> None:
    corrupt = _stream(b"/Filter /FlateDecode", b"\x78\x9c" + b"\xff" * 64)
    jpeg_image = _stream(b"/Subtype /Image /Filter /DCTDecode", jpeg(16, 16))
    pages = zlib.compress(b"<</Type/Page>> <</Type/Page>>")
    pdf = _classic_pdf(
        corrupt, jpeg_image, _stream(b"/Type /ObjStm /Filter /FlateDecode", pages), corrupt
    )
    assert pdf_pages(pdf) == 2


def test_a_stream_cut_short_still_counts_what_inflated() -> None:
    compressed = zlib.compress(b"<</Type/Page>>\n" * 5)[:-4]  # its checksum cut off
    data = b"%PDF-1.7\n1 0 obj\n<< /Type /ObjStm /N 5 >>\nstream\r\n" + compressed
    assert pdf_pages(data) == 5


def test_a_deflate_bomb_past_the_limit_is_unreadable() -> None:
    bomb = zlib.compress(b"\x00" * (2 * MIB), 9)
    pdf = _classic_pdf(b"<< /Type /Page >>", _stream(b"/Filter /FlateDecode", bomb))
    assert len(pdf) < 4 * 1024
    assert pdf_pages(pdf, inflate_limit=2 * MIB) == 1  # the limit itself is allowed
    with pytest.raises(Unreadable, match="the PDF's streams inflate past 1 MB"):
        pdf_pages(pdf, inflate_limit=MIB)


def test_the_inflate_limit_is_on_all_streams_together() -> None:
    half = _stream(b"/Filter /FlateDecode", zlib.compress(b"\x00" * (MIB // 2 + 1)))
    one = _classic_pdf(b"<< /Type /Page >>", half)
    two = _classic_pdf(b"<< /Type /Page >>", half, half)
    assert pdf_pages(one, inflate_limit=MIB) == 1
    with pytest.raises(Unreadable, match="inflate past"):
        pdf_pages(two, inflate_limit=MIB)


def test_the_default_inflate_limit_stops_a_bomb_of_a_few_kilobytes() -> None:
    bomb = zlib.compress(b"\x00" * (65 * MIB), 9)
    pdf = _classic_pdf(b"<< /Type /Page >>", _stream(b"/Filter /FlateDecode", bomb))
    assert len(pdf) < 100 * 1024
    with pytest.raises(Unreadable, match="inflate past 64 MB"):
        pdf_pages(pdf)
    with pytest.raises(Unreadable, match="inflate past 64 MB"):
        pdf_tokens(pdf)


def test_streams_that_fail_are_charged_so_they_cannot_make_the_work_unbounded() -> None:
    # Each stream inflates 10,000 bytes, then fails on a block of the reserved type (3), all
    # within one call to zlib: what that call inflated is never seen, so each failure is charged.
    squeezer = zlib.compressobj(9)
    failing = squeezer.compress(b"\x00" * 10_000) + squeezer.flush(zlib.Z_FULL_FLUSH) + b"\x07"
    with pytest.raises(zlib.error, match="invalid block type"):
        zlib.decompressobj().decompress(failing)
    streams = [_stream(b"/Filter /FlateDecode", failing)] * 80
    pdf = _classic_pdf(b"<< /Type /Page >>", *streams)
    assert len(pdf) < 16 * 1024
    assert pdf_pages(pdf, inflate_limit=80 * 20_000) == 1
    with pytest.raises(Unreadable, match="inflate past"):
        pdf_pages(pdf, inflate_limit=MIB)


@given(st.binary(max_size=300))
def test_random_bytes_after_a_pdf_header_give_pages_or_unreadable(rest: bytes) -> None:
    try:
        pages = pdf_pages(b"%PDF-1.7\n" + rest)
    except Unreadable:
        return
    assert pages > 0


@given(st.data())
def test_a_real_pdf_with_bytes_written_over_it_gives_pages_or_unreadable(
    draw: st.DataObject,
) -> None:
    data = _modern_pdf(4).data
    at = draw.draw(st.integers(0, len(data) - 1))
    noise = draw.draw(st.binary(min_size=1, max_size=16))
    try:
        pages = pdf_pages(data[:at] + noise + data[at + len(noise) :])
    except Unreadable:
        return
    assert pages > 0


# --------------------------------------------------------------------------------------------
# PDF tokens


def test_pdf_tokens_are_pages_times_the_page_rate_plus_the_inflated_and_raw_sizes() -> None:
    pdf = _modern_pdf(5)
    assert pdf_tokens(pdf.data) == 5 * PDF_PAGE_TOKENS + pdf.inflated + len(pdf.data)
    plain = _plain_pages(3)
    assert pdf_tokens(plain) == 3 * PDF_PAGE_TOKENS + len(plain)  # no stream inflates
    assert PDF_PAGE_TOKENS == 5_000


def test_pdf_tokens_grow_with_pages() -> None:
    tokens = [pdf_tokens(_modern_pdf(pages).data) for pages in (1, 2, 10, 40)]
    assert tokens == sorted(tokens)
    assert tokens[1] - tokens[0] >= PDF_PAGE_TOKENS


def test_a_dense_40_page_pdf_of_a_few_kilobytes_is_held_at_its_pages() -> None:
    pdf = _modern_pdf(40)
    assert len(pdf.data) < 4 * 1024
    tokens = pdf_tokens(pdf.data)
    assert tokens >= 40 * PDF_PAGE_TOKENS
    assert tokens > 50 * len(pdf.data)


def test_pdf_tokens_hold_the_text_a_page_can_draw() -> None:
    text = b"BT /F1 6 Tf 0 0 Td (" + b"word " * 20_000 + b") Tj ET"
    pdf = _modern_pdf(1, text=text)
    assert len(pdf.data) < 4 * 1024
    assert pdf_tokens(pdf.data) >= PDF_PAGE_TOKENS + len(text)


# --------------------------------------------------------------------------------------------
# base64


def test_base64_is_decoded() -> None:
    assert decode_base64("aGVsbG8=", limit=5) == b"hello"
    assert decode_base64("aGVs\r\nbG8=\n", limit=5) == b"hello"  # line breaks, as MIME writes
    assert decode_base64("  aGVs bG8 = ", limit=5) == b"hello"
    assert decode_base64("aGVsbG8", limit=5) == b"hello"  # padding left off
    assert decode_base64("", limit=0) == b""


def test_url_safe_base64_is_decoded() -> None:
    data = b"\xfb\xff\xbf" * 3
    assert base64.urlsafe_b64encode(data) != base64.b64encode(data)
    assert decode_base64(base64.urlsafe_b64encode(data).decode(), limit=9) == data


@pytest.mark.parametrize(
    "text",
    [
        "aGVsbG8*",  # outside the alphabet
        "aGVs.bG8=",
        "aGVsbG8=!",
        "aGVsbG8é",  # not ASCII
        "aGVsbG8\u00a0",  # a non-ASCII space
        "aG=Vs",  # padding inside
        "aGVsbG8==",  # too much padding
        "aGVsbA===",
        "aGVsb",  # a length no base64 has
        "aGVsbG8=aGVs",
        "=",
        "====",
    ],
)
def test_what_is_not_base64_is_unreadable(text: str) -> None:
    with pytest.raises(Unreadable, match="not valid base64"):
        decode_base64(text, limit=1_000)


def test_base64_over_the_limit_is_unreadable() -> None:
    text = base64.b64encode(bytes(1000)).decode()
    assert len(decode_base64(text, limit=1000)) == 1000
    with pytest.raises(Unreadable, match="1,000 bytes, over the limit of 999 bytes"):
        decode_base64(text, limit=999)
    with pytest.raises(Unreadable, match="over the limit"):
        decode_base64("aGVsbG8", limit=4)


@given(st.binary(max_size=200), st.booleans(), st.booleans())
def test_any_encoding_of_bytes_decodes_to_them(data: bytes, urlsafe: bool, wrap: bool) -> None:
    text = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(data).decode()
    if wrap:
        text = "\n".join(text[i : i + 76] for i in range(0, len(text), 76))
    assert decode_base64(text, limit=len(data)) == data
    if data:
        with pytest.raises(Unreadable, match="over the limit"):
            decode_base64(text, limit=len(data) - 1)


@given(st.text(max_size=64))
def test_any_text_decodes_within_the_limit_or_is_unreadable(text: str) -> None:
    try:
        data = decode_base64(text, limit=20)
    except Unreadable:
        return
    assert len(data) <= 20
