"""The trace itself in the HTML report, for its "Open in Perfetto" button (templates/timeline.js).

Perfetto's UI (https://ui.perfetto.dev) takes a trace posted to it: the report opens it in a new tab, sends
'PING' until the UI answers 'PONG', then posts {perfetto: {buffer, title, fileName}} (docs: "Deep linking to
the Perfetto UI"). The UI reads gzipped JSON itself, so the buffer is the trace's gzip bytes, kept in the page
as base64 in a data block (<script type="application/octet-stream">, which is never run: the CSP stays as is).
The step (or the worst finding's event) is given as the URL's visStart/visEnd (ns, the trace's clock).

What is embedded (`--embed-trace` on `kernlint report`):
- "auto" (the default): a kineto JSON trace whose gzip is at most AUTO_LIMIT bytes, all the report's traces
  together at most AUTO_LIMIT (a plain JSON trace is gzipped first when it is at most 16x that);
- "always": every kineto JSON trace, whatever its size (the report grows by 4/3 of the gzip);
- "never": none.
A trace not embedded gets what to do instead: open ui.perfetto.dev and pick the file, named.
"""
from __future__ import annotations

import base64
import os
import zlib
from dataclasses import dataclass

AUTO_LIMIT = 2 * 1024 * 1024      # bytes of gzip embedded without asking (the report grows by 4/3 of it)
MODES = ("auto", "always", "never")
GZIP_MAGIC = b"\x1f\x8b"


@dataclass
class Embedded:
    path: str
    file_name: str
    data: str = ""          # base64 of the gzipped trace; "" when not embedded
    size: int = 0           # bytes of the gzip embedded, or of the file on disk when not
    why_not: str = ""       # why it is not embedded, in words
    opens_in_perfetto: bool = True   # a kineto trace; another source's file (an nsys SQLite export) does not


def _is_json_trace(path: str) -> tuple[bool, bool]:
    """(a kineto JSON trace, gzipped) from the file's first bytes."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
    except OSError:
        return False, False
    if head.startswith(GZIP_MAGIC):
        return True, True
    return head.lstrip()[:1] in (b"{", b"["), False


def _gzip_bytes(path: str, gzipped: bool) -> bytes:
    """The file's bytes when gzipped already, else its gzip, compressed as it is read (4 MB at a time)."""
    with open(path, "rb") as fh:
        if gzipped:
            return fh.read()
        packer = zlib.compressobj(6, zlib.DEFLATED, 31)   # wbits 31: a gzip stream
        parts = [packer.compress(chunk) for chunk in iter(lambda: fh.read(4 << 20), b"")]
    return b"".join(parts) + packer.flush()


def _source_name(path: str) -> str:
    """The trace source that reads `path` (kernlint.trace.sources); a part of a multi-process file by its file."""
    from kernlint.trace.sources import source_of, split_entry

    try:
        return source_of(split_entry(path)[0]).name
    except OSError:
        return "kineto"


def embed_traces(paths: list[str], mode: str = "auto", limit: int = AUTO_LIMIT) -> dict[str, Embedded]:
    """Each path's Embedded, in the order given; the budget of "auto" goes to the first traces."""
    out: dict[str, Embedded] = {}
    budget = limit
    for path in paths:
        name = os.path.basename(path)
        item = out[path] = Embedded(path, name)
        source = _source_name(path)
        if source != "kineto":   # Perfetto reads Chrome-trace JSON (and its own formats), not an nsys export
            item.opens_in_perfetto = False
            item.why_not = f"Perfetto does not open this {source} trace; open it in the tool that recorded it"
            continue
        if mode == "never":
            item.why_not = "--embed-trace never"
            continue
        if not os.path.isfile(path):
            item.why_not = ("it is not one file kernlint can read now (a part of a multi-process file, standard input, "
                            "a temporary file)")
            continue
        is_json, gzipped = _is_json_trace(path)
        size = os.path.getsize(path)
        item.size = size
        if not is_json:
            item.why_not = "it is not a JSON trace"
            continue
        if mode == "auto" and (size > budget if gzipped else size > 16 * budget):
            item.why_not = (f"it is {size / 1e6:.1f} MB on disk, over the {limit / 1e6:.0f} MB a report embeds by "
                            "default; `kernlint report --embed-trace always` embeds it")
            continue
        data = _gzip_bytes(path, gzipped)
        if mode == "auto" and len(data) > budget:
            item.why_not = (f"it is {len(data) / 1e6:.1f} MB gzipped, over the {limit / 1e6:.0f} MB a report embeds "
                            "by default; `kernlint report --embed-trace always` embeds it")
            continue
        budget -= len(data)
        item.data = base64.b64encode(data).decode("ascii")
        item.size = len(data)
    return out
