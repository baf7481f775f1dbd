"""One tiny training run under msprobe's TrainerMon or probe's (the same script, the same numbers):

    python two_tools.py msprobe|probe CONFIG [--steps N]

The output goes to ``$MONITOR_OUTPUT_DIR`` (both tools read it).
"""

import argparse

import torch
import torch.nn.functional as F


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("tool", choices=["msprobe", "probe"])
    parser.add_argument("config")
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    if args.tool == "msprobe":
        from msprobe.pytorch import TrainerMon
    else:
        from probe_torch import TrainerMon
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    TrainerMon(args.config, params_have_main_grad=False).set_monitor(model, optimizer)
    for step in range(args.steps):
        g = torch.Generator().manual_seed(100 + step)
        x, y = torch.randn(32, 8, generator=g), torch.randint(0, 4, (32,), generator=g)
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
    print("done")


if __name__ == "__main__":
    main()
