"""Long-running monitors on the one sampler: the Prometheus exporter (:mod:`.exporter`)."""
