"""The file spark-submit runs: the `tideline` CLI, from a folder holding nothing else.

spark-submit puts the script's folder first on sys.path; running spark_jobs/cli.py directly
would let its sibling packages (kafka, lake, ...) shadow top-level modules.
"""

import sys

from spark_jobs.cli import main

if __name__ == "__main__":
    sys.exit(main())
