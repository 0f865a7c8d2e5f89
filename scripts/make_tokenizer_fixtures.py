#!/usr/bin/env python3
# make_tokenizer_fixtures.py: trains small byte-level BPE tokenizers with HF `tokenizers` and writes them,
# a held-out Unicode test corpus and the oracle's ids/decodes to tests/fixtures/tokenizer/.
#
#   /opt/venv/bin/python scripts/make_tokenizer_fixtures.py [--out tests/fixtures/tokenizer]
#
# Four tokenizers (the C++ tokenizer must reproduce HF exactly on all of them):
#   qwen35_like   NFC normalizer; Sequence[Split(Qwen3.5 regex, isolated), ByteLevel(use_regex=False)];
#                 special tokens <|endoftext|> <|im_start|> <|im_end|> <think> </think>, plus non-special
#                 normalized added tokens <tool_call> and <café> (matched after NFC).
#   gpt2_like     no normalizer; ByteLevel(use_regex=True, add_prefix_space=False); <|endoftext|>.
#   gpt2_variant  gpt2_like's model with merges as legacy "a b" strings, ignore_merges=true,
#                 add_prefix_space=true and added tokens using lstrip / rstrip / single_word.
#   onig_escapes  qwen35_like's model and added tokens, no normalizer, a Split regex using \w \s (in and out of
#                 brackets), \h and \S (Oniguruma meanings differ from PCRE2's; the C++ side rewrites them).
import argparse
import json
import os
import random
import unicodedata

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

QWEN35_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]

# ---- training corpus: short paragraphs in many scripts, recombined at random ------------------------------
TRAIN_LINES = [
    "The quick brown fox jumps over the lazy dog. It's what they'd done, and we'll see if you're right.",
    "DON'T PANIC! I'M SURE THEY'LL COME BACK; YOU'VE GOT TO BELIEVE IT.",
    "Tokenizers split text into pieces; the pieces are merged by byte pair encoding into tokens.",
    "Le café est très bon, n'est-ce pas ? Où est la bibliothèque ? Ça coûte 12,50 €.",
    "Über die Brücke gehen Mädchen und Jungen; Straße, Größe, Fußgänger.",
    "El niño comió piñas y jalapeños en la mañana; ¿Dónde está? ¡Olé!",
    "Съешь же ещё этих мягких французских булок, да выпей чаю. Привет, мир!",
    "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Καλημέρα κόσμε, τι κάνεις;",
    "مرحبا بالعالم. اللغة العربية جميلة، وهذا نص للتجربة.",
    "שלום עולם. זהו טקסט בעברית לבדיקה.",
    "नमस्ते दुनिया। यह हिंदी में एक परीक्षण वाक्य है।",
    "สวัสดีชาวโลก นี่คือข้อความภาษาไทยสำหรับการทดสอบ",
    "你好，世界！这是一个用于测试的中文句子。我们喜欢学习自然语言处理。",
    "こんにちは世界。これはテスト用の日本語の文です。カタカナとひらがな。",
    "안녕하세요 세계. 이것은 테스트를 위한 한국어 문장입니다.",
    "Emoji: 😀😃😄 👍🏽 👩‍💻 👨‍👩‍👧‍👦 🏳️‍🌈 🇩🇪🇯🇵 ❤️ 🔥🔥🔥",
    "def main(argv):\n    for i in range(10):\n        print(f\"{i:03d}\", end='\\t')\n    return 0\n",
    "int main(int argc, char** argv) {\n\tstd::vector<int> v{1, 2, 3};\n\treturn v.size() > 2 ? 0 : 1;\n}\n",
    "if (x != nullptr && y->next) { z += 42; } // comment\r\nelse { z -= 7; }\r\n",
    "SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name ORDER BY 2 DESC;",
    "   leading spaces and trailing spaces   \n\n\n  multiple\t\ttabs\tand   runs     of    spaces",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 1000 3.14159 2,718 1e-9 0x1F 1_000_000 ٣٤٥ ४५६",
    "Decomposed: cafe\u0301 nai\u0308ve re\u0301sume\u0301 A\u030angstro\u0308m n\u0303 e\u0301le\u0300ve",
    "<|im_start|>user\nHello there!<|im_end|>\n<|im_start|>assistant\n<think>\nhmm\n</think>\n\nHi!<|im_end|>\n",
    "URLs like https://example.com/path?query=1&x=y#frag and emails like a.b@c.org appear often.",
    "Markdown: # Title\n\n- item one\n- item two\n\n```python\nx = [1, 2, 3]\n```\n",
    "JSON: {\"key\": \"value\", \"list\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
    "Mathematical: ∀x∈ℝ, x² ≥ 0; ∑ᵢ aᵢ = ∫ f(x) dx; α β γ δ ε → ∞ ≠ ≈ ≤ ≥",
]


