#!/usr/bin/python3
"""Writes the PyTorch parity cases of single layers (tests/engine/net/test_layer_parity.cpp).

Run with Debian's torch:  /usr/bin/python3 tests/engine/parity/make_layer_fixture.py
Never edit the output by hand: rerun this script.

Each case is one engine layer (its config keys as in the YAML format), its bottoms and parameters,
a random top gradient dy, and what PyTorch computes in float64 from the same float32 values: the
top, the gradient of sum(top * dy) for every bottom and parameter, and (BatchNorm) the running
statistics after the forward pass, in Caffe's form (sums and their factor).

How each Caffe layer maps to PyTorch:
    Pooling ave      F.avg_pool2d(ceil_mode=True, count_include_pad=True)
    Sigmoid, TanH    torch.sigmoid, torch.tanh
    Convolution      F.conv2d(groups=...)
    LRN              F.local_response_norm (alpha is divided by size in both); WITHIN_CHANNEL
                     as Caffe builds it: x * (1 + alpha * F.avg_pool2d(x^2, size, 1,
                     (size-1)/2, count_include_pad=True))^-beta
    BatchNorm        F.batch_norm, no affine; training with momentum 1 gives the batch mean and
                     unbiased variance that Caffe adds to its running sums; eval with
                     running mean = mean_sum / factor and var = var_sum / factor
    Scale            x * gamma[c] + beta[c]
    AbsVal, BNLL     torch.abs, F.softplus (threshold above the inputs: Caffe's has none)
    ELU, Power       F.elu(alpha), (shift + scale * x) ** power
    EuclideanLoss    ((a - b) ** 2).sum() / (2 N); the gradient reaches both sides
    SigmoidCrossEntropyLoss  F.binary_cross_entropy_with_logits(reduction="sum") / N
    Softmax          F.softmax(dim=1), rows and every pixel of a map
    Concat           torch.cat
    Eltwise          sum of coeff * x, product, torch.maximum (distinct values: no ties)
    Deconvolution    F.conv_transpose2d(stride, padding, groups), weights C x M/group x K x K
    Crop             slicing: x[:, :, o_h:o_h + h, o_w:o_w + w] (axis 2), or from the channels
    HingeLoss        one-vs-all: (max(0, 1 + s * (-1 at the label, else 1)) ** p).sum() / N,
                     p 1 (L1) or 2 (L2)
    PReLU            F.prelu, a slope per channel or one for all (channel_shared)
    ContrastiveLoss  (y d^2 + (1 - y) max(margin - d, 0)^2).sum() / (2 N), d the pair's distance
                     (legacy: max(margin - d^2, 0)); Caffe's gradient divides by d + 1e-4, not
                     d, which the distance's straight-through term below reproduces

Output (next to this script): layers.json
"""
import json
import os

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(20261126)


def rand(*shape, low=-1.0, high=1.0):
    return (torch.rand(*shape, dtype=torch.float32) * (high - low) + low)


def values(t):
    return [float(v) for v in t.detach().to(torch.float32).reshape(-1)]


def case(name, layer, bottoms, params, fn, params_after=None, constant=(), dy=None):
    """fn(bottoms, params) -> top, all float64 leaves with gradients, except the bottoms whose
    indices are in `constant` (a loss's targets: no gradient reaches them, zeros are written).
    A loss's dy is its loss_weight: its backward scales by that, not by the top's gradient."""
    xs = [b.double().requires_grad_(i not in constant) for i, b in enumerate(bottoms)]
    ps = [p.double().requires_grad_(True) for p in params]
    top = fn(xs, ps)
    dy = rand(*top.shape) if dy is None else dy
    (top * dy.double()).sum().backward()
    entry = {
        "name": name,
        "layer": layer,
        "bottoms": [{"shape": list(b.shape), "data": values(b)} for b in bottoms],
        "params": [{"shape": list(p.shape), "data": values(p)} for p in params],
        "top": {"shape": list(top.shape), "data": values(top)},
        "dy": values(dy),
        "dbottoms": [values(x.grad) if x.grad is not None else [0.0] * x.numel() for x in xs],
        "dparams": [values(p.grad) if p.grad is not None else [0.0] * p.numel() for p in ps],
    }
    if params_after is not None:
        entry["params_after"] = [values(p) for p in params_after]
    return entry


cases = []

x = rand(2, 3, 7, 7)
cases.append(case("ave_pool_pad", {"type": "Pooling", "pool": "ave", "kernel_size": 3,
                                   "stride": 2, "pad": 1}, [x], [],
                  lambda b, p: F.avg_pool2d(b[0], 3, 2, 1, ceil_mode=True,
                                            count_include_pad=True)))
x = rand(2, 3, 16, 16)
cases.append(case("ave_pool_ceil", {"type": "Pooling", "pool": "ave", "kernel_size": 3,
                                    "stride": 2}, [x], [],
                  lambda b, p: F.avg_pool2d(b[0], 3, 2, 0, ceil_mode=True,
                                            count_include_pad=True)))
