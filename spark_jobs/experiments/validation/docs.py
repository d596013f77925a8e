"""Great Expectations Data Docs in `validation.data_docs`: one HTML site for every run.

The context is ephemeral (no great_expectations.yml, suites come from `expectations/`), but
its validation results are kept on disk beside the site, so each build lists every earlier
run too, whichever process (Airflow task, CLI) made it.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlparse

from great_expectations.data_context.types.base import (
    DataContextConfig,
    InMemoryStoreBackendDefaults,
    ProgressBarsConfig,
)

SITE_NAME = "tideline"
RESULTS_FOLDER = "_validation_results"


class DataDocsLocationError(ValueError):
    """validation.data_docs is not a local folder."""


def docs_folder(location: str) -> Path:
    """The local folder of the site (a plain path or a file:// URI)."""
    parsed = urlparse(location)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if parsed.scheme and len(parsed.scheme) > 1:  # one letter: a Windows drive
        raise DataDocsLocationError(
            f"validation.data_docs must be a local folder, got {location!r}; set it explicitly "
            "when lake.root is an object store"
        )
    return Path(location)


def context_config(folder: Path) -> DataContextConfig:
    """In-memory suites and definitions; results and the HTML site under `folder`."""
    tree = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(),
        progress_bars=ProgressBarsConfig(globally=False),
    ).to_json_dict()
    tree["stores"][tree["validation_results_store_name"]]["store_backend"] = {
        "class_name": "TupleFilesystemStoreBackend",
        "base_directory": str(folder / RESULTS_FOLDER),
    }
    tree["data_docs_sites"] = {
        SITE_NAME: {
            "class_name": "SiteBuilder",
            "show_how_to_buttons": False,
            "store_backend": {
                "class_name": "TupleFilesystemStoreBackend",
                "base_directory": str(folder),
            },
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        }
    }
    return DataContextConfig(**tree)


def url_to_path(url: str | None) -> str | None:
    """A file:// URL from GX as a plain path (other URLs unchanged)."""
    if url and url.startswith("file://"):
        return unquote(urlparse(url).path)
    return url


_UNSAFE = re.compile(r"[^A-Za-z0-9._+=-]")


def safe_name(text: str) -> str:
    """A GX store key part: no path separators (Airflow run ids hold ':' and '+')."""
    return _UNSAFE.sub("_", text)
