#!/usr/bin/python3
"""Writes the PyTorch parity cases of Caffe's adaptive solvers (tests/engine/train/test_solver.cpp).

Run with Debian's torch:  /usr/bin/python3 tests/engine/parity/make_solver_fixture.py
Never edit the output by hand: rerun this script.

Each case: a rule with its settings, the starting weights, the gradient of each of five steps,
and the weights torch.optim leaves after them, in float64 from the same float32 values. Caffe's
rules are torch.optim's with these settings (weight decay is added to the gradient in both):
    AdaGrad   torch.optim.Adagrad(lr, eps=delta, initial_accumulator_value=0, lr_decay=0)
    RMSProp   torch.optim.RMSprop(lr, alpha=rms_decay, eps=delta, momentum=0, centered=False)
    AdaDelta  torch.optim.Adadelta(lr, rho=momentum, eps=delta)
    Adam      torch.optim.Adam(lr, betas=(momentum, momentum2), eps=delta)

Output (next to this script): solvers.json
"""
import json
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(20261130)
STEPS = 5


def values(t):
    return [float(v) for v in t.detach().to(torch.float32).reshape(-1)]


def case(rule, settings, make):
    w0 = torch.rand(40, dtype=torch.float32) * 2 - 1
    grads = [torch.rand(40, dtype=torch.float32) * 2 - 1 for _ in range(STEPS)]
    w = w0.double().clone().requires_grad_(True)
    optimizer = make([w])
    for g in grads:
        optimizer.zero_grad()
        w.grad = g.double().clone()
        optimizer.step()
    return {"rule": rule, "settings": settings, "w0": values(w0),
            "grads": [values(g) for g in grads], "w": values(w)}


decay = 5e-4
cases = [
    case("AdaGrad", {"lr": 0.01, "delta": 1e-8, "weight_decay": decay},
         lambda p: torch.optim.Adagrad(p, lr=0.01, eps=1e-8, weight_decay=decay)),
    case("RMSProp", {"lr": 0.01, "rms_decay": 0.98, "delta": 1e-8, "weight_decay": decay},
         lambda p: torch.optim.RMSprop(p, lr=0.01, alpha=0.98, eps=1e-8,
                                       weight_decay=decay)),
    case("AdaDelta", {"lr": 1.0, "momentum": 0.95, "delta": 1e-6, "weight_decay": decay},
         lambda p: torch.optim.Adadelta(p, lr=1.0, rho=0.95, eps=1e-6, weight_decay=decay)),
    case("Adam", {"lr": 0.001, "momentum": 0.9, "momentum2": 0.999, "delta": 1e-8,
                  "weight_decay": decay},
         lambda p: torch.optim.Adam(p, lr=0.001, betas=(0.9, 0.999), eps=1e-8,
                                    weight_decay=decay)),
]

with open(os.path.join(HERE, "solvers.json"), "w") as out:
    json.dump({"generator": "tests/engine/parity/make_solver_fixture.py",
               "torch": torch.__version__, "cases": cases}, out, separators=(",", ":"))
    out.write("\n")
