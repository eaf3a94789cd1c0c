#!/usr/bin/python3
"""PyTorch twin of dltrain's cifar10_quick run (recipes/networks/cifar10_quick.yaml), for
bench/cifar10/run.sh.

Same network (Caffe's cifar10_quick: conv 32@5x5 pad 2, max pool 3/2, ReLU, conv 32@5x5 pad 2,
ReLU, ave pool 3/2, conv 64@5x5 pad 2, ReLU, ave pool 3/2, ip 64, ip 10, mean softmax
cross-entropy; Caffe's ceil-mode pooling sizes, which torch's ceil_mode=True gives here), same
initialisation rule (gaussian std 0.0001 for conv1, 0.01 for conv2/conv3, 0.1 for ip1/ip2; zero
biases; drawn by torch's generator, so not the same numbers as dltrain's Caffe draws), same
solver (Caffe's SGD rule with lr_mult 1/2 and decay_mult 1, not torch.optim.SGD; momentum 0.9,
weight decay 0.004, lr 0.001 then 0.0001 from --step-at, Caffe's two solver files), same data
order (file order with wrap-around, as Caffe reads its LMDB), batch 100 train and test, inputs
(pixel - mean) with --mean, tests at iteration 0, every 500 and at the end (100 x 100 images).

Reads CIFAR-10 binary batches (data_batch_*.bin, test_batch.bin) from --data-dir. Run with
Debian's torch (/usr/bin/python3) and OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1.
Prints JSON lines: "train" every --display iterations, "test", and one "final".

--device cuda runs it on the GPU (the data set moved there once; the same initial weights as on
the CPU for a seed, drawn there and copied). --cuda-graph (with --device cuda) also captures the
whole training step (forward, backward and the SGD update) in one CUDA graph, the standard
torch.cuda.graphs recipe: static input, label and learning-rate tensors, the first
--graph-warmup iterations run eagerly on a side stream (so autograd and the caching allocator have
settled), then one capture, and every later iteration copies its batch into the static tensors
and replays the graph. The update is then written with a learning-rate tensor (a multiply, not
add_'s alpha), which can round differently in the last bit. Needs only torch (no NumPy), so it
runs on a GPU machine with a CUDA PyTorch and nothing else. (The CUDA paths were written for
bench/lenet_gpu/on_gpu.sh cifar and had not yet run on a GPU when committed: docs/benchmarks.md.)
"""
import argparse
import glob
import json
import os
import time

import torch
import torch.nn.functional as F


