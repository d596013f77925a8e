"""The Delta lake through delta-rs: exactly-once micro-batch writes, reads for Spark, and the
`dead_letters` table."""
