#!/usr/bin/env python3
"""Writes the MaskBench (JSONSchemaBench) subset committed for CI: tests/fixtures/maskbench/subset.jsonl.

From a local copy of guidance-ai/jsonschemabench maskbench/data (kept git-ignored under .devdata/maskbench), takes
per dataset the first --per files (sorted by name) that have tests and are under --max-bytes, skipping the
schemas listed in --exclude (known engine failures, listed in the README). Each line: {"file", "schema",
"tests": [{"text": json.dumps(data, ensure_ascii=False) as MaskBench's runner writes it, "valid": bool}]}. The
valid/invalid labels are the dataset's (the independent oracle); nothing here comes from ember.
"""
import argparse
import glob
import json
import os

DATASETS = ["Github_trivial", "Github_easy", "Github_medium", "Github_hard", "Github_ultra", "Glaiveai2K",
            "Kubernetes", "Snowplow", "WashingtonPost", "JsonSchemaStore"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=".devdata/maskbench")
    ap.add_argument("--out", default="tests/fixtures/maskbench/subset.jsonl")
    ap.add_argument("--per", type=int, default=8)
    ap.add_argument("--max-bytes", type=int, default=6000)
    ap.add_argument("--exclude", nargs="*", default=[])
    a = ap.parse_args()
    n = 0
    with open(a.out, "w") as out:
        for ds in DATASETS:
            k = 0
            for f in sorted(glob.glob(os.path.join(a.data, ds + "---*.json"))):
                name = os.path.basename(f)
                if k >= a.per or name in a.exclude or os.path.getsize(f) > a.max_bytes:
                    continue
                d = json.load(open(f))
                if not d["tests"]:
                    continue
                tests = [{"text": json.dumps(t["data"], indent=None, ensure_ascii=False), "valid": t["valid"]} for t in d["tests"]]
                out.write(json.dumps({"file": name, "schema": d["schema"], "tests": tests}, ensure_ascii=False) + "\n")
                k += 1
                n += 1
    print(f"{n} schemas -> {a.out}")


if __name__ == "__main__":
    main()
