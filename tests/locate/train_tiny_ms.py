"""A tiny MindSpore (PyNative, CPU) training loop for probe locate's tests, written with no knowledge of probe.

An MLP (``Dense``, a ``GELU`` cell calling ``ops.gelu``, ``Dense``) trained with ``nn.Adam`` on
``twin_data``'s weights and batches, the same as its PyTorch twin ``train_tiny_pt.py``. ``--gelu-tanh-from N``
switches the GELU to its tanh approximation from step N on; ``--steps S`` (default 4). Under msrun (more than one
rank) the gradients are averaged over the ranks and each rank takes its own batches; ``--gelu-tanh-from`` then
switches the GELU of the last rank only.
"""

import argparse
import os

import mindspore as ms
from mindspore import nn, ops

import twin_data

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=4)
parser.add_argument("--gelu-tanh-from", type=int, default=None)
args = parser.parse_args()

ms.set_device("CPU")
ranks = int(os.environ.get("MS_WORKER_NUM", "1"))
rank = 0
if ranks > 1:
    from mindspore.communication import get_rank, init

    init()
    rank = get_rank()


class GELU(nn.Cell):
    def __init__(self) -> None:
        super().__init__()
        self.approximate = "none"

    def construct(self, x):
        return ops.gelu(x, approximate=self.approximate)


model = nn.SequentialCell(nn.Dense(8, 16), GELU(), nn.Dense(16, 4))
for name, param in model.parameters_and_names():
    param.set_data(ms.Tensor(twin_data.weights()[name]))
optimizer = nn.Adam(model.trainable_params(), learning_rate=1e-2, eps=1e-12)
reducer = nn.DistributedGradReducer(optimizer.parameters) if ranks > 1 else None


def loss_of(x, y):
    return ops.cross_entropy(model(x), y)


grad_fn = ms.value_and_grad(loss_of, None, optimizer.parameters)
for step, (x, y) in enumerate(twin_data.batches(args.steps * ranks)[rank::ranks]):
    if args.gelu_tanh_from is not None and step >= args.gelu_tanh_from and rank == ranks - 1:
        model[1].approximate = "tanh"
    loss, grads = grad_fn(ms.Tensor(x), ms.Tensor(y))
    optimizer(reducer(grads) if reducer else grads)
    print(f"step {step}: loss {float(loss):.6f}", flush=True)
