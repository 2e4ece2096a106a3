"""Run code in a fresh Python where this package cannot be imported: what a user who installed
only `transformers` sees. Reusable by any test that checks a saved folder with stock tools.

    out = run_stock('''
        from transformers import AutoModel
        model = AutoModel.from_pretrained(FOLDER)
        result = {"cls": type(model).__name__}
    ''', FOLDER=str(folder))
    assert out["result"]["cls"] == "BertModel"
    assert not model_type_warnings(out["warnings"])

The code runs with ``modeling`` and ``recipes`` blocked (``import modeling`` raises), the
checkout off ``sys.path`` and ``PYTHONPATH``, ``HF_HUB_OFFLINE=1`` and a private remote-code
module cache. Keyword arguments become global variables of the code (JSON-serialisable
values). The code leaves what it wants to return in a global ``result``; every warning issued
through Python's ``warnings`` or the ``transformers`` logger comes back in ``warnings``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MARKER = "@@STOCK_RESULT@@"

_PRELUDE = """
import json, logging, os, sys, warnings
_blocked = {os.path.realpath(p) for p in %(blocked)r}
sys.path = [p for p in sys.path if os.path.realpath(p or os.getcwd()) not in _blocked]
for _name in ("modeling", "recipes"):
    sys.modules[_name] = None  # this project's packages must not be importable here
_warnings = []
warnings.simplefilter("always")
warnings.showwarning = lambda message, category, *a, **k: _warnings.append(
    f"{category.__name__}: {message}")

class _Capture(logging.Handler):
    def emit(self, record):
        _warnings.append(f"{record.name}: {record.getMessage()}")

import transformers
transformers.logging.set_verbosity_warning()
transformers.logging.get_logger().addHandler(_Capture(logging.WARNING))
logging.getLogger("huggingface_hub").addHandler(_Capture(logging.WARNING))
globals().update(json.loads(%(params)r))
result = None
"""

_EPILOGUE = """
print(%(marker)r + json.dumps({"result": result, "warnings": _warnings}, default=str))
"""


def run_stock(code: str, *, timeout: float = 900, env: dict | None = None, **params) -> dict:
    """Run ``code`` in a clean subprocess; return ``{"result": ..., "warnings": [...]}``.

    Raises ``AssertionError`` with the end of stderr when the code fails.
    """
    script = (
        _PRELUDE % {"blocked": [str(REPO), os.getcwd()], "params": json.dumps(params)}
        + textwrap.dedent(code)
        + _EPILOGUE % {"marker": MARKER}
    )
    with tempfile.TemporaryDirectory(prefix="stock-env-") as cwd:
        run_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        run_env.update(
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            HF_MODULES_CACHE=str(Path(cwd) / "modules"),
            TOKENIZERS_PARALLELISM="false",
        )
        run_env.update(env or {})
        proc = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            env=run_env,
            cwd=cwd,
            timeout=timeout,
        )
    if proc.returncode != 0 or MARKER not in proc.stdout:
        raise AssertionError(
            f"stock subprocess failed (rc {proc.returncode}):\n{proc.stderr[-4000:]}"
        )
    return json.loads(proc.stdout.rsplit(MARKER, 1)[1])


_MODEL_TYPE = re.compile(r"model.type|model of type|not recogni[sz]e|Unrecognized", re.IGNORECASE)


def model_type_warnings(warnings: list[str]) -> list[str]:
    """The warnings that are about the model type (e.g. "You are using a model of type X to
    instantiate a model of type Y")."""
    return [w for w in warnings if _MODEL_TYPE.search(w)]
