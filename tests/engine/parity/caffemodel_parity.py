#!/usr/bin/python3
"""A .caffemodel written the way Caffe's own Python tools write one (caffe_pb2, compiled by protoc
from engine/proto/caffe.proto), from the weights of a PyTorch model, with the data and the
PyTorch reference for tests/engine/io/test_caffemodel.cpp (CaffeModelParity).

    caffemodel_parity.py OUT_DIR

OUT_DIR must hold caffe_pb2.py. Writes OUT_DIR/model.caffemodel and the batch (pixels.u8: 16 x 2
x 8 x 8 bytes, labels.u8: 16 bytes) and prints one JSON line: the logits, the softmax loss (mean)
and the accuracy as PyTorch computes them in float64 from the same float32 weights and inputs
(pixels x 1/256).

tests/engine/parity/caffemodel/ holds one run's files (model.caffemodel, pixels.u8, labels.u8,
and the JSON line as torch.json) for machines without PyTorch (CI):
    protoc -I engine/proto --python_out=DIR engine/proto/caffe.proto
    caffemodel_parity.py DIR > DIR/torch.json
"""
import json
import os
import sys

import numpy as np
import torch

out_dir = sys.argv[1]
sys.path.insert(0, out_dir)
import caffe_pb2  # noqa: E402

BATCH, SIZE, SCALE = 16, 8, 0.00390625


class Net(torch.nn.Module):
    """The twin of the YAML net in the test: conv (3x3, pad 1) -> ReLU -> max pool 2x2 -> ip1 ->
    TanH -> ip2 (4 classes); the layers are named as in the Caffe net."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(2, 5, 3, padding=1)
        self.ip1 = torch.nn.Linear(5 * 4 * 4, 12)
        self.ip2 = torch.nn.Linear(12, 4)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2)
        # Caffe's InnerProduct flattens C x H x W in that order, as torch.flatten does.
        return self.ip2(torch.tanh(self.ip1(torch.flatten(x, 1))))


torch.manual_seed(26)
model = Net()
with torch.no_grad():
    for p in model.parameters():
        p.uniform_(-0.5, 0.5)  # larger than the default, so every layer moves the logits

rng = np.random.default_rng(26)
pixels = rng.integers(0, 256, size=(BATCH, 2, SIZE, SIZE), dtype=np.uint8)
labels = rng.integers(0, 4, size=BATCH, dtype=np.uint8)

net = caffe_pb2.NetParameter()
net.name = "parity"
for name, kind, module in (("conv1", "Convolution", model.conv1), ("ip1", "InnerProduct", model.ip1),
                           ("ip2", "InnerProduct", model.ip2)):
    layer = net.layer.add()
    layer.name = name
    layer.type = kind
    for tensor in (module.weight, module.bias):
        blob = layer.blobs.add()
        blob.shape.dim.extend(tensor.shape)
        blob.data.extend(tensor.detach().numpy().astype(np.float32).ravel().tolist())
with open(os.path.join(out_dir, "model.caffemodel"), "wb") as f:
    f.write(net.SerializeToString())

pixels.tofile(os.path.join(out_dir, "pixels.u8"))
labels.tofile(os.path.join(out_dir, "labels.u8"))

x = torch.from_numpy(pixels.astype(np.float32) * np.float32(SCALE))
with torch.no_grad():
    logits = model.double()(x.double())
    loss = torch.nn.functional.cross_entropy(logits, torch.from_numpy(labels).long())
    accuracy = (logits.argmax(1).numpy() == labels).mean()
print(json.dumps({"loss": loss.item(), "accuracy": float(accuracy),
                  "logits": logits.numpy().ravel().tolist()}))
