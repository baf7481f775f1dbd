"""The dump reader: probe's and msprobe's dumps, read lazily.

Public API (stable; ``probe compare`` and ``probe graph`` build on it)::

    from probe_core.dump import discover, RankDump, DumpEntry, TensorMeta

    for dump in discover("dump_root", ranks=[0], steps=None, lenient=False):
        dump.step, dump.rank            # from step{N} / rank{N}|rank|proc{pid} folder names (or None)
        dump.framework, dump.task, dump.level, dump.mode(registry)   # the DataMode that reads it
        dump.construct                  # {node: parent or None}   (construct.json)
        dump.stacks                     # {entry: (stack lines...)} (stack.json)
        for entry in dump.entries():    # streamed in execution order, bounded memory
            entry.name, entry.index, entry.parent, entry.stack, entry.data
            entry.parsed                # EntryName: kind ("api"|"module"|"parameters_grad"|"debug"),
                                        #   base, direction, count, module_path, module_class
            for leaf in entry.leaves(): # TensorMeta: name "…forward.input.0", role, dtype, shape,
                entry.tensor_path(leaf) #   max/min/mean/norm, requires_grad, data_name, value, raw
        refs = dump.index()             # [EntryRef(name, index, start, end)]: one pass, no values kept
        with dump:                      # random access by byte span
            entry = dump.load(refs[3])

Errors are :class:`probe_core.errors.DumpError` naming the file, line,
column and byte. ``lenient=True`` keeps the entries before a fault and warns
(:class:`probe_core.plugins.ProbeWarning`). ``NaN``/``Infinity``/``-Infinity``
tokens are read as floats.
"""

from probe_core.dump.discover import discover
from probe_core.dump.leaves import TensorMeta, iter_leaves
from probe_core.dump.names import EntryName, parse_entry_name
from probe_core.dump.reader import DumpEntry, EntryRef, RankDump

__all__ = [
    "DumpEntry",
    "EntryName",
    "EntryRef",
    "RankDump",
    "TensorMeta",
    "discover",
    "iter_leaves",
    "parse_entry_name",
]
