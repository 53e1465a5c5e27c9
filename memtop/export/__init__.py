"""memtop as a Prometheus / OpenMetrics exporter: ``memtop export`` (a scrape endpoint and a
textfile for node_exporter) and the backfill of recordings (``memtop export --replay``).

``metrics`` turns the state into metric families (no I/O); ``server`` runs the Runner headless
and serves them; ``backfill`` writes a recording as timestamped OpenMetrics."""
