"""The tables people paste into a log: `df` / `df -i` (a filesystem's use in percent) and a quota report (usage,
soft quota and hard limit, for blocks and for files). `log_scan` walks their rows; this module knows their shapes.
"""

from __future__ import annotations

import re

DF_HEADER = re.compile(r"^\s*Filesystem\s.*?\b(I?Use%)\s+Mounted on\s*$")
DF_INODE_COLUMNS = re.compile(r"\bInodes\b")  # busybox's `df -i` heads its table `Inodes Used Available Use%`
DF_ROW = re.compile(r"^\s*(\S+)\s+(?:\S+\s+){2,3}(\d{1,3})%\s+(/\S*)\s*$")
# the column header of a quota report: block usage, its quota and limit, then the file count, its quota and limit
QUOTA_HEADER = re.compile(r"^\s*Filesystem\b.*?\b(?:blocks|kbytes|space|used|[KMGTP]i?B)\b.*?\bquota\b.*?\blimit\b"
                          r".*?\b(files)\b.*?\bquota\b.*?\blimit\b", re.IGNORECASE)
# one usage / soft quota / hard limit triple of a row ("4096M* 4000M 4500M", "9074608 8250000 9075000")
QUOTA_TRIPLE = re.compile(r"(?<![\w.*])(\d+(?:\.\d+)?)([KMGTP]?)i?B?(\*?)\s+(\d+(?:\.\d+)?)([KMGTP]?)i?B?\*?\s+"
                          r"(\d+(?:\.\d+)?)([KMGTP]?)i?B?\*?(?![\w.])", re.IGNORECASE)
_UNIT = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}
QUOTA_ROWS = 20  # rows read under a quota header


def quota_reached(triple: re.Match[str]) -> bool:
    """Usage at or past its soft quota or its hard limit (0 means none), or starred by the tool as over."""
    def amount(value: str, unit: str) -> float:
        return float(value) * _UNIT[unit.upper()]
    used = amount(triple.group(1), triple.group(2))
    soft = amount(triple.group(4), triple.group(5))
    hard = amount(triple.group(6), triple.group(7))
    return bool(triple.group(3)) or (soft > 0 and used >= soft) or (hard > 0 and used >= hard)
