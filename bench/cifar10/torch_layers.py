#!/usr/bin/python3
"""Where PyTorch's cifar10_quick step goes, per layer, for comparison with `dltrain time`'s CPU
columns (docs/benchmarks.md).

    OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1 bench/cifar10/torch_layers.py THREADS ITERATIONS

Each op of the forward and backward pass is called directly (the ATen ops autograd calls for the
network of cifar10_quick_torch.py: mkldnn convolution and its backward, ceil-mode pooling, ReLU,
the inner product) on random data at batch 100, and timed with the process's CPU clock, which
counts every thread and holds on a machine shared with other work. The gradient arriving at ip1
is a random stand-in: what an op costs does not depend on its values. Prints CPU ms per batch
per layer, forward and backward, and the CPU and wall time of the whole step.
"""
import sys
import time

import torch
import torch.nn.functional as F

aten = torch.ops.aten
LAYERS = ["conv1", "pool1", "relu1", "conv2", "relu2", "pool2", "conv3", "relu3", "pool3", "ip1"]


def main():
    threads, iters = int(sys.argv[1]), int(sys.argv[2])
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    w = [torch.randn(s) * 0.01 for s in [(32, 3, 5, 5), (32, 32, 5, 5), (64, 32, 5, 5)]]
    b = [torch.zeros(n) for n in (32, 32, 64)]
    ip = [torch.randn(64, 1024) * 0.1, torch.randn(10, 64) * 0.1]
    x = torch.randn(100, 3, 32, 32) * 50
    spent = {}

    def timed(name, fn, *args):
        start = time.process_time()
        result = fn(*args)
        spent[name] = spent.get(name, 0.0) + time.process_time() - start
        return result

    def conv_backward(dy, bottom, weight, need_dx):
        return aten.convolution_backward(dy, bottom, weight, [weight.shape[0]], [1, 1], [2, 2],
                                         [1, 1], False, [0, 0], 1, [need_dx, True, True])

    def ave_backward(dy, bottom):
        return aten.avg_pool2d_backward(dy, bottom, [3, 3], [2, 2], [0, 0], True, True, None)

    def step():
        c1 = timed("conv1 f", F.conv2d, x, w[0], b[0], 1, 2)
        p1, argmax = timed("pool1 f", aten.max_pool2d_with_indices, c1, [3, 3], [2, 2], [0, 0],
                           [1, 1], True)
        r1 = timed("relu1 f", torch.relu, p1)
        c2 = timed("conv2 f", F.conv2d, r1, w[1], b[1], 1, 2)
        r2 = timed("relu2 f", torch.relu, c2)
        p2 = timed("pool2 f", F.avg_pool2d, r2, 3, 2, 0, True)
        c3 = timed("conv3 f", F.conv2d, p2, w[2], b[2], 1, 2)
        r3 = timed("relu3 f", torch.relu, c3)
        p3 = timed("pool3 f", F.avg_pool2d, r3, 3, 2, 0, True)
        h = timed("ip1 f", F.linear, p3.reshape(100, -1), ip[0])
        timed("ip2 f", F.linear, h, ip[1])
        dh = torch.randn_like(h)
        dp3 = timed("ip1 b", torch.mm, dh, ip[0]).reshape(p3.shape)
        timed("ip1 b", torch.mm, dh.t(), p3.reshape(100, -1))
        dr3 = timed("pool3 b", ave_backward, dp3, r3)
        dc3 = timed("relu3 b", aten.threshold_backward, dr3, r3, 0)
        dp2 = timed("conv3 b", conv_backward, dc3, p2, w[2], True)[0]
        dr2 = timed("pool2 b", ave_backward, dp2, r2)
        dc2 = timed("relu2 b", aten.threshold_backward, dr2, r2, 0)
        dr1 = timed("conv2 b", conv_backward, dc2, r1, w[1], True)[0]
        dp1 = timed("relu1 b", aten.threshold_backward, dr1, r1, 0)
        dc1 = timed("pool1 b", aten.max_pool2d_with_indices_backward, dp1, c1, [3, 3], [2, 2],
                    [0, 0], [1, 1], True, argmax)
        timed("conv1 b", conv_backward, dc1, x, w[0], False)

    for _ in range(3):  # warm-up: oneDNN's primitives are created on first use
        step()
    spent.clear()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(iters):
        step()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    print(f"{'layer':8}{'fwd cpu ms':>12}{'bwd cpu ms':>12}")
    for name in LAYERS:
        forward = 1e3 * spent.get(name + " f", 0.0) / iters
        backward = 1e3 * spent.get(name + " b", 0.0) / iters
        print(f"{name:8}{forward:12.3f}{backward:12.3f}")
    print(f"torch {torch.__version__}, {threads} threads: {1e3 * cpu / iters:.1f} ms of CPU and "
          f"{1e3 * wall / iters:.1f} ms wall per forward-backward")


if __name__ == "__main__":
    main()
