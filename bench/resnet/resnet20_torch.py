#!/usr/bin/python3
"""PyTorch twin of dltrain's ResNet-20 (recipes/networks/resnet20_cifar.yaml), for
bench/resnet/run.sh: the same network (3x3 convolutions without bias, BatchNorm with its affine
scale and shift as Caffe's BatchNorm + Scale, ReLU, identity shortcuts and 1x1 stride-2
projections at the stage changes, 8x8 average pooling, a 10-way inner product), the same batch
of 128, inputs (pixel - mean) / 128 with the same random mirror, and SGD with momentum 0.9 and
weight decay 0.0001 at lr 0.1 (torch.optim.SGD: the rates differ from Caffe's rule by the
momentum's scaling, which does not change the work per step). It times training only: the
iterations after --warmup, the data batches cut from the set in memory as dltrain does.

Reads CIFAR-10 binary batches (data_batch_*.bin) from --data-dir. Run with Debian's torch
(/usr/bin/python3) and OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1. Prints one JSON line.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# The CIFAR-10 batch reader of the cifar10_quick twin, not a second copy of it.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cifar10"))
from cifar10_quick_torch import read_cifar  # noqa: E402


class Block(nn.Module):
    def __init__(self, inputs, outputs, stride):
        super().__init__()
        self.a = nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False)
        self.a_bn = nn.BatchNorm2d(outputs, momentum=0.001)
        self.b = nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False)
        self.b_bn = nn.BatchNorm2d(outputs, momentum=0.001)
        self.proj = None
        if stride != 1 or inputs != outputs:
            self.proj = nn.Sequential(nn.Conv2d(inputs, outputs, 1, stride, 0, bias=False),
                                      nn.BatchNorm2d(outputs, momentum=0.001))

    def forward(self, x):
        y = F.relu(self.a_bn(self.a(x)))
        y = self.b_bn(self.b(y))
        return F.relu(y + (x if self.proj is None else self.proj(x)))


class ResNet20(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.conv1_bn = nn.BatchNorm2d(16, momentum=0.001)
        blocks = []
        inputs = 16
        for stage, outputs in enumerate((16, 32, 64)):
            for b in range(3):
                blocks.append(Block(inputs, outputs, 2 if stage > 0 and b == 0 else 1))
                inputs = outputs
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(64, 10)
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(m.weight)

    def forward(self, x):
        y = F.relu(self.conv1_bn(self.conv1(x)))
        y = F.avg_pool2d(self.blocks(y), 8)
        return self.fc(y.flatten(1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--mean", type=float, default=55.7)
    parser.add_argument("--seed", type=int, default=1701)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    train_x, train_y = read_cifar(os.path.join(args.data_dir, "data_batch_*.bin"))
    model = ResNet20()
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=0.0001)
    cursor = 0
    start = None
    for it in range(args.iters + args.warmup):
        if it == args.warmup:
            start = time.perf_counter()
        index = (torch.arange(args.batch_size) + cursor) % train_x.shape[0]
        cursor = (cursor + args.batch_size) % train_x.shape[0]
        x = (train_x[index].float() - args.mean) / 128.0
        flip = torch.rand(args.batch_size) < 0.5
        x[flip] = x[flip].flip(3)
        loss = F.cross_entropy(model(x), train_y[index])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    seconds = time.perf_counter() - start
    print(json.dumps({"type": "final", "iter": args.iters, "loss": loss.item(),
                      "train_images_per_s": args.iters * args.batch_size / seconds,
                      "train_s": seconds, "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
