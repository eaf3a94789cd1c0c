#!/usr/bin/python3
"""The training order of a dltrain Data layer with `shuffle: true`, for PyTorch twins of its runs
(engine/src/data/sample_order.cpp is the original; tests/engine/data/test_sample_order.cpp checks that
the two agree).

Epoch e's order of images 0..n-1 is a Fisher-Yates shuffle from the last position down, each swap
partner drawn uniformly by rejection from SplitMix64 started at seed * 2**32 + e.

    sample_order.py SEED EPOCH COUNT   prints that epoch's order, one index per line
"""
import sys

MASK = (1 << 64) - 1


def shuffled_epoch(seed, epoch, count):
    order = list(range(count))
    state = ((seed << 32) + epoch) & MASK
    for i in range(count, 1, -1):
        threshold = ((1 << 64) - i) % i
        while True:
            state = (state + 0x9E3779B97F4A7C15) & MASK
            z = state
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
            z ^= z >> 31
            if z >= threshold:
                break
        j = z % i
        order[i - 1], order[j] = order[j], order[i - 1]
    return order


if __name__ == "__main__":
    seed, epoch, count = (int(a) for a in sys.argv[1:4])
    sys.stdout.write("".join(f"{i}\n" for i in shuffled_epoch(seed, epoch, count)))
