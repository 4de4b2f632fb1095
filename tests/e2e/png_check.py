#!/usr/bin/env python3
"""Checks screenshots are charts with data, not blank or empty frames:
decodes each PNG (8-bit RGB/RGBA, not interlaced, as Chromium writes them)
with the standard library and prints, per file, the share of coloured pixels
(max - min channel > 24: the palette's bars, lines and shaded windows; axes,
text and grid are grey) and of non-white ones. Exit 1 when a file has under
MIN_COLOURED of coloured pixels or under MIN_INK of non-white ones.

usage: png_check.py MIN_COLOURED MIN_INK FILE.png...
"""
import struct
import sys
import zlib


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, width = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or colour not in (2, 6) or interlace:
                raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour}, interlace {interlace}")
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def main():
    min_coloured, min_ink = float(sys.argv[1]), float(sys.argv[2])
    bad = 0
    for path in sys.argv[3:]:
        width, height, bpp, rows = decode(path)
        ink = coloured = seen = 0
        for row in rows:
            for x in range(0, len(row), bpp * 2):  # every other pixel: enough, and twice as fast
                r, g, b = row[x], row[x + 1], row[x + 2]
                seen += 1
                ink += (r, g, b) != (255, 255, 255)
                coloured += max(r, g, b) - min(r, g, b) > 24
        ok = coloured / seen >= min_coloured and ink / seen >= min_ink
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {path}: {width}x{height}, {coloured / seen:.1%} coloured, "
              f"{ink / seen:.1%} non-white")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
