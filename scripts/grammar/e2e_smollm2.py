#!/usr/bin/env python3
"""End-to-end structured output: SmolLM2-135M-Instruct (Q4_1 GGUF, scripts/fetch-smollm2.sh) generates under N JSON
Schemas from JSONSchemaBench with `ember generate --json-schema`; every output is checked with the PyPI `jsonschema`
package (the independent validator, format assertions on). Schemas ember refuses to compile are skipped (counted).

  python3 scripts/grammar/e2e_smollm2.py [--n 50] [--subset tests/fixtures/maskbench/subset.jsonl] [--device cpu]
Prints one line per schema and a summary; exit status 1 if any output fails validation.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import jsonschema


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--subset", default="tests/fixtures/maskbench/subset.jsonl")
    ap.add_argument("--ember", default="build/bin/ember")
    ap.add_argument("--model", default=None)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--max-tokens", type=int, default=768)
    a = ap.parse_args()
    model = a.model or subprocess.run(["bash", "scripts/fetch-smollm2.sh"], capture_output=True, text=True, check=True).stdout.strip()
    schemas = [json.loads(l) for l in open(a.subset)]
    ok = bad = refused = 0
    for e in schemas:
        if ok + bad >= a.n:
            break
        schema = e["schema"]
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(schema, f)
            path = f.name
        prompt = "Write one JSON value that follows this JSON Schema:\n" + json.dumps(schema)[:1500]
        r = subprocess.run([a.ember, "generate", "-m", model, "--chat", "-p", prompt, "--json-schema", path,
                            "-n", str(a.max_tokens), "--device", a.device, "--temp", "0.7", "--seed", "1", "--threads", "1"],
                           capture_output=True, text=True)
        os.unlink(path)
        if r.returncode != 0:
            if "not supported" in r.stderr or "may overlap" in r.stderr:
                refused += 1
                print(f"refused   {e['file']}: {r.stderr.strip()[:120]}")
                continue
            bad += 1
            print(f"ERROR     {e['file']}: {r.stderr.strip()[:200]}")
            continue
        out = r.stdout
        head = prompt + "\n"
        text = out[len(head):] if out.startswith(head) else out
        text = text[:-1] if text.endswith("\n") else text
        try:
            inst = json.loads(text)
            cls = jsonschema.validators.validator_for(schema)
            cls(schema, format_checker=cls.FORMAT_CHECKER).validate(inst)
            ok += 1
            print(f"valid     {e['file']}: {len(text)} chars")
        except Exception as ex:  # invalid JSON or schema violation
            bad += 1
            print(f"INVALID   {e['file']}: {str(ex)[:160]} | output: {text[:200]!r}")
    print(f"e2e-smollm2: {ok} valid, {bad} invalid, {refused} refused (of {ok + bad + refused} schemas)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
