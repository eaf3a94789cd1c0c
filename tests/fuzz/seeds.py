"""Seeds for the fuzz targets whose files the repository has none of: small valid inputs in the
layout each target of dl_fuzz.cpp expects, so the fuzzer starts inside each format instead of
searching for its header.

  image/  every kind dltrain decodes (PNG grey, RGB, RGBA, palette, 16-bit; JPEG baseline and
          progressive, grey and colour; binary PGM and PPM), after the target's channel byte
  idx/    an IDX image file and its label file, after the byte that says where they split
  cifar/  two CIFAR-10 records

    python3 tests/fuzz/seeds.py DIR
"""
import io
import struct
import sys
from pathlib import Path

from PIL import Image


def images() -> dict:
    rgb = Image.new("RGB", (5, 3))
    rgb.putdata([(i * 40 % 256, i * 90 % 256, i * 7 % 256) for i in range(15)])
    grey = rgb.convert("L")
    kinds = {
        "rgb.png": (rgb, "PNG", {}),
        "grey.png": (grey, "PNG", {}),
        "rgba.png": (rgb.convert("RGBA"), "PNG", {}),
        "palette.png": (rgb.convert("P"), "PNG", {}),
        "grey16.png": (grey.convert("I;16"), "PNG", {}),
        "rgb.jpg": (rgb, "JPEG", {"quality": 90}),
        "grey.jpg": (grey, "JPEG", {"quality": 90}),
        "progressive.jpg": (rgb, "JPEG", {"quality": 90, "progressive": True}),
        "grey.pgm": (grey, "PPM", {}),
        "rgb.ppm": (rgb, "PPM", {}),
    }
    encoded = {}
    for name, (image, form, options) in kinds.items():
        buffer = io.BytesIO()
        image.save(buffer, form, **options)
        encoded[name] = buffer.getvalue()
    return encoded


def main(out: Path) -> None:
    for name, data in images().items():
        for channels in (0, 1, 2):  # the target's own, grey, colour
            path = out / "image" / f"{channels}-{name}"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(bytes([channels]) + data)

    count, rows, cols = 3, 4, 5
    images_file = struct.pack(">IIII", 0x803, count, rows, cols) + bytes(range(count * rows * cols))
    labels_file = struct.pack(">II", 0x801, count) + bytes([0, 1, 2])
    split = round(255 * len(images_file) / (len(images_file) + len(labels_file)))
    # The target splits at len * split / 255 (rounded down): pad the labels so that it lands
    # exactly after the images.
    while (len(images_file) + len(labels_file)) * split // 255 != len(images_file):
        labels_file += b"\0"
    (out / "idx").mkdir(parents=True, exist_ok=True)
    (out / "idx" / "valid").write_bytes(bytes([split]) + images_file + labels_file)

    (out / "cifar").mkdir(parents=True, exist_ok=True)
    record = lambda label: bytes([label]) + bytes(i % 256 for i in range(3 * 32 * 32))
    (out / "cifar" / "two-records").write_bytes(record(3) + record(9))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
