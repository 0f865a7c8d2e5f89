# The exact prefix cache behind `ember serve` (runtime/prefix_cache.h): a prompt that starts like an earlier one
# resumes from the deepest checkpoint (every 256 tokens), and its reply is the reply of a server without the cache
# — the same tokens and the same log-probabilities — on the hybrid Qwen3.5 fixture (GDN recurrent state + KV) and on
# SmolLM2 (Llama family, KV only). usage.prompt_tokens_details.cached_tokens and /metrics report the reuse.
import pytest

from conftest import SMOLLM2, Server, need_smollm2

openai = pytest.importorskip("openai")


def completions(server, prompts):
    c = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=300)
    out = []
    for p in prompts:
        r = c.completions.create(model="", prompt=p, max_tokens=6, temperature=0, logprobs=2)
        out.append((r.choices[0].text, r.choices[0].logprobs.token_logprobs, r.usage))
    return out


def check_cache(model, base, name):
    prompts = [base + " first", base + " first", base[: len(base) // 2] + " and then something else entirely"]
    cached = Server(model, "--max-seqs", "2", name=name)
    plain = Server(model, "--max-seqs", "2", "--prefix-cache-mib", "0", name=name + "-off")
    try:
        with_cache, without = completions(cached, prompts), completions(plain, prompts)
        got = [u.prompt_tokens_details.cached_tokens for _, _, u in with_cache]
        n = [u.prompt_tokens for _, _, u in with_cache]
        assert got[0] == 0
        assert got[1] == (n[1] - 1) // 256 * 256 and got[1] >= 512, (got, n)  # every whole block but the last token
        assert 256 <= got[2] < n[2], (got, n)
        assert [u.prompt_tokens_details.cached_tokens for _, _, u in without] == [0, 0, 0]
        for (t1, lp1, u1), (t2, lp2, u2) in zip(with_cache, without):
            assert t1 == t2 and lp1 == lp2 and u1.prompt_tokens == u2.prompt_tokens
        m = cached.idle_metrics()
        assert m["ember_prefix_cache_hits_total"] == 2 and m["ember_prompt_tokens_cached_total"] == got[1] + got[2]
        assert m["ember_prefix_cache_entries"] >= 2 and 0 < m["ember_prefix_cache_bytes"] <= (1024 << 20)
        assert plain.idle_metrics()["ember_prefix_cache_budget_bytes"] == 0
        # The start line says what the server made (the same value as the budget metric).
        assert "prefix cache 1024 MiB" in cached.start_line and m["ember_prefix_cache_budget_bytes"] == 1024 << 20
        assert "prefix cache off" in plain.start_line
    finally:
        assert cached.stop() == 0 and plain.stop() == 0


def test_prefix_cache_hybrid_qwen35(qwen35_dir):
    # The fixture's tokenizer is byte-level: one token per byte.
    base = "".join(f"line {i}: the quick brown fox. " for i in range(30))
    assert 700 < len(base) < 1000
    check_cache(qwen35_dir, base, "prefix-qwen35")


def test_prefix_cache_llama_smollm2():
    need_smollm2()
    base = " ".join(f"Item {i} is a {'red' if i % 2 else 'blue'} box." for i in range(90))
    check_cache(SMOLLM2, base, "prefix-smollm2")
