"""Load checks run by the remote's own Python, for files too large (or too many) to pull first.

One static script, the paths as its arguments: zip members' CRCs (torch archives, .npz) and the
safetensors header/offset rules, reading only headers and streaming CRCs, so it is cheap on the box.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import BaseModel

from mcp_gpu.transport import Transport

SCRIPT = r"""
import json, struct, sys, zipfile, os
def st(p):
    size = os.path.getsize(p)
    with open(p, "rb") as f:
        raw = f.read(8)
        if len(raw) < 8: return False, "shorter than 8 bytes"
        (n,) = struct.unpack("<Q", raw)
        if 8 + n > size: return False, f"header length {n} past end of file"
        h = json.loads(f.read(n))
    pos, spans = 0, sorted((m["data_offsets"][0], m["data_offsets"][1], k) for k, m in h.items() if k != "__metadata__")
    for b, e, k in spans:
        if b != pos: return False, f"tensor {k} not contiguous"
        pos = e
    if pos != size - 8 - n: return False, f"tensors cover {pos} of {size - 8 - n} data bytes"
    return True, f"{len(spans)} tensors"
for p in sys.argv[1:]:
    r = {"path": p}
    try:
        if p.endswith(".safetensors"):
            r["check"] = "safetensors header+offsets"; r["ok"], r["detail"] = st(p)
        elif zipfile.is_zipfile(p):
            with zipfile.ZipFile(p) as z:
                bad = z.testzip()
            r["check"] = "zip CRC"; r["ok"] = bad is None; r["detail"] = f"CRC error in {bad}" if bad else ""
        else:
            with open(p, "rb") as f:
                head = f.read(4)
            r["check"] = "format"; r["ok"] = not head.startswith(b"PK")
            r["detail"] = "truncated zip (no central directory)" if head.startswith(b"PK") else "no remote check for this kind"
    except Exception as e:
        r["ok"], r["check"], r["detail"] = False, r.get("check", "open"), f"{type(e).__name__}: {e}"[:300]
    print(json.dumps(r), flush=True)
"""


class RemoteCheck(BaseModel):
    path: str
    ok: bool
    check: str
    detail: str = ""


async def remote_checks(transport: Transport, paths: Sequence[str], *, timeout: float = 3600) -> dict[str, RemoteCheck]:
    """Run the probe over `paths` (remote); an absent python3 yields an empty dict and no error."""
    if not paths:
        return {}
    res = await transport.run(["python3", "-c", SCRIPT, *paths], timeout=timeout)
    out: dict[str, RemoteCheck] = {}
    for line in res.stdout.splitlines():
        try:
            rc = RemoteCheck.model_validate(json.loads(line))
        except ValueError:
            continue
        out[rc.path] = rc
    return out
