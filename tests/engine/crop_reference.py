#!/usr/bin/python3
"""NumPy reference of a dltrain Data layer's batches with Caffe's transforms (scale, mean, crop_size,
mirror), written from Caffe's DataTransformer::Transform and docs/engine.md, not from the C++
(engine/src/data/batch_reader.cpp). tests/engine/data/test_crop_mirror.cpp holds the reader to it.

    crop_reference.py PIXELS N C H W CROP MIRROR PHASE SEED SHUFFLE CURSOR COUNT SCALE MEAN OUT

PIXELS: N images of C x H x W bytes, in file order. CROP 0: whole images. MIRROR 0/1. PHASE
train/test. SHUFFLE 0/1 (the order of solver.random_seed SEED, as sample_order.py draws it).
Positions CURSOR .. CURSOR + COUNT - 1 of the stream. MEAN: a file of float32 means (one per
channel, or a C x H x W image), or '-' for none. OUT: COUNT output images as float32.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "lenet_cpu"))
from sample_order import shuffled_epoch  # noqa: E402

MASK = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


class SplitMix64:
    def __init__(self, state):
        self.state = state & MASK

    def next(self):
        self.state = (self.state + GAMMA) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def below(self, bound):
        threshold = ((1 << 64) - bound) % bound
        while True:
            draw = self.next()
            if draw >= threshold:
                return draw % bound


def draws(seed, train, position, mirror, crop, height, width):
    """(row, column, flip) of the image at `position` (docs/engine.md, crop_size and mirror)."""
    row, column, flip = 0, 0, False
    if crop and not train:
        row, column = (height - crop) // 2, (width - crop) // 2
    if not mirror and (not crop or not train):
        return row, column, flip
    key = SplitMix64(2 * seed + (0 if train else 1)).next()
    rng = SplitMix64(SplitMix64(key + position).next())
    if mirror:
        flip = rng.below(2) == 1
    if crop and train:
        row = rng.below(height - crop + 1)
        column = rng.below(width - crop + 1)
    return row, column, flip


def main():
    args = sys.argv[1:]
    pixels_file, out_file = args[0], args[14]
    n, c, h, w, crop, mirror = (int(a) for a in args[1:7])
    train = args[7] == "train"
    seed, shuffle, cursor, count = (int(a) for a in args[8:12])
    scale = np.float32(float(args[12]))
    images = np.fromfile(pixels_file, dtype=np.uint8).reshape(n, c, h, w).astype(np.float32)
    mean = np.zeros((c, 1, 1), np.float32)
    if args[13] != "-":
        values = np.fromfile(args[13], dtype=np.float32)
        mean = values.reshape(c, h, w) if values.size == c * h * w else values.reshape(c, 1, 1)
    mean = np.broadcast_to(mean, (c, h, w))
    side_h, side_w = (crop, crop) if crop else (h, w)
    out = np.empty((count, c, side_h, side_w), np.float32)
    orders = {}
    for i in range(count):
        position = cursor + i
        epoch, place = divmod(position, n)
        if shuffle:
            if epoch not in orders:
                orders[epoch] = shuffled_epoch(seed, epoch, n)
            index = orders[epoch][place]
        else:
            index = place
        row, column, flip = draws(seed, train, position, mirror, crop, h, w)
        # Caffe: (pixel - mean at the pixel's place in the whole image) * scale, in float.
        window = np.s_[:, row:row + side_h, column:column + side_w]
        image = (images[index][window] - mean[window]) * scale
        out[i] = image[:, :, ::-1] if flip else image
    out.tofile(out_file)


if __name__ == "__main__":
    main()
