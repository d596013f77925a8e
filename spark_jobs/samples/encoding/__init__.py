"""Message encodings of the training_samples job: versioned Avro schemas kept in the repo.

`registry` loads the schema files (`schemas/training_sample.v<N>.avsc`, N = the schema id on
the wire) and checks that each version stays compatible with the one before; `sample_avro`
checks the configured signals against a schema and encodes and decodes samples in the
Confluent wire format.
"""
