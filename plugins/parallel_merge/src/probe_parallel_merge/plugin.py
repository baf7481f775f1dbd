"""probe-parallel-merge's hooks: the ``tp``, ``vpp`` and ``pp`` graph mergers."""

from __future__ import annotations

from probe_core.api import GraphMergerSpec, hookimpl


def _tp():
    from probe_parallel_merge.tp import TensorParallelMerger

    return TensorParallelMerger()


def _vpp():
    from probe_parallel_merge.vpp import VirtualPipelineMerger

    return VirtualPipelineMerger()


def _pp():
    from probe_parallel_merge.pp import PipelineParallelMerger

    return PipelineParallelMerger()


@hookimpl
def probe_graph_mergers() -> list[GraphMergerSpec]:
    return [
        GraphMergerSpec("tp", "tensor parallel: merge sharded tensors' statistics (max, min, mean, norm, shape)",
                        _tp, priority=0),
        GraphMergerSpec("vpp", "virtual pipeline: cut stages into model chunks in execution order", _vpp, priority=10),
        GraphMergerSpec("pp", "pipeline parallel: stitch stages in order, renumbering layers and API calls",
                        _pp, priority=20),
    ]
