"""Installing what a cell failed to import (opt-in: ``SCRATCHPAD_AUTO_INSTALL=1``).

A cell that ends on ``ModuleNotFoundError: No module named 'cv2'`` names a module, not a
package: :data:`PACKAGES` maps the usual import names whose package is called otherwise
(``cv2`` → ``opencv-python``). Only a name that is a valid PEP 508 requirement and not a
module of the standard library is ever installed. The runtime installs it, says so in the
cell's logs and runs the cell once more (``LocalRuntime``).
"""

from __future__ import annotations

import re
import sys

from scratchpad.runtime.cell import Cell
from scratchpad.runtime.render import last_error_line

# Import names whose distribution has another name (the same name needs no entry).
PACKAGES = {
    "Bio": "biopython",
    "Crypto": "pycryptodome",
    "Levenshtein": "python-Levenshtein",
    "MySQLdb": "mysqlclient",
    "OpenSSL": "pyOpenSSL",
    "PIL": "pillow",
    "attr": "attrs",
    "bs4": "beautifulsoup4",
    "cv2": "opencv-python",
    "dateutil": "python-dateutil",
    "docx": "python-docx",
    "dotenv": "python-dotenv",
    "faiss": "faiss-cpu",
    "fitz": "PyMuPDF",
    "git": "GitPython",
    "jose": "python-jose",
    "jwt": "PyJWT",
    "magic": "python-magic",
    "multipart": "python-multipart",
    "osgeo": "GDAL",
    "pptx": "python-pptx",
    "psycopg2": "psycopg2-binary",
    "serial": "pyserial",
    "skimage": "scikit-image",
    "sklearn": "scikit-learn",
    "slugify": "python-slugify",
    "umap": "umap-learn",
    "usb": "pyusb",
    "yaml": "PyYAML",
    "zmq": "pyzmq",
}
_MISSING = re.compile(r"^ModuleNotFoundError: No module named '([^'\n]{1,200})'$")
_PEP508_NAME = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.IGNORECASE)


def missing_module(cell: Cell) -> str | None:
    """The module a failed cell could not import (the last line of its traceback), if any."""
    if cell.status != "error" or not cell.error:
        return None
    found = _MISSING.match(last_error_line(cell.error))
    return found.group(1) if found else None


def package_for(module: str) -> str | None:
    """The distribution to install for ``module`` (its top-level name, mapped), or None when
    that is no valid PEP 508 name or is part of the standard library (nothing to install)."""
    top = module.split(".", 1)[0]
    if not top or top.startswith("_") or top in sys.stdlib_module_names:
        return None
    package = PACKAGES.get(top, top)
    return package if _PEP508_NAME.match(package) else None


def start_over(cell: Cell) -> None:
    """Clear what the failed run left in ``cell`` before it runs again (its id, code and
    description stay)."""
    cell.stdout = cell.stderr = cell.logs = ""
    cell.error = cell.result = None
    cell.outputs = []
    cell.outputs_at = []
    cell.status = "ok"
    cell.duration_s = 0.0
