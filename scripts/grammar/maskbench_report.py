#!/usr/bin/env python3
"""Groups the failures of a maskbench run (bench/grammar/maskbench.cpp --json OUT) by cause.

  python3 scripts/grammar/maskbench_report.py --rows OUT.json [--data .devdata/maskbench]
         [--tokens .devdata/maskbench_qwen3.jsonl --vocab qwen3] [--top 25]

- compile errors: by the error message with names / numbers / regexes folded, so one cause is one line;
- invalid instances the grammar accepted: by the keyword the PyPI `jsonschema` validator (format checks on)
  names as the reason the instance is invalid (best_match) — the constraint the grammar did not enforce;
- valid instances the grammar rejected: the text before the refused token and the token (decoded with tiktoken
  when --tokens is given), or the end of a text that was not accepted as complete;
- the schemas with the slowest single mask (the p99 / max tail).
"""
import argparse
import collections
import json
import os
import re
import sys

import jsonschema


def fold(msg):
    """An error message with its particulars folded, so that one cause groups into one line."""
    m = msg
    m = re.sub(r"regex /.*?/(: )?", "regex /…/: ", m)
    m = re.sub(r"'[^']{0,60}'", "'…'", m) if "keyword" not in m and "format" not in m else m
    m = re.sub(r"(at|in) #/[^ :]*", r"\1 #/…", m)
    m = re.sub(r"\b\d+\b", "N", m)
    return m[:110]


def encoder(which):
    """The tiktoken encoder maskbench_tokenize.py tokenized the instances with (imported lazily: needs tiktoken)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from maskbench_tokenize import encoder as tokenize_encoder
    return tokenize_encoder(which)[0]


def dataset_of(f):
    if "---" in f:
        return f.split("---")[0]
    s = f.rsplit(".", 1)[0]
    return s.rsplit("_", 1)[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", required=True)
    ap.add_argument("--data", default=".devdata/maskbench")
    ap.add_argument("--tokens", default=None)
    ap.add_argument("--vocab", default="qwen3")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    rows = json.load(open(a.rows))
    toks = {}
    if a.tokens:
        want = {r["file"] for r in rows if "valid_rejected" in r}
        for line in open(a.tokens):
            e = json.loads(line)
            if e["file"] in want:
                toks[e["file"]] = e["tokens"]
    enc = encoder(a.vocab) if toks else None

    compile_causes = collections.Counter()
    compile_by_ds = collections.defaultdict(collections.Counter)
    inv_causes = collections.Counter()
    inv_examples = {}
    rej = []
    for r in rows:
        ds = dataset_of(r["file"])
        if "compile_error" in r:
            c = fold(r["compile_error"])
            compile_causes[c] += 1
            compile_by_ds[ds][c] += 1
            continue
        if "invalid_accepted" in r or "valid_rejected" in r:
            d = json.load(open(os.path.join(a.data, r["file"])))
            schema = d["schema"]
        if "invalid_accepted" in r:
            inst = d["tests"][r["invalid_accepted"]]["data"]
            cls = jsonschema.validators.validator_for(schema)
            try:
                err = jsonschema.exceptions.best_match(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(inst))
                key = err.validator if err is None or err.validator != "format" else f"format {err.validator_value}"
                key = "(jsonschema finds it valid)" if err is None else key
            except Exception as ex:  # a schema jsonschema itself cannot evaluate
                key = f"(jsonschema error: {type(ex).__name__})"
            inv_causes[ds + ": " + str(key)] += 1
            inv_examples.setdefault(ds + ": " + str(key), r["file"])
        if "valid_rejected" in r:
            ctx = ""
            ti = r["valid_rejected"]
            at = r.get("reject_at", None)
            if enc and r["file"] in toks and at is not None:
                ids = toks[r["file"]][ti]
                if at < 0:
                    ctx = "complete text not accepted as complete: …" + repr(enc.decode(ids)[-60:])
                else:
                    before = enc.decode(ids[:at])
                    ctx = "…" + repr(before[-70:]) + " ✗ " + repr(enc.decode([ids[at]]))
            rej.append((ds, r["file"], ctx))

    print(f"## Compile errors ({sum(compile_causes.values())}), top {a.top} causes\n")
    for c, n in compile_causes.most_common(a.top):
        print(f"  {n:5d}  {c}")
    print(f"\n## Invalid instances accepted ({sum(inv_causes.values())}), by the keyword jsonschema names\n")
    for c, n in inv_causes.most_common(a.top):
        print(f"  {n:5d}  {c}   e.g. {inv_examples[c]}")
    print(f"\n## Valid instances rejected ({len(rej)})\n")
    for ds, f, ctx in rej[: 3 * a.top]:
        print(f"  {f}: {ctx}")
    timed = [r for r in rows if r.get("mask_tokens")]
    timed.sort(key=lambda r: -r["mask_max_us"])
    print(f"\n## Slowest single masks (schema, max us, mean us over its tokens)\n")
    for r in timed[: a.top // 2]:
        print(f"  {r['mask_max_us']:9.0f}  {r['mask_sum_us'] / r['mask_tokens']:8.1f}  {r['file']}")
    tot = sum(r["mask_sum_us"] for r in timed)
    top1 = sum(r["mask_sum_us"] for r in sorted(timed, key=lambda r: -r["mask_sum_us"])[: max(1, len(timed) // 100)])
    print(f"\n  mask time in the slowest 1% of schemas (by total): {100 * top1 / max(tot, 1e-9):.0f}% of all mask time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
