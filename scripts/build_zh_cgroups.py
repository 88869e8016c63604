"""Build src/bertcorpus/transforms/conversion-groups/zh_cgroups.json.zst, the snapshot of zhwiki's common conversion
groups that NoteTA's G1=NAME parameters refer to, from the Module:CGroup pages as zhconv-rs's repository extracts
them (one JSON file a group, with its name, description and rules) at data/cgroups/.

    python scripts/build_zh_cgroups.py PATH/TO/zhconv-rs/data/cgroups

A group is looked up by its name and by its description (the title editors use in G1=, such as 物理學), each also
in simplified and in traditional characters. The groups' text is zhwiki's, CC BY-SA 4.0.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import zstandard
from zhconv_rs import zhconv

OUT = Path(__file__).resolve().parents[1] / "src/bertcorpus/transforms/conversion-groups/zh_cgroups.json.zst"
_MARKUP = re.compile(r"[\[\]{}|<>=]")


def main(folder: str) -> None:
    groups, aliases = {}, {}
    for path in sorted(Path(folder).glob("*.json")):
        group = json.loads(path.read_text(encoding="utf-8"))
        name = group["name"].strip()
        rules = [r["conv"] for r in group["rules"] if r.get("conv")]
        if not rules:
            continue
        groups[name] = rules
        for alias in (name, (group.get("description") or "").strip()):
            if alias and not _MARKUP.search(alias):
                for form in {alias, zhconv(alias, "zh-Hans"), zhconv(alias, "zh-Hant")}:
                    aliases.setdefault(form, name)
    aliases = {alias: name for alias, name in sorted(aliases.items()) if alias != name}
    data = json.dumps({"groups": groups, "aliases": aliases}, ensure_ascii=False, sort_keys=True).encode()
    OUT.write_bytes(zstandard.ZstdCompressor(level=19).compress(data))
    print(f"{len(groups)} groups, {len(aliases)} aliases, {OUT.stat().st_size:,} bytes → {OUT}")


if __name__ == "__main__":
    main(sys.argv[1])