# Alphabets for synthetic Zipf-distributed "languages" (gives the trainer enough distinct pairs).
ALPHABETS = [
    "abcdefghijklmnopqrstuvwxyz", "абвгдежзийклмнопрстуфхцчшщыэюя", "αβγδεζηθικλμνξοπρστυφχψω",
    "ابتثجحخدذرزسشصضطظعغفقكلمنهوي", "אבגדהוזחטיכלמנסעפצקרשת", "कखगघचछजझटठडढणतथदधनपफबभमयरलवशसह",
    "กขคงจฉชซญดตถทนบปผพฟภมยรลวสหอฮ", "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年",
    "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをん",
    "가나다라마바사아자차카타파하거너더러머버서어저처커터퍼허고노도로모보소오조초",
]


def training_texts(n=6000, seed=1):
    rng = random.Random(seed)
    words = " ".join(TRAIN_LINES).split(" ")
    lexicons = [["".join(rng.choice(a) for _ in range(rng.randint(2, 7))) for _ in range(250)] for a in ALPHABETS]
    out = list(TRAIN_LINES) * 20
    for i in range(n):
        k = rng.randint(3, 30)
        if i % 2:
            start = rng.randrange(len(words))
            out.append(" ".join(words[(start + j) % len(words)] for j in range(k)))
        else:  # Zipf-ish word choice from one synthetic language, with some punctuation and digits
            lex = lexicons[rng.randrange(len(lexicons))]
            ws = [lex[min(int(rng.paretovariate(1.0)) - 1, len(lex) - 1)] for _ in range(k)]
            out.append(" ".join(ws) + rng.choice([".", ",", "!", "?", "。", " 42", "\n"]))
    return out


# ---- held-out test corpus (never trained on verbatim) ------------------------------------------------------
CHATML = ("<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
          "<|im_start|>assistant\n<think>\n\n</think>\n\n")
