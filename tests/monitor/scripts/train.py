"""A small training script the monitor tests run, unmodified or with TrainerMon, under a few "bugs".

    python train.py [--steps N] [--monitor CONFIG] [--out DIR] [--lr-change-step S] [--scale-grad-of LAYER]
                    [--nan-grad-step S] [--spike-step S] [--closure] [--optimizer adam|adamw|sgd] [--save FILE]

``--save`` writes the losses and final parameters (torch.save) for bitwise comparisons.
"""

import argparse

import torch
import torch.nn.functional as F


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 16)
        self.fc3 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc3(torch.tanh(self.fc2(torch.tanh(self.fc1(x)))))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--monitor", help="a monitor config: use TrainerMon from probe_torch")
    parser.add_argument("--out", help="TrainerMon output_dir")
    parser.add_argument("--lr-change-step", type=int)
    parser.add_argument("--scale-grad-of", help="a layer whose gradient a bug scales by 1.01 (fc1, fc2, fc3)")
    parser.add_argument("--nan-grad-step", type=int)
    parser.add_argument("--spike-step", type=int, help="a step whose loss (so every gradient) is 1000x")
    parser.add_argument("--closure", action="store_true")
    parser.add_argument("--optimizer", default="adam")
    parser.add_argument("--save")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = Net()
    kind = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}[args.optimizer]
    optimizer = kind(model.parameters(), lr=1e-2)
    if args.monitor:
        from probe_torch import TrainerMon

        monitor = TrainerMon(args.monitor, params_have_main_grad=False, output_dir=args.out)
        monitor.set_monitor(model, optimizer)
    if args.scale_grad_of:  # the bug: the gradient entering one layer (from above) is scaled
        getattr(model, args.scale_grad_of).register_full_backward_pre_hook(lambda m, g: (g[0] * 1.01,))
    losses = []
    for step in range(args.steps):
        g = torch.Generator().manual_seed(100 + step)
        x, y = torch.randn(32, 8, generator=g), torch.randint(0, 4, (32,), generator=g)
        if args.lr_change_step is not None and step == args.lr_change_step:
            for group in optimizer.param_groups:
                group["lr"] = 2e-2

        def closure():
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            (loss * (1000.0 if step == args.spike_step else 1.0)).backward()
            if step == args.nan_grad_step:
                model.fc2.weight.grad[0, 0] = float("nan")
            return loss

        if args.closure:
            loss = optimizer.step(closure)
        else:
            loss = closure()
            optimizer.step()
        losses.append(loss.detach().clone())
    if args.save:
        torch.save({"losses": losses, "params": {k: v.clone() for k, v in model.state_dict().items()}}, args.save)
    print("done", float(losses[-1]))


if __name__ == "__main__":
    main()
