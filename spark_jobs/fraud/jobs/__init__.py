"""The fraud_rules streaming job: its plan, its sinks and the driver-side engine state."""