x = rand(2, 3, 4, 4, low=-3, high=3)
cases.append(case("sigmoid", {"type": "Sigmoid"}, [x], [], lambda b, p: torch.sigmoid(b[0])))
cases.append(case("tanh", {"type": "TanH"}, [x], [], lambda b, p: torch.tanh(b[0])))

x = rand(2, 4, 6, 6)
w = rand(6, 2, 3, 3)
bias = rand(6)
cases.append(case("grouped_convolution", {"type": "Convolution", "num_output": 6,
                                          "kernel_size": 3, "pad": 1, "group": 2},
                  [x], [w, bias], lambda b, p: F.conv2d(b[0], p[0], p[1], 1, 1, 1, 2)))

x = rand(2, 7, 3, 3, low=-2, high=2)
cases.append(case("lrn", {"type": "LRN", "local_size": 5, "alpha": 0.5, "beta": 0.75, "k": 2.0},
                  [x], [], lambda b, p: F.local_response_norm(b[0], 5, alpha=0.5, beta=0.75,
                                                              k=2.0)))

x = rand(2, 3, 6, 5, low=-2, high=2)
cases.append(case("lrn_within_channel", {"type": "LRN", "norm_region": "within_channel",
                                         "local_size": 3, "alpha": 0.5, "beta": 0.75},
                  [x], [], lambda b, p: b[0] * (1 + 0.5 * F.avg_pool2d(
                      b[0] * b[0], 3, 1, 1, count_include_pad=True)) ** -0.75))

x = rand(2, 3, 4, 4, low=-3, high=3)
cases.append(case("absval", {"type": "AbsVal"}, [x], [], lambda b, p: torch.abs(b[0])))
cases.append(case("bnll", {"type": "BNLL"}, [x], [],
                  lambda b, p: F.softplus(b[0], beta=1, threshold=100)))
cases.append(case("elu", {"type": "ELU", "alpha": 0.7}, [x], [],
                  lambda b, p: F.elu(b[0], alpha=0.7)))
cases.append(case("power", {"type": "Power", "power": 2.5, "scale": 0.5, "shift": 2.0}, [x], [],
                  lambda b, p: (2.0 + 0.5 * b[0]) ** 2.5))

a, b = rand(4, 6), rand(4, 6)
cases.append(case("euclidean_loss", {"type": "EuclideanLoss", "loss_weight": 0.5}, [a, b], [],
                  lambda b_, p: ((b_[0] - b_[1]) ** 2).sum().reshape(1) / 8.0,
                  dy=torch.tensor([0.5])))
x, t = rand(4, 2, 3, low=-4, high=4), torch.rand(4, 2, 3)
cases.append(case("sigmoid_cross_entropy_loss", {"type": "SigmoidCrossEntropyLoss"}, [x, t], [],
                  lambda b_, p: F.binary_cross_entropy_with_logits(
                      b_[0], b_[1], reduction="sum").reshape(1) / 4.0, constant=(1,),
                  dy=torch.tensor([1.0])))

cases.append(case("softmax_rows", {"type": "Softmax"}, [rand(3, 5, low=-3, high=3)], [],
                  lambda b_, p: F.softmax(b_[0], dim=1)))
cases.append(case("softmax_pixels", {"type": "Softmax"}, [rand(2, 4, 3, 5, low=-3, high=3)], [],
                  lambda b_, p: F.softmax(b_[0], dim=1)))
cases.append(case("softmax_more_classes", {"type": "Softmax"}, [rand(2, 7, 2, 1, low=-3, high=3)],
                  [], lambda b_, p: F.softmax(b_[0], dim=1)))

x = rand(4, 3, 3, 3, low=-2, high=3)
eps = 1e-5
mean = x.double().mean(dim=(0, 2, 3))
var_unbiased = x.double().var(dim=(0, 2, 3), unbiased=True)
zeros = [torch.zeros(3), torch.zeros(3), torch.zeros(1)]
cases.append(case("batch_norm_train", {"type": "BatchNorm", "eps": eps}, [x], zeros,
                  lambda b, p: F.batch_norm(b[0], None, None, training=True, eps=eps),
                  params_after=[mean, var_unbiased, torch.ones(1)]))
run_mean = rand(3)
run_var = rand(3, low=0.5, high=2.0)
factor = 2.5
stats = [run_mean * factor, run_var * factor, torch.tensor([factor])]
cases.append(case("batch_norm_global", {"type": "BatchNorm", "use_global_stats": True,
                                        "eps": eps}, [x], stats,
                  lambda b, p: F.batch_norm(b[0], (p[0] / p[2]).detach(),
                                            (p[1] / p[2]).detach(), training=False, eps=eps)))

x = rand(2, 3, 4, 4)
gamma = rand(3)
beta = rand(3)
cases.append(case("scale_bias", {"type": "Scale", "bias_term": True}, [x], [gamma, beta],
                  lambda b, p: b[0] * p[0].view(1, 3, 1, 1) + p[1].view(1, 3, 1, 1)))

a = rand(2, 3, 2, 2)
c = rand(2, 2, 2, 2)
cases.append(case("concat_channels", {"type": "Concat", "axis": 1}, [a, c], [],
                  lambda b, p: torch.cat(b, dim=1)))
