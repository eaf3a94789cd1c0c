#!/usr/bin/python3
"""PyTorch twin of dltrain's LeNet run (recipes/networks/lenet.yaml), for bench/lenet_cpu/run.sh
and bench/lenet_gpu/run.sh (--device cuda).

Same network (conv 20@5x5, max pool 2/2, conv 50@5x5, max pool 2/2, ip 500, ReLU, ip 10, mean
softmax cross-entropy), same initialisation rule (Caffe's xavier: U(+-sqrt(3/fan_in)), fan_in =
count/shape[0]; zero biases), same solver (Caffe's SGD rule with lr_mult 1/2 and decay_mult 1,
not torch.optim.SGD; inv policy), same data order (training: a fresh order every epoch, the very
permutations dltrain draws for `shuffle: true` from random_seed = --seed, sample_order.py;
--no-shuffle: file order with wrap-around, as Caffe reads its LMDB; test: file order), batch 64
train / 100 test, tests at iteration 0, every 500 and at the end (100 x 100 images).
Inputs are uint8 scaled by 1/256 per batch, as dltrain's reader does.

On the CPU, run with Debian's torch (/usr/bin/python3) and OMP_WAIT_POLICY=PASSIVE
OPENBLAS_NUM_THREADS=1. On a GPU (--device cuda[:N]) PyTorch gets its best eager settings: the
whole data set lives on the GPU (no per-batch upload), cudnn.benchmark picks the fastest
convolution algorithms, and the math is FP32 like dltrain's (TF32 off). Training time is measured
over the stretches between tests, the GPU synchronised at both ends (not per step).
--graph (GPU only) is the strongest form a PyTorch user could write for this network: the whole
training step (batch gather, forward, loss, backward and the solver update, the learning rate
computed on the device from the iteration count) captured once in a torch.cuda.CUDAGraph after
three eager warm-up steps on a side stream (PyTorch's documented whole-network capture) and
replayed for every later step; one launch a step instead of ~40 kernels from Python. Same data,
order and arithmetic as the eager loop.
Prints JSON lines: "train" every --display iterations and one "final".
"""
import argparse
import gzip
import json
import os
import struct
import time

import numpy as np
import torch
import torch.nn.functional as F

from sample_order import shuffled_epoch


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    rank = data[3]
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


def xavier(shape):
    fan_in = int(np.prod(shape[1:]))
    limit = (3.0 / fan_in) ** 0.5
    return ((torch.rand(shape) * 2 - 1) * limit).requires_grad_(True)


