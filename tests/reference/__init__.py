"""Independent reference implementations used to check the Spark jobs' results."""