TEST_TEXTS = [
    "", " ", "  ", "\n", "\r\n", "\t", " \t \n ", "a", "A", "0", "é", "e\u0301",
    "Hello, world!", "Hello world", " Hello world", "Hello  world  ", "hello\n\nworld\r\n\r\nend",
    "It's DON'T we'LL they'D I'M you'RE 'S 's'T 'Ve 'ſ 'K",
    "Quick brown foxes didn't jump; they'd rather sleep.",
    "Façade, naïve, coöperate, résumé — déjà vu.", "Fac\u0327ade nai\u0308ve re\u0301sume\u0301 (decomposed)",
    "Hangul jamo: \u1100\u1161\u11a8 \u1112\u1161\u11ab", "Ångström vs A\u030angstro\u0308m",
    "Москва — столица России. Ёлка, щука, объём.", "Αθήνα είναι η πρωτεύουσα της Ελλάδας.",
    "القاهرة هي عاصمة مصر، وعدد سكانها كبير جداً. مُحَمَّد", "ירושלים היא עיר עתיקה. שָׁלוֹם",
    "भारत एक विशाल देश है। क्षत्रिय", "ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "北京是中国的首都。東京は日本の首都です。", "ひらがな カタカナ ｶﾀｶﾅ 漢字かな交じり文",
    "서울은 한국의 수도입니다.", "Mixed: English, Русский, 中文, العربية, हिन्दी, ไทย, 한국어 in one line.",
    "👋🏻👋🏼👋🏽👋🏾👋🏿", "👨‍👩‍👧‍👦 family, 👩🏽‍🔬 scientist, 🧑‍🤝‍🧑 pair", "🏴‍☠️ 🏳️‍⚧️ 🇺🇳🇪🇺",
    "Emoji in text😀without spaces😃and🔥punctuation!!!", "❤️‍🔥 ❤ ♥ ☺️ ✌🏿",
    "𝐁𝐨𝐥𝐝 𝑰𝒕𝒂𝒍𝒊𝒄 𝔉𝔯𝔞𝔨𝔱𝔲𝔯 𝟙𝟚𝟛", "Private use: \ue000\uf8ff and noncharacter \ufdd0, BOM \ufeffhere",
    "NBSP:\u00a0here, ideographic:\u3000here, line sep:\u2028here, NEL:\u0085here, ZWSP:\u200bhere",
    "en\u2002em\u2003thin\u2009hair\u200a narrow\u202fmath\u205f.",
    "Digits 1234567890 and ٠١٢٣٤٥٦٧٨٩ and ०१२३ and ①②③ and Ⅻ and ½",
    "3.14159265358979323846264338327950288419716939937510",
    "def f(x):\n\treturn x**2  # square\n\n\nclass A:\n    pass\n",
    "for (int i = 0; i < n; ++i) {\n    sum += a[i] * b[i];\n}\n",
    "if(a&&b||!c){return;}else{x<<=2;y>>=3;z^=~w;}", "    \n    \n        indented\n",
    "trailing spaces   \n   and tabs\t\t\n\t", "CRLF line one\r\nline two\r\n\r\n",
    "Mac line\rbreaks\rhere", "many          spaces          between", " " * 40, "\n" * 7,
    "a" * 300, "ab" * 150, "😀" * 20, "the" + "e" * 100 + "nd",
    "<|endoftext|>", "<|im_start|>", "text<|im_end|>more", "<|im_start|>user\nWhat is 2+2?<|im_end|>\n",
    "<think>reasoning here</think>answer", "<<|im_end|>>", "<|im_en", "<|im_start|<|im_end|>",
    "<|endoftext|><|endoftext|><|endoftext|>", " <|im_end|> ", "x <|im_end|>\n\n<|im_start|>y",
    "<tool_call>\n{\"name\": \"f\"}\n</tool_call>", "cafe\u0301 and <café> and <cafe\u0301>",
    "<mask> My name <mask> A<mask> <mask>ony <mask>", "Hi <mask> there\t<mask>\t<mask>\u2000",
    "[SEP]   next [SEP]\n", "Anthony ony tony ony. ony", "a new token here, new tokens", "ñandú ñandúes",
    "Ellipsis… “quotes” ‘single’ «guillemets» „German“ 「Japanese」 【brackets】",
    "Zalgo: Z̴̡̢a̷̛͜l̶̨̛g̵̡̛o̸̧͝ text", "Combining only: \u0301\u0302\u0303 at start",
    "Control chars: \x01\x02\x1b[31mred\x1b[0m \x7f end", "Tab\tseparated\tvalues\t1\t2\t3",
    "email: someone@example.org, url: http://x.y/z?a=b&c=d", "C:\\Program Files\\App\\bin\\app.exe",
    "$$E = mc^2$$ and \\frac{a}{b} in LaTeX", "#hashtag @mention $100 50% 3×4=12 ±0.5°C",
    "Mongolian vowel separator (not White_Space for onig): \u180e's and \r\n\u180e[SEP] x\u180e y",
    "hex deadBEEF 0x1f9 ½ Ⅻ ①, snake_case_name, con‿nector, a\u0301b\u0327 ٣٤, tab\there",
    CHATML,
]


def build_qwen35_like(train):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN35_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=3000, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(train, trainer)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    tok.add_tokens([AddedToken("<tool_call>", special=False, normalized=True),
                    AddedToken("<café>", special=False, normalized=True)])
    return tok


def build_gpt2_like(train):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2500, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(train, trainer)
    tok.add_special_tokens([AddedToken("<|endoftext|>", special=True, normalized=False)])
    return tok


def build_gpt2_variant(gpt2_json):
    j = json.loads(gpt2_json)
    j["model"]["ignore_merges"] = True
    j["pre_tokenizer"]["add_prefix_space"] = True
    tok = Tokenizer.from_str(json.dumps(j))
    tok.add_special_tokens([AddedToken("<mask>", special=True, normalized=False, lstrip=True, rstrip=True,
                                       single_word=True),
                            AddedToken("[SEP]", special=True, normalized=False, rstrip=True)])
    tok.add_tokens([AddedToken("ony", special=False, single_word=True),
                    AddedToken("new token", special=False),  # contains a space: decoded from raw bytes
                    AddedToken("ñandú", special=False)])     # non-ASCII added token (HF decode quirk)
    return tok


