"""What the three synthetic traffic generators share: one paced producing loop (`sending`)
and Zipf-like popularity draws (`popularity`). Each system's `traffic` package has the same
shape on top of it: `spec.py` (what the traffic looks like), pure seeded generation (the
exact messages of a spec, no I/O) and `kafka.py` (those messages sent with `send_paced`)."""

DEFAULT_START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z, a whole day: where event time starts
