"""The experiment pipeline's pure logic (no Spark): the metric declarations, periods and
ramps, capping, per-user metrics, cumulative group windows, tumbling windows and the batch
metrics."""