def build_onig_escapes(qwen_json):
    j = json.loads(qwen_json)
    j["normalizer"] = None
    j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {"Regex": r"\h+|[\w']+|[^\w\s]|\s+(?!\S)|\s"}
    return Tokenizer.from_str(json.dumps(j))


def expected(tok, texts, nfc):
    cases = []
    for t in texts:
        ids = tok.encode(t, add_special_tokens=False).ids
        dec = tok.decode(ids, skip_special_tokens=False)
        want = unicodedata.normalize("NFC", t) if nfc else t
        cases.append({"ids": ids, "decoded": dec, "decoded_skip_special": tok.decode(ids, skip_special_tokens=True),
                      "roundtrip": dec == want})
    # Random id sequences (byte-level pieces that split UTF-8 characters) check the lossy decode.
    rng = random.Random(7)
    n = tok.get_vocab_size(with_added_tokens=True)
    rand = []
    for _ in range(40):
        ids = [rng.randrange(n) for _ in range(rng.randint(1, 12))]
        rand.append({"ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)})
    single = [tok.decode([i], skip_special_tokens=False) for i in range(n)]
    return {"tokenizers_version": tokenizers.__version__, "cases": cases, "random_decodes": rand,
            "single_decodes": single}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "tokenizer"))
    out = os.path.normpath(ap.parse_args().out)
    train = training_texts()
    q = build_qwen35_like(train)
    g = build_gpt2_like(train)
    v = build_gpt2_variant(g.to_str())
    configs = {
        "qwen35_like": (q, True, {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}),
        "gpt2_like": (g, False, None),
        "gpt2_variant": (v, False, {"eos_token": {"content": "[SEP]", "__type": "AddedToken"}}),
        "onig_escapes": (build_onig_escapes(q.to_str()), False, None),
    }
    with open(os.path.join(out, "corpus.json"), "w", encoding="utf-8") as f:
        json.dump(TEST_TEXTS, f, ensure_ascii=False, indent=0)
    for name, (tok, nfc, cfg) in configs.items():
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "tokenizer.json")
        tok.save(path, pretty=False)
        if name == "gpt2_variant":  # rewrite merges in the legacy "a b" string form (older tokenizer.json files)
            with open(path, encoding="utf-8") as f:
                j = json.load(f)
            j["model"]["merges"] = [" ".join(m) for m in j["model"]["merges"]]
            with open(path, "w", encoding="utf-8") as f:
                json.dump(j, f, ensure_ascii=False, separators=(",", ":"))
        if cfg:
            with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
                json.dump(cfg, f, ensure_ascii=False, indent=1)
        # Reload from disk so the goldens come from exactly the file the C++ side reads.
        tok = Tokenizer.from_file(path)
        with open(os.path.join(d, "expected.json"), "w", encoding="utf-8") as f:
            json.dump(expected(tok, TEST_TEXTS, nfc), f, ensure_ascii=False, separators=(",", ":"))
        with open(path, encoding="utf-8") as f:
            merges = json.load(f)["model"]["merges"]
        rt = sum(c["roundtrip"] for c in expected(tok, TEST_TEXTS, nfc)["cases"])
        print(f"{name}: vocab {tok.get_vocab_size()} merges {len(merges)} ({type(merges[0]).__name__}) "
              f"texts {len(TEST_TEXTS)} exact round trips {rt}")
    with open(os.path.join(out, "README.md"), "w", encoding="utf-8") as f:
        f.write("# Tokenizer fixtures\n\nGenerated by `scripts/make_tokenizer_fixtures.py` with HF "
                f"`tokenizers` {tokenizers.__version__} (the oracle). Folders: qwen35_like (NFC + Qwen3.5 Split regex + "
                "ByteLevel), gpt2_like (GPT-2 ByteLevel regex), gpt2_variant (legacy merges, ignore_merges, "
                "add_prefix_space, lstrip/rstrip/single_word added tokens), onig_escapes (\\w \\h \\s in a Split "
                "regex). Each folder holds a tokenizer.json, "
                "an optional tokenizer_config.json and expected.json: for every text of corpus.json the ids of "
                "`encode(text, add_special_tokens=False)`, `decode(ids)` with and without skipping special "
                "tokens, plus decodes of random id sequences and of every single id.\n")


if __name__ == "__main__":
    main()
