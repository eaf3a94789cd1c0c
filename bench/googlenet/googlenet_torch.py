#!/usr/bin/python3
"""PyTorch twin of BVLC GoogLeNet as dltrain trains it, for bench/googlenet/run.sh.

The network is read from the same file dltrain reads (recipes/networks/bvlc_googlenet/
train_val.prototxt, Caffe's own), parsed with protobuf's text format against dltrain's
engine/proto/caffe.proto (compiled here with protoc), and run layer by layer in the train phase:
Convolution (nn.Conv2d, Caffe's pad, stride and group), ReLU, Pooling (max or average, Caffe's
ceil rounding: ceil_mode=True), LRN (F.local_response_norm, whose alpha is divided by the size as
Caffe's), Concat, Dropout, InnerProduct (flattened input) and SoftmaxWithLoss (cross-entropy by
its loss_weight: the main and both auxiliary classifiers); Accuracy is left out (train phase).
Inputs are the LMDB's images as dltrain takes them: a random 224x224 crop, a random mirror,
less Caffe's mean_value; SGD with momentum 0.9 and weight decay 0.0002 at lr 0.01 (quick_solver's).
It times training only: the iterations after --warmup.

Run with Debian's torch (/usr/bin/python3) and OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1.
Prints one JSON line.
"""
import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import lmdb
import torch
import torch.nn as nn
import torch.nn.functional as F
from google.protobuf import text_format

# nn.LazyLinear sizes the inner products from the first batch, as Caffe does; its note of a
# new feature is not this benchmark's output.
warnings.filterwarnings("ignore", message="Lazy modules")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def caffe_pb2():
    """dltrain's caffe.proto as a Python module (protoc --python_out)."""
    out = tempfile.mkdtemp(prefix="dl_caffe_pb2_")
    proto = os.path.join(ROOT, "engine", "proto")
    subprocess.run(["protoc", "-I" + proto, "--python_out=" + out,
                    os.path.join(proto, "caffe.proto")], check=True)
    sys.path.insert(0, out)
    return importlib.import_module("caffe_pb2")


def in_train(layer, pb):
    if not layer.include:
        return all(rule.phase != pb.TRAIN for rule in layer.exclude)
    return any(not rule.HasField("phase") or rule.phase == pb.TRAIN for rule in layer.include)


def single(values, default):
    return values[0] if len(values) else default


class CaffeNet(nn.Module):
    """The train net of a Caffe prototxt, for the layer types GoogLeNet uses."""

    def __init__(self, net, pb, channels):
        super().__init__()
        self.pb = pb
        self.layers = [layer for layer in net.layer if in_train(layer, pb)]
        self.modules_by_name = nn.ModuleDict()
        shapes = {}
        for layer in self.layers:
            if layer.type == "Data":
                shapes[layer.top[0]] = channels
            elif layer.type == "Convolution":
                p = layer.convolution_param
                conv = nn.Conv2d(shapes[layer.bottom[0]], p.num_output, single(p.kernel_size, 1),
                                 single(p.stride, 1), single(p.pad, 0), groups=p.group,
                                 bias=p.bias_term)
                self.modules_by_name[layer.name] = conv
                shapes[layer.top[0]] = p.num_output
            elif layer.type == "InnerProduct":
                p = layer.inner_product_param
                self.modules_by_name[layer.name] = nn.LazyLinear(p.num_output, bias=p.bias_term)
                shapes[layer.top[0]] = p.num_output
            elif layer.type == "Concat":
                shapes[layer.top[0]] = sum(shapes[b] for b in layer.bottom)
            elif layer.type in ("ReLU", "Pooling", "LRN", "Dropout"):
                shapes[layer.top[0]] = shapes[layer.bottom[0]]

    def forward(self, data, label):
        blobs = {}
        loss = 0.0
        pb = self.pb
        for layer in self.layers:
            x = [blobs[b] for b in layer.bottom if b in blobs]
            if layer.type == "Data":
                blobs[layer.top[0]], blobs[layer.top[1]] = data, label
            elif layer.type in ("Convolution", "InnerProduct"):
                inp = x[0] if layer.type == "Convolution" else x[0].flatten(1)
                blobs[layer.top[0]] = self.modules_by_name[layer.name](inp)
            elif layer.type == "ReLU":
                blobs[layer.top[0]] = F.relu(x[0])
            elif layer.type == "Pooling":
                p = layer.pooling_param
                pool = F.max_pool2d if p.pool == pb.PoolingParameter.MAX else F.avg_pool2d
                blobs[layer.top[0]] = pool(x[0], p.kernel_size, p.stride or 1, p.pad,
                                           ceil_mode=True)
            elif layer.type == "LRN":
                p = layer.lrn_param
                blobs[layer.top[0]] = F.local_response_norm(x[0], p.local_size, alpha=p.alpha,
                                                            beta=p.beta, k=p.k)
            elif layer.type == "Concat":
                blobs[layer.top[0]] = torch.cat(x, dim=1)
            elif layer.type == "Dropout":
                blobs[layer.top[0]] = F.dropout(x[0], layer.dropout_param.dropout_ratio,
                                                self.training)
            elif layer.type == "SoftmaxWithLoss":
                weight = single(layer.loss_weight, 1.0)
                loss = loss + weight * F.cross_entropy(x[0], x[1].long())
            elif layer.type == "Accuracy":
                continue
            else:
                raise SystemExit("googlenet_torch.py: no twin for layer type " + layer.type)
        return loss


