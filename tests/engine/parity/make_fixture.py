#!/usr/bin/python3
"""Writes the PyTorch parity fixture for the engine's LeNet (tests/engine/net/test_parity.cpp).

Run with Debian's torch:  /usr/bin/python3 tests/engine/parity/make_fixture.py
Never edit the outputs by hand: rerun this script.

The network is Caffe's LeNet with ip1 narrowed from 500 to 100 units, so that the fixture (initial
weights, gradients and weights after the solver steps, all float32) stays under 2 MB. Everything
else is LeNet: conv 20@5x5, max pool 2/2, conv 50@5x5, max pool 2/2, ip1, ReLU, ip2 (10),
softmax cross-entropy (mean over the batch).

Solver: Caffe's SGD rule, not torch.optim.SGD:
    g = grad + weight_decay * decay_mult * w;  v = momentum * v + lr * lr_mult * g;  w -= v
with lr_mult 1 for weights and 2 for biases, and the inv policy
    lr = base_lr * (1 + gamma * iter) ** (-power).

Outputs (next to this script):
    lenet_parity.yaml   the engine config of the same network and solver
    fixture.json        names, shapes, offsets (in floats) into fixture.bin, and the losses
    fixture.bin         float32 little-endian tensors
"""
import json
import os

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH = 4
STEPS = 3
IP1 = 100
BASE_LR, MOMENTUM, WEIGHT_DECAY, GAMMA, POWER = 0.01, 0.9, 0.0005, 0.0001, 0.75

torch.manual_seed(20261122)
torch.set_num_threads(1)


def xavier(shape):
    fan_in = 1
    for d in shape[1:]:
        fan_in *= d
    limit = (3.0 / fan_in) ** 0.5
    return (torch.rand(shape) * 2 - 1) * limit


# Engine parameter order: conv1.0, conv1.1, conv2.0, conv2.1, ip1.0, ip1.1, ip2.0, ip2.1.
# Biases are random (not Caffe's zeros) so that the bias paths are checked too.
names = ["conv1.0", "conv1.1", "conv2.0", "conv2.1", "ip1.0", "ip1.1", "ip2.0", "ip2.1"]
shapes = [(20, 1, 5, 5), (20,), (50, 20, 5, 5), (50,), (IP1, 800), (IP1,), (10, IP1), (10,)]
params = []
for name, shape in zip(names, shapes):
    t = xavier(shape) if name.endswith(".0") else torch.rand(shape) * 0.2 - 0.1
    params.append(t.requires_grad_(True))
lr_mults = [1.0 if n.endswith(".0") else 2.0 for n in names]

# Inputs like scaled MNIST pixels: uint8 / 256.
inputs = [torch.randint(0, 256, (BATCH, 1, 28, 28)).float() * 0.00390625 for _ in range(STEPS)]
labels = [torch.randint(0, 10, (BATCH,)) for _ in range(STEPS)]


def forward(x, p):
    y = F.conv2d(x, p[0], p[1])
    y = F.max_pool2d(y, 2, 2)
    y = F.conv2d(y, p[2], p[3])
    y = F.max_pool2d(y, 2, 2)
    y = F.linear(y.reshape(x.shape[0], -1), p[4], p[5])
    y = F.relu(y)
    return F.linear(y, p[6], p[7])


tensors = {}
for i in range(STEPS):
    tensors[f"input_{i}"] = inputs[i]
    tensors[f"label_{i}"] = labels[i].float()
for name, p in zip(names, params):
    tensors[f"init.{name}"] = p.detach().clone()

history = [torch.zeros_like(p) for p in params]
losses = []
for step in range(STEPS):
    logits = forward(inputs[step], params)
    loss = F.cross_entropy(logits, labels[step])
    for p in params:
        p.grad = None
    loss.backward()
    losses.append(loss.item())
    if step == 0:
        tensors["logits_0"] = logits.detach().clone()
        for name, p in zip(names, params):
            tensors[f"grad.{name}"] = p.grad.detach().clone()
    lr = BASE_LR * (1.0 + GAMMA * step) ** (-POWER)
    with torch.no_grad():
        for p, v, mult in zip(params, history, lr_mults):
            g = p.grad + WEIGHT_DECAY * p
            v.mul_(MOMENTUM).add_(lr * mult * g)
            p.sub_(v)
for name, p in zip(names, params):
    tensors[f"final.{name}"] = p.detach().clone()

index = {"batch": BATCH, "steps": STEPS, "losses": losses, "torch": torch.__version__,
         "tensors": {}}
offset = 0
with open(os.path.join(HERE, "fixture.bin"), "wb") as out:
    for name, t in tensors.items():
        data = t.contiguous().to(torch.float32).numpy().astype("<f4").tobytes()
        index["tensors"][name] = {"shape": list(t.shape), "offset": offset}
        offset += t.numel()
        out.write(data)
with open(os.path.join(HERE, "fixture.json"), "w") as out:
    json.dump(index, out, indent=1)
    out.write("\n")

with open(os.path.join(HERE, "lenet_parity.yaml"), "w") as out:
    out.write(f"""# Written by make_fixture.py: LeNet with ip1 = {IP1}, batch {BATCH}. Do not edit.
name: LeNetParity
layers:
  - {{name: data, type: Data, top: [data, label], source: none, label_source: none,
     batch_size: {BATCH}, scale: 0.00390625, shape: [1, 28, 28]}}
  - {{name: conv1, type: Convolution, bottom: data, top: conv1, num_output: 20, kernel_size: 5,
     param: [{{lr_mult: 1}}, {{lr_mult: 2}}]}}
  - {{name: pool1, type: Pooling, bottom: conv1, top: pool1, pool: max, kernel_size: 2, stride: 2}}
  - {{name: conv2, type: Convolution, bottom: pool1, top: conv2, num_output: 50, kernel_size: 5,
     param: [{{lr_mult: 1}}, {{lr_mult: 2}}]}}
  - {{name: pool2, type: Pooling, bottom: conv2, top: pool2, pool: max, kernel_size: 2, stride: 2}}
  - {{name: ip1, type: InnerProduct, bottom: pool2, top: ip1, num_output: {IP1},
     param: [{{lr_mult: 1}}, {{lr_mult: 2}}]}}
  - {{name: relu1, type: ReLU, bottom: ip1, top: ip1}}
  - {{name: ip2, type: InnerProduct, bottom: ip1, top: ip2, num_output: 10,
     param: [{{lr_mult: 1}}, {{lr_mult: 2}}]}}
  - {{name: loss, type: SoftmaxWithLoss, bottom: [ip2, label], top: loss}}
solver:
  type: SGD
  base_lr: {BASE_LR}
  momentum: {MOMENTUM}
  weight_decay: {WEIGHT_DECAY}
  lr_policy: inv
  gamma: {GAMMA}
  power: {POWER}
  max_iter: {STEPS}
""")
print(f"wrote {offset} floats ({offset * 4} bytes), losses {losses}")
