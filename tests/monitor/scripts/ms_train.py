"""A small MindSpore PyNative training script for the monitor tests.

    python ms_train.py [--steps N] [--monitor CONFIG] [--out DIR] [--optimizer adam|adamw] [--save FILE]
"""

import argparse

import numpy as np

import mindspore as ms
from mindspore import nn, ops


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(6, 8)
        self.fc2 = nn.Dense(8, 3)

    def construct(self, x):
        return self.fc2(ops.tanh(self.fc1(x)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--monitor")
    parser.add_argument("--out")
    parser.add_argument("--optimizer", default="adam")
    parser.add_argument("--save")
    args = parser.parse_args()
    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_seed(0)
    net = Net()
    kind = {"adam": nn.Adam, "adamw": nn.AdamWeightDecay}[args.optimizer]
    optimizer = kind(net.trainable_params(), learning_rate=1e-2)
    if args.monitor:
        from probe_mindspore import TrainerMon

        monitor = TrainerMon(args.monitor, params_have_main_grad=False, output_dir=args.out)
        monitor.set_monitor(net, optimizer)
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    grad_fn = ms.value_and_grad(lambda x, y: loss_fn(net(x), y), None, optimizer.parameters)
    losses = []
    for step in range(args.steps):
        rng = np.random.default_rng(step)
        x = ms.Tensor(rng.standard_normal((16, 6)).astype(np.float32))
        y = ms.Tensor(rng.integers(0, 3, 16).astype(np.int32))
        loss, grads = grad_fn(x, y)
        optimizer(grads)
        losses.append(loss.asnumpy())
    if args.save:
        np.savez(args.save, losses=np.stack(losses), **{p.name: p.asnumpy() for p in net.trainable_params()})
    print("done", float(losses[-1]))


if __name__ == "__main__":
    main()
