"""Writing a safetensors file whose bytes depend only on its tensors and metadata.

The safetensors library keeps the header's ``__metadata__`` in a hash map, so the order of its keys (and with
it the file's bytes) changes from one process to the next: the same model saved twice gave two files that
``cmp`` or a checksum calls different. `write_safetensors` writes the file with the library, then rewrites the
header in place with the metadata keys in sorted order. The tensors' entries keep the library's order (it is
already fixed: by dtype alignment, then name), and the data after the header is not touched.

The header is ``8-byte little-endian length N`` + ``N bytes of JSON`` (padded with spaces so the data starts on
an 8-byte boundary). The canonical header is the same JSON object with compact separators and raw UTF-8,
which is how the library writes it, so it has the same length; it is padded with spaces to N.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from uatlab.io_safety import atomic_path


def canonical_header(header: bytes) -> bytes:
    """``header`` (the JSON after the length field, padding included) with ``__metadata__`` first and its keys
    sorted, then every tensor entry in its original order; compact separators, raw UTF-8, no padding."""
    doc = json.loads(header.decode("utf-8"))
    out: dict[str, Any] = {}
    if "__metadata__" in doc:
        out["__metadata__"] = dict(sorted(doc["__metadata__"].items()))
    out.update((k, v) for k, v in doc.items() if k != "__metadata__")
    return json.dumps(out, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def canonicalize_header(path: str | os.PathLike) -> None:
    """Rewrite the header of the safetensors file at ``path`` in place as `canonical_header`, padded with spaces
    to its present length (the data offsets are relative to the data's start, which does not move)."""
    with open(path, "r+b") as fh:
        n = int.from_bytes(fh.read(8), "little")
        new = canonical_header(fh.read(n))
        if len(new) > n:  # not from the library's writer (its header is already this compact)
            raise ValueError(f"{path}: the safetensors header in canonical form ({len(new)} bytes) exceeds {n}")
        fh.seek(8)
        fh.write(new + b" " * (n - len(new)))


def write_safetensors(tensors: dict[str, Any], path: str | os.PathLike, metadata: dict[str, str]) -> Path:
    """Write torch ``tensors`` and ``metadata`` to ``path`` atomically (a temporary file beside it, renamed over it
    once complete; removed on failure or interrupt) with a canonical header: the same tensors and metadata give
    the same bytes in every process."""
    from safetensors.torch import save_file

    path = Path(path)
    with atomic_path(path) as tmp:  # mode from the umask
        save_file(tensors, str(tmp), metadata=metadata)
        canonicalize_header(tmp)
    return path
