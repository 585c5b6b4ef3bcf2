"""What cells can call beyond plain Python: rich display, figure capture, ``sample()``.

Loaded inside the kernel on first use (as ``_scratchpad_helpers``), standard library only;
pandas, numpy and matplotlib are recognised by duck typing and never imported here, so an idle
pad stays small. ``progress()`` and ``display()`` themselves live on the kernel (worker.py).
"""

from __future__ import annotations

import base64
import sys
from typing import Any

PREVIEW_CHARS = 2000
FULL_CHARS = 10000

# Jupyter's rich-repr protocol: method name → mime type.
REPR_METHODS = (
    ("_repr_png_", "image/png"),
    ("_repr_jpeg_", "image/jpeg"),
    ("_repr_svg_", "image/svg+xml"),
    ("_repr_html_", "text/html"),
    ("_repr_markdown_", "text/markdown"),
    ("_repr_latex_", "text/latex"),
    ("_repr_json_", "application/json"),
)
BINARY_MIMES = {"image/png", "image/jpeg"}


def mime_bundle(obj: object) -> dict[str, Any]:
    """A Jupyter-style mime bundle for ``obj``; binary images are base64 text."""
    bundle: dict[str, Any] = {}
    if _is_matplotlib_figure(obj):
        bundle["image/png"] = _figure_png(obj)
    mimebundle = getattr(obj, "_repr_mimebundle_", None)
    if callable(mimebundle):
        bundle.update(_call_repr(mimebundle) or {})
    for method, mime in REPR_METHODS:
        if mime in bundle or isinstance(obj, type):
            continue
        fn = getattr(obj, method, None)
        if callable(fn):
            data = _call_repr(fn)
            if data is not None:
                bundle[mime] = data
    for mime in BINARY_MIMES & bundle.keys():
        if isinstance(bundle[mime], bytes):
            bundle[mime] = base64.b64encode(bundle[mime]).decode("ascii")
    bundle.setdefault("text/plain", _safe_repr(obj))
    return bundle


def capture_figures() -> None:
    """Send every open matplotlib figure as an image/png display, then close them all."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    import _scratchpad_kernel

    kernel = _scratchpad_kernel.KERNEL
    for number in pyplot.get_fignums():
        figure = pyplot.figure(number)
        bundle = {"image/png": _figure_png(figure), "text/plain": repr(figure)}
        if kernel is not None:
            kernel.show(bundle)
    pyplot.close("all")


def sample(value: object, mode: str = "preview") -> str:
    """A type-aware view of ``value``, capped at 2000 (preview) or 10000 (full) characters."""
    if mode not in ("preview", "full"):
        raise ValueError(f"sample() mode must be 'preview' or 'full', not {mode!r}")
    full = mode == "full"
    cap = FULL_CHARS if full else PREVIEW_CHARS
    text = _describe(value, full)
    if len(text) > cap:
        text = text[:cap] + f"\n[... {len(text) - cap} more characters; sample(x, 'full') ...]"
    return text


def _describe(value: object, full: bool) -> str:
    kind = type(value)
    module = kind.__module__ or ""
    rows = 50 if full else 5
    if module.startswith("pandas") and kind.__name__ == "DataFrame":
        return _describe_dataframe(value, rows)
    if module.startswith("pandas") and kind.__name__ == "Series":
        return _describe_series(value, rows)
    if module.startswith("numpy") and kind.__name__ == "ndarray":
        return _describe_ndarray(value, full)
    width = 200 if full else 60
    if isinstance(value, dict):
        return _describe_mapping(value, 200 if full else 20, width)
    if isinstance(value, (list, tuple)):
        return _describe_sequence(value, 200 if full else 10, width)
    if isinstance(value, (set, frozenset)):
        items = sorted(_safe_repr(v) for v in value)[: 200 if full else 20]
        return f"{kind.__name__} of {len(value)} items: {{{', '.join(items)}}}"
    if isinstance(value, str):
        return f"str of {len(value)} chars:\n{value if full else _ends(value, 800)}"
    if isinstance(value, (bytes, bytearray)):
        shown = bytes(value) if full else bytes(value[:256])
        return f"{kind.__name__} of {len(value)} bytes: {shown!r}"
    return f"{kind.__module__}.{kind.__qualname__}: {_safe_repr(value)}"


def _describe_dataframe(frame: Any, rows: int) -> str:
    dtypes = ", ".join(f"{col}: {dtype}" for col, dtype in frame.dtypes.items())
    return (
        f"DataFrame {frame.shape[0]} rows × {frame.shape[1]} columns\n"
        f"dtypes: {dtypes}\n{frame.head(rows).to_string()}"
    )


def _describe_series(series: Any, rows: int) -> str:
    return (
        f"Series {series.name!r}, {len(series)} values, dtype {series.dtype}\n"
        f"{series.head(rows).to_string()}"
    )


def _describe_ndarray(array: Any, full: bool) -> str:
    head = f"ndarray shape={array.shape} dtype={array.dtype}"
    if array.size and array.dtype.kind in "biuf":
        head += f" min={array.min()} max={array.max()} mean={array.mean():.6g}"
    import numpy

    with numpy.printoptions(threshold=1000 if full else 20, edgeitems=3):
        return f"{head}\n{array!r}"


def _describe_mapping(mapping: dict[Any, Any], limit: int, width: int) -> str:
    lines = [f"dict of {len(mapping)} keys"]
    for index, (key, val) in enumerate(mapping.items()):
        if index == limit:
            lines.append(f"  ... {len(mapping) - limit} more keys")
            break
        lines.append(f"  {key!r}: {type(val).__name__} = {_ends(_safe_repr(val), width)}")
    return "\n".join(lines)


def _describe_sequence(items: list[Any] | tuple[Any, ...], limit: int, width: int) -> str:
    kinds = sorted({type(v).__name__ for v in items[:1000]})
    lines = [f"{type(items).__name__} of {len(items)} items (types: {', '.join(kinds) or '-'})"]
    for index, val in enumerate(items[:limit]):
        lines.append(f"  [{index}] {_ends(_safe_repr(val), width)}")
    if len(items) > limit:
        lines.append(f"  ... {len(items) - limit} more items")
    return "\n".join(lines)


def _ends(text: str, keep: int) -> str:
    if len(text) <= keep:
        return text
    half = keep // 2
    return f"{text[:half]} [... {len(text) - keep} chars ...] {text[-half:]}"


def _safe_repr(obj: object) -> str:
    try:
        return repr(obj)
    except Exception as exc:
        return f"<{type(obj).__name__}: repr failed with {exc!r}>"


def _call_repr(fn: Any) -> Any:
    try:
        return fn()
    except Exception:
        return None


def _is_matplotlib_figure(obj: object) -> bool:
    return any(
        cls.__module__ == "matplotlib.figure" and cls.__name__ == "Figure"
        for cls in type(obj).__mro__
    )


def _figure_png(figure: Any) -> str:
    import io

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")