def read_cifar(pattern):
    records = []
    for path in sorted(glob.glob(pattern)):
        with open(path, "rb") as f:
            data = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)
        records.append(data.reshape(-1, 3073))
    if not records:
        raise SystemExit(f"no CIFAR-10 batches match {pattern}")
    data = torch.cat(records)
    return data[:, 1:].reshape(-1, 3, 32, 32).clone(), data[:, 0].long()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--iters", type=int, default=5000)
    parser.add_argument("--step-at", type=int, default=4000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--test-iter", type=int, default=100)
    parser.add_argument("--test-interval", type=int, default=500)
    parser.add_argument("--display", type=int, default=100)
    parser.add_argument("--mean", type=float, default=55.7)
    parser.add_argument("--seed", type=int, default=1701)
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--cuda-graph", action="store_true",
                        help="capture the training step in a CUDA graph (needs --device cuda)")
    parser.add_argument("--graph-warmup", type=int, default=3,
                        help="eager iterations on a side stream before the capture")
    args = parser.parse_args()
    if args.cuda_graph and args.device != "cuda":
        raise SystemExit("--cuda-graph needs --device cuda")
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    start_wall = time.perf_counter()
    train_x, train_y = (t.to(device) for t in
                        read_cifar(os.path.join(args.data_dir, "data_batch_*.bin")))
    test_x, test_y = (t.to(device) for t in
                      read_cifar(os.path.join(args.data_dir, "test_batch.bin")))

    def gaussian(shape, std):
        return (torch.randn(shape) * std).to(device).requires_grad_(True)

    def zeros(n):
        return torch.zeros(n, device=device, requires_grad=True)

    params = [gaussian((32, 3, 5, 5), 0.0001), zeros(32),
              gaussian((32, 32, 5, 5), 0.01), zeros(32),
              gaussian((64, 32, 5, 5), 0.01), zeros(64),
              gaussian((64, 1024), 0.1), zeros(64),
              gaussian((10, 64), 0.1), zeros(10)]
    lr_mult = [1.0, 2.0] * 5
    history = [torch.zeros_like(p) for p in params]
    momentum, weight_decay = 0.9, 0.004

    def forward(x):
        y = F.relu(F.max_pool2d(F.conv2d(x, params[0], params[1], padding=2), 3, 2,
                                ceil_mode=True))
        y = F.avg_pool2d(F.relu(F.conv2d(y, params[2], params[3], padding=2)), 3, 2,
                         ceil_mode=True)
        y = F.avg_pool2d(F.relu(F.conv2d(y, params[4], params[5], padding=2)), 3, 2,
                         ceil_mode=True)
        y = F.linear(y.reshape(x.shape[0], -1), params[6], params[7])
        return F.linear(y, params[8], params[9])

    def batch(xs, ys, cursor, size):
        index = (torch.arange(size, device=device) + cursor) % xs.shape[0]
        return xs[index].float() - args.mean, ys[index]

    def sync():
        if cuda:
            torch.cuda.synchronize()

    # The CUDA-graph step: its inputs live in static tensors the graph reads at every replay.
    static_x = torch.zeros((args.batch_size, 3, 32, 32), device=device)
    static_y = torch.zeros(args.batch_size, dtype=torch.long, device=device)
    static_lr = torch.zeros((), device=device)

    def graph_step():
        loss = F.cross_entropy(forward(static_x), static_y)
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, g, v, mult in zip(params, grads, history, lr_mult):
                v.mul_(momentum).add_((g + weight_decay * p) * (static_lr * mult))
                p.sub_(v)
        return loss.detach()

    graph = None
    static_loss = None

    test_cursor = 0

    def test(iteration):
        nonlocal test_cursor
        accuracy = loss = 0.0
        with torch.no_grad():
            for _ in range(args.test_iter):
                x, y = batch(test_x, test_y, test_cursor, args.batch_size)
                test_cursor = (test_cursor + args.batch_size) % test_x.shape[0]
                logits = forward(x)
                loss += F.cross_entropy(logits, y).item()
                accuracy += (logits.argmax(1) == y).float().mean().item()
        result = {"type": "test", "iter": iteration, "accuracy": accuracy / args.test_iter,
                  "loss": loss / args.test_iter}
        print(json.dumps(result), flush=True)
        return result

    cursor = 0
    train_s = 0.0
    t0 = None  # start of the current stretch of training steps
    side = torch.cuda.Stream() if args.cuda_graph else None
    for it in range(args.iters):
        if args.test_interval and it % args.test_interval == 0:
            if t0 is not None:
                sync()
                train_s += time.perf_counter() - t0
            test(it)
            sync()
            t0 = time.perf_counter()
        if t0 is None:
            sync()
            t0 = time.perf_counter()
        x, y = batch(train_x, train_y, cursor, args.batch_size)
        cursor = (cursor + args.batch_size) % train_x.shape[0]
        lr = 0.001 if it < args.step_at else 0.0001
        if args.cuda_graph:
            static_x.copy_(x)
            static_y.copy_(y)
            static_lr.fill_(lr)
            if graph is not None:
                graph.replay()
                loss = static_loss
            else:
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    loss = graph_step()
                torch.cuda.current_stream().wait_stream(side)
                if it + 1 >= args.graph_warmup:
                    # Captured, not run: the next iteration's replay is its first execution.
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph):
                        static_loss = graph_step()
        else:
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
                      "torch": torch.__version__, "device": args.device,
                      "cuda_graph": args.cuda_graph}), flush=True)


if __name__ == "__main__":
    main()
