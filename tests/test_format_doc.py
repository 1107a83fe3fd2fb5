#!/usr/bin/python3
"""weights/FORMAT.md names every metadata key and tensor the loader reads: each quoted key
("tokenizer.bpe_tokens", ...), each family key read through fkey(c, "name") (documented as
`marian.name`, `whisper.name`, ...) and each fixed tensor name in model/load.c must appear in
the document, so a new family or key cannot land undocumented (the whisper family once did)."""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAMILIES = ("marian", "m2m_100", "mbart", "t5", "whisper")


def sources(*patterns):
    text = ""
    for p in patterns:
        for path in sorted(glob.glob(os.path.join(ROOT, p))):
            with open(path, encoding="utf-8") as f:
                text += f.read()
    return text


def main():
    with open(os.path.join(ROOT, "weights", "FORMAT.md"), encoding="utf-8") as f:
        doc = f.read()
    code = sources("model/*.c", "tokenizer/*.c")
    keys = set(k for k in re.findall(r'"((?:tokenizer|generation|attend|general|%s)\.[a-z_0-9]+)"' % "|".join(FAMILIES), code) if not k.endswith(".h"))
    family_keys = set(re.findall(r'fkey\(c, "([a-z_0-9]+)"\)', code))
    tensors = set(re.findall(r'"((?:enc|dec)\.[a-z_0-9]+(?:\.[a-z_0-9]+)*|lm_head\.weight|final_logits_bias)"',
                             sources("model/load.c")))
    passed = failed = 0

    def check(ok, what):
        nonlocal passed, failed
        print(("ok   " if ok else "FAIL ") + what)
        passed += ok
        failed += not ok

    check(len(keys) > 20 and len(family_keys) > 30 and len(tensors) > 15,
          f"the loader's names were found ({len(keys)} keys, {len(family_keys)} family keys, {len(tensors)} tensors)")
    missing = sorted(k for k in keys if f"`{k}`" not in doc)
    check(not missing, "every quoted key is documented" + (f": missing {missing}" if missing else ""))
    missing = sorted(k for k in family_keys if not any(f"{fam}.{k}" in doc for fam in FAMILIES))
    check(not missing, "every family key is documented" + (f": missing {missing}" if missing else ""))
    missing = sorted(t for t in tensors if t not in doc)
    check(not missing, "every fixed tensor name is documented" + (f": missing {missing}" if missing else ""))
    for fam in FAMILIES:
        check(f"### `{fam}` specifics" in doc or fam == "marian", f"the {fam} family has its section")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
