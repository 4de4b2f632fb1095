#!/usr/bin/python3
"""Checks screenshots are charts with data, not blank or empty frames: prints,
per picture, the share of coloured pixels (max - min channel > 24: the
palette's bars, lines and shaded windows; axes, text and grid are grey) and of
non-white ones. Exit 1 when a picture has under MIN_COLOURED of coloured
pixels or under MIN_INK of non-white ones. Decodes with Pillow (Debian's
python3-pil), hence Debian's Python in the first line.

usage: png_check.py MIN_COLOURED MIN_INK FILE.png...
       png_check.py MIN_COLOURED MIN_INK --bands HEIGHT FILE.png NAME...
The second form checks a screenshot of figures stacked one per HEIGHT-pixel
band (one browser start for all of them), band i under the name NAME_i.
"""
import sys

from PIL import Image, ImageChops


def shares(image):
    """(coloured, non-white) shares of `image`'s pixels."""
    rgb = image.convert("RGB")
    seen = rgb.width * rgb.height
    # Per-pixel spread max - min, and "not pure white", counted by histogram.
    r, g, b = rgb.split()
    spread = ImageChops.subtract(ImageChops.lighter(ImageChops.lighter(r, g), b),
                                 ImageChops.darker(ImageChops.darker(r, g), b))
    coloured = sum(spread.histogram()[25:])
    darkest = ImageChops.darker(ImageChops.darker(r, g), b)
    ink = seen - darkest.histogram()[255]
    return coloured / seen, ink / seen


def check(label, image, min_coloured, min_ink):
    coloured, ink = shares(image)
    ok = coloured >= min_coloured and ink >= min_ink
    print(f"{'ok ' if ok else 'BAD'} {label}: {image.width}x{image.height}, {coloured:.1%} coloured, "
          f"{ink:.1%} non-white")
    return ok


def main():
    min_coloured, min_ink = float(sys.argv[1]), float(sys.argv[2])
    bad = 0
    if sys.argv[3] == "--bands":
        height, path, names = int(sys.argv[4]), sys.argv[5], sys.argv[6:]
        with Image.open(path) as shot:
            if shot.height < height * len(names):
                sys.exit(f"{path}: {shot.height} px tall, {len(names)} bands of {height} px need more")
            for i, name in enumerate(names):
                band = shot.crop((0, i * height, shot.width, (i + 1) * height))
                bad += not check(name, band, min_coloured, min_ink)
    else:
        for path in sys.argv[3:]:
            with Image.open(path) as image:
                bad += not check(path, image, min_coloured, min_ink)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
