#!/usr/bin/env python3
"""Expands Debian's dataset-fashion-mnist into one PGM file per image:
OUT/{train,test}/<label>/<index>.pgm (70,000 files of 797 bytes) plus OUT/train.txt."""
import gzip
import os
import sys

SRC = "/usr/share/datasets/fashion-mnist"


def read_idx(name):
    with gzip.open(os.path.join(SRC, name), "rb") as f:
        return f.read()


def main(out):
    for split, prefix in (("train", "train"), ("test", "t10k")):
        images = read_idx(f"{prefix}-images-idx3-ubyte.gz")[16:]
        labels = read_idx(f"{prefix}-labels-idx1-ubyte.gz")[8:]
        for label in range(10):
            os.makedirs(os.path.join(out, split, str(label)), exist_ok=True)
        with open(os.path.join(out, f"{split}.txt"), "w") as listing:
            for i, label in enumerate(labels):
                rel = f"{split}/{label}/{i:05d}.pgm"
                with open(os.path.join(out, rel), "wb") as f:
                    f.write(b"P5 28 28 255\n" + images[i * 784:(i + 1) * 784])
                listing.write(f"{rel} {label}\n")


if __name__ == "__main__":
    main(sys.argv[1])
