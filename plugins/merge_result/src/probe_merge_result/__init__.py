"""probe-merge-result: ``probe merge-result``, one table per metric across the ranks' compare results
(msprobe's ``merge_result``): :func:`probe_merge_result.merge.merge_results`, the CLI in
:mod:`probe_merge_result.plugin`."""
