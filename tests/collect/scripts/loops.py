"""Training loops as users write them (no probe import); argv[1] picks one, argv[2] (optional) is a file
where the script writes the sum of its final weights, so a test can check probe did not change training.

* ``inplace``  — in-place ops in every spelling: ``nn.ReLU(inplace=True)`` after a Linear and first in a
  ``Sequential`` (the module changes its own input), a module that clamps its input in place while the
  caller uses that input again, ``F.relu(x, inplace=True)``, ``mul_``, ``+=``, ``unsqueeze_``, ``out=``;
* ``raises``   — a module whose forward raises, caught by its parent (siblings follow it);
* ``closure``  — ``optimizer.step(closure)`` with SGD, 3 updates;
* ``lbfgs``    — LBFGS (the closure runs several times per update), 2 updates;
* ``accum``    — gradient accumulation: 2 micro-batches per update, 2 updates;
* ``wrapped``  — an optimizer that wraps another (as accelerate's does), 2 updates;
* ``logging``  — 2 updates, then loss logging after the last one (HF Trainer's ``tr_loss`` handling);
* ``nomodule`` — a model without ``nn.Module`` (raw tensors), 2 updates;
* ``idle``     — no forward at all (a run that records nothing).
"""

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

mode = sys.argv[1]
torch.manual_seed(0)


class ClampInPlace(nn.Module):
    def forward(self, x):
        x.clamp_(min=-0.5, max=0.5)
        return x * 2


class InPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.clamp = ClampInPlace()
        self.act = nn.ReLU(inplace=True)
        self.pre = nn.Sequential(nn.ReLU(inplace=True), nn.Linear(8, 8))
        self.fc2 = nn.Linear(8, 2)

    def forward(self, x):
        h0 = self.fc1(x)
        h = self.act(h0 + self.clamp(h0))  # h0 is read after the clamp changed it
        h = F.relu(h * 1.5 - 0.2, inplace=True)
        h = h + 0.5
        h.mul_(2)
        h += 1
        c = h.contiguous()  # returns h itself: a later in-place change through c must reach h
        c.unsqueeze_(0)  # in place on shape: h is [1, 3, 8] now
        h = h.squeeze(0)
        h = self.pre(h - 3)
        out = torch.empty(h.shape)
        torch.add(h.detach(), 1, out=out)
        return self.fc2(out + h)


class Fails(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(4, 4)

    def forward(self, x):
        self.inner(x)
        raise ValueError("this block refuses")


class WithFailing(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.bad = Fails()
        self.b = nn.Linear(4, 2)

    def forward(self, x):
        x = self.a(x)
        try:
            x = self.bad(x)
        except ValueError:
            pass
        return self.b(x)


def small():
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))


def batch():
    return torch.randn(3, 4), torch.randint(0, 2, (3,))


if mode == "inplace" or mode == "raises":
    model = InPlace() if mode == "inplace" else WithFailing()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        x, y = batch()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
elif mode in ("closure", "lbfgs"):
    model = small()
    if mode == "closure":
        optimizer, updates = torch.optim.SGD(model.parameters(), lr=0.1), 3
    else:
        optimizer, updates = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=3), 2
    for _ in range(updates):
        x, y = batch()

        def closure():
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            return loss

        optimizer.step(closure)
elif mode == "accum":
    model = small()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for micro in range(4):
        x, y = batch()
        (F.cross_entropy(model(x), y) / 2).backward()
        if micro % 2 == 1:
            optimizer.step()
            optimizer.zero_grad()
elif mode == "wrapped":

    class Wrapping(torch.optim.Optimizer):
        def __init__(self, inner):
            super().__init__([p for group in inner.param_groups for p in group["params"]], {})
            self.inner = inner

        def step(self, closure=None):
            return self.inner.step(closure)

    model = small()
    optimizer = Wrapping(torch.optim.SGD(model.parameters(), lr=0.1))
    for _ in range(2):
        x, y = batch()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
elif mode == "logging":
    model = small()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    tr_loss = torch.tensor(0.0)
    for _ in range(2):
        x, y = batch()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        tr_loss = tr_loss + loss.detach()
    logged = tr_loss.mean().item()  # what HF Trainer does after the last update
    tr_loss -= tr_loss
    print("weights", sum(p.sum() for p in model.parameters()).item())  # grad enabled, requires_grad inputs
elif mode == "nomodule":
    w = torch.randn(4, 2, requires_grad=True)
    for _ in range(2):
        x, y = batch()
        loss = F.cross_entropy(torch.tanh(x @ w), y)
        loss.backward()
        with torch.no_grad():
            w -= 0.1 * w.grad
        w.grad = None
    model = nn.ParameterList([nn.Parameter(w.detach())])
elif mode == "idle":
    model = small()
    print("nothing to train", flush=True)
else:
    raise SystemExit(f"unknown mode {mode}")

if len(sys.argv) > 2:
    with open(sys.argv[2], "w") as out:
        out.write(repr(sum(p.detach().double().sum().item() for p in model.parameters())))