def capture_step(args, device, params, history, lr_mult, forward, train_x, train_y, train_order,
                 scale, solver):
    """Returns step(it) -> loss tensor: eager for the first steps, then one graph replay a step.

    Everything a step reads or changes lives in tensors the graph owns (the position in the
    training order, the iteration count for the learning rate), so a replay is a whole step."""
    base_lr, momentum, weight_decay, gamma, power = solver
    cursor = torch.zeros((), dtype=torch.int64, device=device)
    iteration = torch.zeros((), dtype=torch.float32, device=device)
    offsets = torch.arange(args.batch_size, device=device)
    mults = [torch.tensor(m, device=device) for m in lr_mult]

    def step():
        index = torch.index_select(train_order, 0, cursor + offsets)
        x = torch.index_select(train_x, 0, index).unsqueeze(1).float() * scale
        y = torch.index_select(train_y, 0, index)
        loss = F.cross_entropy(forward(x), y)
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            lr = base_lr * torch.pow(1.0 + gamma * iteration, -power)
            for p, g, v, mult in zip(params, grads, history, mults):
                v.mul_(momentum).add_((g + weight_decay * p) * (lr * mult))
                p.sub_(v)
            cursor.add_(args.batch_size)
            iteration.add_(1.0)
        return loss

    warmup = 3
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    state = {"graph": None, "loss": None}

    def run(it):
        if it < warmup:
            with torch.cuda.stream(side):
                loss = step()
            torch.cuda.current_stream(device).wait_stream(side)
            return loss
        if state["graph"] is None:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                state["loss"] = step()
            state["graph"] = graph  # capture does not run the step: replay it now
        state["graph"].replay()
        return state["loss"]

    return run, state


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--iters", type=int, default=10000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--test-batch-size", type=int, default=100)
    parser.add_argument("--test-iter", type=int, default=100)
    parser.add_argument("--test-interval", type=int, default=500)
    parser.add_argument("--display", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1701)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--shuffle", action=argparse.BooleanOptionalAction, default=True,
                        help="a fresh training order every epoch, as lenet.yaml's shuffle: true")
    parser.add_argument("--graph", action="store_true",
                        help="capture the whole training step in one CUDA graph (GPU only)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    start_wall = time.perf_counter()
    device = torch.device(args.device)
    on_gpu = device.type == "cuda"
    if on_gpu:
        if not torch.cuda.is_available():
            raise SystemExit(f"torch {torch.__version__} at this interpreter has no CUDA "
                             "(a CPU-only build): use a python whose torch was built with CUDA")
        torch.backends.cudnn.benchmark = True
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    elif args.graph:
        raise SystemExit("--graph needs --device cuda")

    def sync():
        if on_gpu:
            torch.cuda.synchronize(device)

    d = args.data_dir
    train_x = torch.from_numpy(read_idx(os.path.join(d, "train-images-idx3-ubyte.gz")).copy())
    train_y = torch.from_numpy(read_idx(os.path.join(d, "train-labels-idx1-ubyte.gz")).astype(np.int64))
    test_x = torch.from_numpy(read_idx(os.path.join(d, "t10k-images-idx3-ubyte.gz")).copy())
    test_y = torch.from_numpy(read_idx(os.path.join(d, "t10k-labels-idx1-ubyte.gz")).astype(np.int64))
    train_x, train_y, test_x, test_y = (t.to(device) for t in (train_x, train_y, test_x, test_y))
    scale = 0.00390625

    params = [xavier((20, 1, 5, 5)), torch.zeros(20, requires_grad=True),
              xavier((50, 20, 5, 5)), torch.zeros(50, requires_grad=True),
              xavier((500, 800)), torch.zeros(500, requires_grad=True),
              xavier((10, 500)), torch.zeros(10, requires_grad=True)]
    # Drawn on the CPU (the same numbers whatever the device), then moved.
    params = [p.detach().to(device).requires_grad_(True) for p in params]
    lr_mult = [1.0, 2.0] * 4
    history = [torch.zeros_like(p) for p in params]
    base_lr, momentum, weight_decay, gamma, power = 0.01, 0.9, 0.0005, 0.0001, 0.75

    def forward(x):
        y = F.max_pool2d(F.conv2d(x, params[0], params[1]), 2, 2)
        y = F.max_pool2d(F.conv2d(y, params[2], params[3]), 2, 2)
        y = F.relu(F.linear(y.reshape(x.shape[0], -1), params[4], params[5]))
        return F.linear(y, params[6], params[7])

    def batch(xs, ys, cursor, size):
        index = (torch.arange(size, device=device) + cursor) % xs.shape[0]
        return xs[index].unsqueeze(1).float() * scale, ys[index]

    # Training position p (counted over all epochs) reads image train_order[p]: every order is
    # drawn here, before any timing, so the steps only slice it.
    images = train_x.shape[0]
    epochs = (args.iters * args.batch_size) // images + 1
    train_order = torch.tensor(
        [i for e in range(epochs)
         for i in (shuffled_epoch(args.seed, e, images) if args.shuffle else range(images))],
        dtype=torch.int64, device=device)

    test_cursor = 0

    def test(iteration):
        nonlocal test_cursor
        accuracy = loss = 0.0
        with torch.no_grad():
            for _ in range(args.test_iter):
                x, y = batch(test_x, test_y, test_cursor, args.test_batch_size)
                test_cursor = (test_cursor + args.test_batch_size) % test_x.shape[0]
                logits = forward(x)
                loss += F.cross_entropy(logits, y).item()
                accuracy += (logits.argmax(1) == y).float().mean().item()
        result = {"type": "test", "iter": iteration, "accuracy": accuracy / args.test_iter,
                  "loss": loss / args.test_iter}
        print(json.dumps(result), flush=True)
        return result

    if args.graph:
        graph_step, step_loss = capture_step(args, device, params, history, lr_mult, forward,
                                             train_x, train_y, train_order, scale,
                                             (base_lr, momentum, weight_decay, gamma, power))

    cursor = 0
    train_s = 0.0
    last = None
    t0 = None  # start of the current stretch of training steps
    for it in range(args.iters):
        if args.test_interval and it % args.test_interval == 0:
            if t0 is not None:
                sync()
                train_s += time.perf_counter() - t0
            last = test(it)
            sync()
            t0 = time.perf_counter()
        if t0 is None:
            t0 = time.perf_counter()
        lr = base_lr * (1.0 + gamma * it) ** (-power)
        if args.graph:
            loss = graph_step(it)
        else:
            index = train_order[cursor:cursor + args.batch_size]
            x, y = train_x[index].unsqueeze(1).float() * scale, train_y[index]
            cursor += args.batch_size
            loss = F.cross_entropy(forward(x), y)
            for p in params:
                p.grad = None
            loss.backward()
            with torch.no_grad():
                for p, v, mult in zip(params, history, lr_mult):
                    v.mul_(momentum).add_(p.grad + weight_decay * p, alpha=lr * mult)
                    p.sub_(v)
        if args.display and it % args.display == 0:
            print(json.dumps({"type": "train", "iter": it, "loss": loss.item(), "lr": lr}),
                  flush=True)
    sync()
    train_s += time.perf_counter() - t0
    last = test(args.iters)
    print(json.dumps({"type": "final", "iter": args.iters, "test_accuracy": last["accuracy"],
                      "test_loss": last["loss"],
                      "train_images_per_s": args.iters * args.batch_size / train_s,
                      "wall_s": time.perf_counter() - start_wall, "train_s": train_s,
                      "device": torch.cuda.get_device_name(device) if on_gpu else "cpu",
                      "torch": torch.__version__,
                      "mode": "cuda-graph" if args.graph else "eager"}), flush=True)


if __name__ == "__main__":
    main()
