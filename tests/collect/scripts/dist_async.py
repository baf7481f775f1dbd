"""Two ranks on CPU with gloo (run under torchrun): collectives with async_op=True, recorded at wait()."""

import sys

import torch
import torch.distributed as dist

from probe_torch import PrecisionDebugger

dist.init_process_group("gloo")
rank = dist.get_rank()
debugger = PrecisionDebugger(dump_path=sys.argv[1], level="L1")
dist.barrier()  # every rank has checked the dump path before any writes into it
debugger.start()
summed = torch.full((3,), float(rank + 1))
work = dist.all_reduce(summed, async_op=True)
work.wait()
peer = torch.full((2,), float(rank + 10)) if rank == 0 else torch.zeros(2)
sent = dist.isend(peer, 1) if rank == 0 else dist.irecv(peer, 0)
sent.wait()
debugger.stop()
debugger.step()
dist.barrier()  # both ranks have written before either lets go of the dump path (a rank that finishes first
debugger.close()  # drops the run marker, and the slower one would take the folder for an earlier run's)
dist.destroy_process_group()
