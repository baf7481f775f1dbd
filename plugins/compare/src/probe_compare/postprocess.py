"""``probe compare --config FILE``: msprobe's tensor post-process config (tensor mode).

Before two tensors are compared, named tensors are multiplied by calibration tensors (quantisation
scenarios: a weight stored pre-multiplied on one side)::

    right_matmul:       {target_tensor_map: {calib.pt: [data_name, ...]}, golden_tensor_map: {...}}
    left_matmul:        {target_tensor_map: {...}, golden_tensor_map: {...}}
    left_right_matmul:  {left_target_tensor_map: {...}, right_target_tensor_map: {...},
                         left_golden_tensor_map: {...}, right_golden_tensor_map: {...}}

:func:`load_postprocess` reads it into ``{(side, data_name): [(direction, calibration file), ...]}``
(side ``npu``/``bench``, direction ``left``/``right``, applied in order); the tensor comparator applies it.
"""

from __future__ import annotations

from pathlib import Path

from probe_core.api import CompareError

Steps = dict[tuple[str, str], list[tuple[str, str]]]

#: section -> [(key, side, direction)] in the order msprobe applies them.
_SECTIONS = {
    "right_matmul": [("target_tensor_map", "npu", "right"), ("golden_tensor_map", "bench", "right")],
    "left_matmul": [("target_tensor_map", "npu", "left"), ("golden_tensor_map", "bench", "left")],
    "left_right_matmul": [("left_target_tensor_map", "npu", "left"), ("right_target_tensor_map", "npu", "right"),
                          ("left_golden_tensor_map", "bench", "left"), ("right_golden_tensor_map", "bench", "right")],
}
SHAPE = "right_matmul/left_matmul/left_right_matmul: {target_tensor_map: {calibration.pt: [data_name, ...]}, ...}"


def load_postprocess(path: Path) -> Steps:
    from probe_compare.mapping import _read_yaml

    data = _read_yaml(path, "--config", SHAPE) or {}
    if not isinstance(data, dict):
        raise CompareError(f"--config {path}: expected {SHAPE}")
    unknown = sorted(set(data) - set(_SECTIONS))
    if unknown:
        raise CompareError(f"--config {path}: unknown section(s) {unknown}; a tensor post-process config has "
                           f"{', '.join(_SECTIONS)} (probe's own config.json goes with -c)")
    steps: Steps = {}
    for section, keys in _SECTIONS.items():
        body = data.get(section) or {}
        if not isinstance(body, dict):
            raise CompareError(f"--config {path}: '{section}' must be a mapping; expected {SHAPE}")
        for key, side, direction in keys:
            for calibration, names in (body.get(key) or {}).items():
                if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                    raise CompareError(f"--config {path}: {section}.{key}.{calibration} must list data names")
                where = Path(calibration)
                if not where.is_file() and not where.is_absolute():
                    where = path.parent / where
                if not where.is_file():
                    raise CompareError(f"--config {path}: {section}.{key}: calibration tensor {calibration} not "
                                       "found (a relative path is read from the current folder, then from the "
                                       "config's)")
                for name in names:
                    steps.setdefault((side, name), []).append((direction, str(where)))
    return steps
