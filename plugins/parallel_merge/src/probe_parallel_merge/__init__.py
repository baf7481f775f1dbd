"""probe graph mergers for tensor, pipeline and virtual-pipeline parallelism."""