cases.append(case("concat_batch", {"type": "Concat", "axis": 0}, [a, rand(3, 3, 2, 2)], [],
                  lambda b, p: torch.cat(b, dim=0)))

a, c, d = rand(2, 3, 3, 3), rand(2, 3, 3, 3), rand(2, 3, 3, 3)
cases.append(case("eltwise_sum", {"type": "Eltwise", "operation": "sum", "coeff": [0.5, -2.0]},
                  [a, c], [], lambda b, p: 0.5 * b[0] - 2.0 * b[1]))
cases.append(case("eltwise_prod", {"type": "Eltwise", "operation": "prod"}, [a, c, d], [],
                  lambda b, p: b[0] * b[1] * b[2]))
cases.append(case("eltwise_max", {"type": "Eltwise", "operation": "max"}, [a, c, d], [],
                  lambda b, p: torch.maximum(torch.maximum(b[0], b[1]), b[2])))



def contrastive(b_, margin, legacy):
    """Caffe's ContrastiveLoss over b_ = [a, b, y]."""
    squared = ((b_[0] - b_[1]) ** 2).sum(dim=1)
    if legacy:
        far = torch.clamp(margin - squared, min=0)
    else:
        root = squared.detach().sqrt()
        # The value of sqrt(d^2), the derivative 1 / (2 (d + 1e-4)): Caffe's backward.
        distance = root + (squared - squared.detach()) / (2 * (root + 1e-4))
        far = torch.clamp(margin - distance, min=0) ** 2
    y = b_[2].reshape(-1)
    return (y * squared + (1 - y) * far).sum().reshape(1) / (2.0 * squared.shape[0])


# Six pairs of 5 values (distances about 1.5), half alike; margins where some of the others are
# pushed and some are past it.
a, b = rand(6, 5), rand(6, 5)
y = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0, 0.0])
cases.append(case("contrastive_loss", {"type": "ContrastiveLoss", "margin": 1.8,
                                       "loss_weight": 0.5}, [a, b, y], [],
                  lambda b_, p: contrastive(b_, 1.8, False), constant=(2,),
                  dy=torch.tensor([0.5])))
cases.append(case("contrastive_loss_legacy", {"type": "ContrastiveLoss", "margin": 2.5,
                                              "legacy_version": True}, [a, b, y], [],
                  lambda b_, p: contrastive(b_, 2.5, True), constant=(2,),
                  dy=torch.tensor([1.0])))

def hinge(b_, power):
    sign = 1 - 2 * F.one_hot(b_[1].long(), b_[0].shape[1]).double()
    return (torch.clamp(1 + b_[0] * sign, min=0) ** power).sum().reshape(1) / b_[0].shape[0]


scores, labels = rand(5, 4, low=-2, high=2), torch.tensor([0.0, 3.0, 1.0, 1.0, 2.0])
cases.append(case("hinge_loss_l1", {"type": "HingeLoss", "loss_weight": 0.5}, [scores, labels],
                  [], lambda b_, p: hinge(b_, 1), constant=(1,), dy=torch.tensor([0.5])))
cases.append(case("hinge_loss_l2", {"type": "HingeLoss", "norm": "l2"}, [scores, labels], [],
                  lambda b_, p: hinge(b_, 2), constant=(1,), dy=torch.tensor([1.0])))

x = rand(2, 3, 4, 4, low=-3, high=3)
cases.append(case("prelu", {"type": "PReLU"}, [x], [rand(3, low=-0.5, high=0.5)],
                  lambda b_, p: F.prelu(b_[0], p[0])))
cases.append(case("prelu_shared", {"type": "PReLU", "channel_shared": True}, [x],
                  [rand(1, low=-0.5, high=0.5)], lambda b_, p: F.prelu(b_[0], p[0])))

x, like = rand(2, 3, 6, 7), rand(2, 1, 4, 3)
cases.append(case("crop_height_width", {"type": "Crop", "axis": 2, "offset": [1, 3]}, [x, like],
                  [], lambda b_, p: b_[0][:, :, 1:5, 3:6], constant=(1,)))
cases.append(case("crop_from_channels", {"type": "Crop", "axis": 1, "offset": [1]},
                  [x, rand(1, 2, 3, 3)], [], lambda b_, p: b_[0][:, 1:3, 1:4, 1:4],
                  constant=(1,)))

x = rand(2, 4, 3, 5)
w, bias = rand(4, 3, 4, 4), rand(6)
cases.append(case("deconvolution_upsample", {"type": "Deconvolution", "num_output": 6,
                                             "kernel_size": 4, "stride": 2, "pad": 1, "group": 2},
                  [x], [w, bias],
                  lambda b_, p: F.conv_transpose2d(b_[0], p[0], p[1], 2, 1, groups=2)))

with open(os.path.join(HERE, "layers.json"), "w") as out:
    json.dump({"generator": "tests/engine/parity/make_layer_fixture.py",
               "torch": torch.__version__, "cases": cases}, out, separators=(",", ":"))
    out.write("\n")
