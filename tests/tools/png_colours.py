#!/usr/bin/env python3
"""Counts the pixels of given colours in a PNG (8-bit RGB or RGBA, not interlaced).

    png_colours.py shot.png 4e79a7 f28e2b ...   # prints "4e79a7 1234" per colour

Only the standard library: the test machines have python3 but no imaging package.
Exit 2 with one message for a file it cannot read.
"""
import struct
import sys
import zlib


def pixels(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        raise ValueError(f"{path}: only 8-bit RGB/RGBA without interlace is read "
                         f"(depth {depth}, colour type {colour}, interlace {interlace})")
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        # The five PNG filters: each byte is stored relative to its neighbours.
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return rows, bpp


def main():
    if len(sys.argv) < 2:
        print("usage: png_colours.py FILE.png RRGGBB...", file=sys.stderr)
        return 2
    try:
        rows, bpp = pixels(sys.argv[1])
    except (OSError, ValueError, struct.error, zlib.error, TypeError) as e:
        print(f"png_colours: {e}", file=sys.stderr)
        return 2
    counts = {c.lower(): 0 for c in sys.argv[2:]}
    wanted = {bytes.fromhex(c): c for c in counts}
    for row in rows:
        for x in range(0, len(row), bpp):
            name = wanted.get(row[x:x + 3])
            if name is not None:
                counts[name] += 1
    for c, n in counts.items():
        print(c, n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
