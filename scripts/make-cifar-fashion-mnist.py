#!/usr/bin/python3
"""Makes a CIFAR-10-shaped dataset from Debian's Fashion-MNIST, in CIFAR-10's binary format.

    scripts/make-cifar-fashion-mnist.py OUT_DIR [--source DIR]

No machine here reaches the internet and no Debian package ships CIFAR-10, so the cifar10_quick
recipe and bench/cifar10 train on this stand-in: same file format, same image shape, same number
of classes and images, real (if easier) pictures.

    source  DIR (default /usr/share/datasets/fashion-mnist, from `apt install
            dataset-fashion-mnist`): train-images-idx3-ubyte.gz and the rest, .gz or raw
    images  each 28x28 grey image padded with 2 black pixels on every side to 32x32, then
            repeated as the red, green and blue planes (3 x 32 x 32, planes in that order)
    files   data_batch_1.bin ... data_batch_5.bin: the first 50,000 training images, 10,000 per
            file, in the source's order (the last 10,000 training images are left out, as
            CIFAR-10 has 50,000); test_batch.bin: the 10,000 test images;
            batches.meta.txt: the class names, one a line (label 0 first)
    record  1 label byte (0-9) + 3072 pixel bytes, no header: CIFAR-10's "binary version"

Needs only Debian's python3; NumPy (python3-numpy) when it is there, otherwise the same bytes
are made in plain Python, a few seconds slower (bench/lenet_gpu/on_gpu.sh cifar runs it on a GPU
machine that may have PyTorch and no NumPy). Writes each file under a temporary name and renames
it, so an interrupted run leaves no half-written batch.
"""
import argparse
import gzip
import os
import struct
import sys

try:
    import numpy as np
except ImportError:
    np = None

CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
           "Bag", "Ankle boot"]
PER_BATCH = 10000
TRAIN_BATCHES = 5


def read_idx(directory, stem):
    for name in (stem + ".gz", stem):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            opener = gzip.open if name.endswith(".gz") else open
            with opener(path, "rb") as f:
                data = f.read()
            break
    else:
        sys.exit(f"make-cifar-fashion-mnist: {os.path.join(directory, stem)}(.gz) not found "
                 "(apt install dataset-fashion-mnist, or give --source)")
    rank = data[3]
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    values = memoryview(data)[4 + 4 * rank:]
    expected = 1
    for d in dims:
        expected *= d
    if len(values) != expected:
        sys.exit(f"make-cifar-fashion-mnist: {path}: {len(values)} values, header says {dims}")
    return dims[0], values


def records(images, labels):
    """N x 3073 bytes: label, then R, G, B planes of the padded image."""
    n, pixels = images
    labels = labels[1]
    if np is not None:
        grey = np.frombuffer(pixels, dtype=np.uint8).reshape(n, 28, 28)
        padded = np.zeros((n, 32, 32), dtype=np.uint8)
        padded[:, 2:30, 2:30] = grey
        out = np.empty((n, 3073), dtype=np.uint8)
        out[:, 0] = np.frombuffer(labels, dtype=np.uint8)
        out[:, 1:] = np.repeat(padded.reshape(n, 1, 1024), 3, axis=1).reshape(n, 3072)
        return out.tobytes()
    out = bytearray(n * 3073)
    plane = bytearray(1024)  # the padding stays zero: only the 28 x 28 middle is rewritten
    for i in range(n):
        image = pixels[i * 784:(i + 1) * 784]
        for row in range(28):
            plane[(row + 2) * 32 + 2:(row + 2) * 32 + 30] = image[row * 28:(row + 1) * 28]
        start = i * 3073
        out[start] = labels[i]
        out[start + 1:start + 3073] = plane * 3
    return bytes(out)


def write(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--source", default="/usr/share/datasets/fashion-mnist")
    args = parser.parse_args()
    train = records(read_idx(args.source, "train-images-idx3-ubyte"),
                    read_idx(args.source, "train-labels-idx1-ubyte"))
    test = records(read_idx(args.source, "t10k-images-idx3-ubyte"),
                   read_idx(args.source, "t10k-labels-idx1-ubyte"))
    size = PER_BATCH * 3073
    if len(train) < size * TRAIN_BATCHES or len(test) < size:
        sys.exit("make-cifar-fashion-mnist: the source has fewer images than CIFAR-10's 50,000 "
                 "+ 10,000")
    os.makedirs(args.out_dir, exist_ok=True)
    for b in range(TRAIN_BATCHES):
        write(os.path.join(args.out_dir, f"data_batch_{b + 1}.bin"),
              train[b * size:(b + 1) * size])
    write(os.path.join(args.out_dir, "test_batch.bin"), test[:size])
    write(os.path.join(args.out_dir, "batches.meta.txt"), ("\n".join(CLASSES) + "\n").encode())
    print(f"make-cifar-fashion-mnist: wrote {TRAIN_BATCHES} x {PER_BATCH} training and "
          f"{PER_BATCH} test images to {args.out_dir}")


if __name__ == "__main__":
    main()
