"""probe locate: runs the precision funnel (monitor -> L0 -> mix/tensor -> replay) through probe's own commands."""
