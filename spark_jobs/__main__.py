"""`python -m spark_jobs` and the file spark-submit runs: the `tideline` CLI.

spark-submit puts this file's folder first on sys.path, so no name at the top of
spark_jobs/ may be the name of a standard-library or installed module (a test checks).
"""

import sys

from spark_jobs.cli import main

if __name__ == "__main__":
    sys.exit(main())
