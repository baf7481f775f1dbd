"""probe-data2db: ``probe data2db --db DIR --data DIR``, dump data and monitor output into SQLite in msprobe's
trend-database schema (``dump_data.trend.db``, ``monitor_data.trend.db``): the schema and writer in
:mod:`probe_data2db.trenddb`, the two sources in :mod:`probe_data2db.dump_rows` and
:mod:`probe_data2db.monitor_rows`, the CLI in :mod:`probe_data2db.plugin`."""