def read_lmdb(path):
    """Raw Datums (channels, height, width, data, label) as uint8 images and labels."""
    images, labels = [], []
    env = lmdb.open(path, readonly=True, lock=False)
    with env.begin() as txn:
        for _, value in txn.cursor():
            fields, at = {}, 0
            while at < len(value):
                key, at = varint(value, at)
                number, wire = key >> 3, key & 7
                if wire == 0:
                    fields[number], at = varint(value, at)
                elif wire == 2:
                    length, at = varint(value, at)
                    fields[number] = value[at:at + length]
                    at += length
                else:
                    raise SystemExit("googlenet_torch.py: unexpected wire type %d" % wire)
            shape = (fields[1], fields[2], fields[3])
            images.append(torch.frombuffer(bytearray(fields[4]), dtype=torch.uint8).view(shape))
            labels.append(fields.get(5, 0))
    return torch.stack(images), torch.tensor(labels)


def varint(data, at):
    value, shift = 0, 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lmdb", required=True)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=1701)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    pb = caffe_pb2()
    net = pb.NetParameter()
    with open(os.path.join(ROOT, "recipes", "networks", "bvlc_googlenet", "train_val.prototxt"),
              encoding="utf-8") as text:
        text_format.Parse(text.read(), net)
    data_layer = [l for l in net.layer if l.type == "Data" and in_train(l, pb)][0]
    crop = data_layer.transform_param.crop_size
    mean = torch.tensor(list(data_layer.transform_param.mean_value)).view(1, -1, 1, 1)
    images, labels = read_lmdb(args.lmdb)
    model = CaffeNet(net, pb, images.shape[1])
    model.train()
    model(torch.zeros(1, images.shape[1], crop, crop), torch.zeros(1))  # sizes the lazy layers
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=0.0002)
    cursor = 0
    start = None
    for it in range(args.iters + args.warmup):
        if it == args.warmup:
            start = time.perf_counter()
        index = (torch.arange(args.batch_size) + cursor) % images.shape[0]
        cursor = (cursor + args.batch_size) % images.shape[0]
        top = int(torch.randint(0, images.shape[2] - crop + 1, (1,)))
        left = int(torch.randint(0, images.shape[3] - crop + 1, (1,)))
        x = images[index, :, top:top + crop, left:left + crop].float() - mean
        flip = torch.rand(args.batch_size) < 0.5
        x[flip] = x[flip].flip(3)
        loss = model(x, labels[index])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    seconds = time.perf_counter() - start
    print(json.dumps({"type": "final", "iter": args.iters, "loss": float(loss),
                      "train_images_per_s": args.iters * args.batch_size / seconds,
                      "train_s": seconds, "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
