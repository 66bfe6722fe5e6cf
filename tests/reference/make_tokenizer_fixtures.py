#!/usr/bin/env python3
"""Writes the tokenizer / chat-template / dataset fixtures of tests/unit/test_tokenizer.c, test_chat.c and
test_dataset.c (issue 5), from the Hugging Face reference implementations:

  tokenizers (Rust, via Python)  Tokenizer.encode(text, add_special_tokens=False).ids and .decode(ids)
  transformers                   apply_chat_template(messages, tokenize=False, add_generation_prompt=...)

Outputs, all under tests/data/tokenizer/:
  qwen3_corpus.jsonl.zst  {"cat", "text" | "hex", "ids", ["decoded"], ["decoded_skip"]} per case:
                          every prompt of data/*.jsonl, GSM8K and MATH-500 solutions, hand-written cases (code,
                          CJK, Arabic, emoji ZWJ, whitespace runs, CRLF, digit runs, contractions, special tokens
                          in text, NFC, long words), seeded random strings, and invalid UTF-8 ("hex": the raw bytes;
                          the reference input is bytes.decode("utf-8", "replace")). "decoded" is present when HF
                          decode(ids) differs from the text; "decoded_skip" when skip_special_tokens changes it.
  chat_cases.jsonl        {"family", "config", "messages", "add_generation_prompt", "text", "ids"}
  qwen2.5/tokenizer_config.json, llama3/tokenizer_config.json   the template fixtures (written here)
  tiny_encode.jsonl       {"text", "ids", "decoded"} with data/tokenizers/tiny (run tools/train_tiny_tokenizer.py first)
  dataset_ids.jsonl       {"file", "line", "ids"}: HF ids of the Qwen3 chat rendering of dataset lines
  variants.jsonl.zst      {"variant", "text", "ids"}: the Qwen3 tokenizer.json edited (as VARIANTS below, which
                          tests/unit/test_tokenizer.c repeats with jansson) to exercise the other supported paths:
                          Llama-3 regex (\p{N}{1,3}) + ignore_merges + no normalizer; GPT-2 ByteLevel(use_regex,
                          add_prefix_space); Split + ByteLevel(add_prefix_space)

Run from the repository root: python3 tests/reference/make_tokenizer_fixtures.py (needs the `zstd` command,
Debian package zstd, and data/tokenizers/tiny from tools/train_tiny_tokenizer.py)
"""
import json
import os
import random
import subprocess
import sys

import tokenizers
import transformers
from tokenizers import Tokenizer
from transformers import AutoTokenizer, PreTrainedTokenizerFast

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "data", "tokenizer")
QWEN3 = os.path.join(ROOT, "data", "tokenizers", "qwen3")
TINY = os.path.join(ROOT, "data", "tokenizers", "tiny")
DATA_FILES = ["aime-2024.jsonl", "gsm8k-test.jsonl", "gsm8k-train.jsonl", "math500-test.jsonl"]

sys.path.insert(0, os.path.join(ROOT, "tools"))
from train_tiny_tokenizer import QWEN25_TEMPLATE  # noqa: E402  (Qwen2.5-Instruct's template, one copy)

# Meta-Llama-3-8B-Instruct tokenizer_config.json chat_template.
LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)


def hand_cases():
    c = []
    add = lambda cat, t: c.append((cat, t))
    for t in ["Hello, world!", "I'm sure it's what they'd've said; we'll see. You're right, I've been.",
              "IT'S LOUD AND I'LL SHOUT, THEY'RE HERE, WE'VE WON, I'D GO, I'M OUT", "don’t can’t won’t",
              "'s 't 're 've 'm 'll 'd", "rock'n'roll o'clock 'quoted'"]:
        add("contractions", t)
    for t in ["def f(x):\n    return x**2  # square\n", "int main(void) {\n\tprintf(\"%d\\n\", 42);\r\n}\r\n",
              "for (i = 0; i < n; ++i) { a[i] += b[i] * c; }", "    \t  \n\n\n   x = [1, 2, 3]\n\t\t\ty = {'a': 1}",
              "```python\nimport numpy as np\nprint(np.arange(10))\n```", "<div class=\"x\">&nbsp;</div>",
              "SELECT * FROM t WHERE id IN (1,2,3);", "https://example.com/path?q=1&r=%20x#frag"]:
        add("code", t)
    for t in ["你好，世界！今天天气很好。", "日本語のテキストです。カタカナとひらがな。", "한국어 텍스트입니다.",
              "中文数字一二三和阿拉伯数字123混合", "【注意】「引用」『二重』（括弧）"]:
        add("cjk", t)
    for t in ["مرحبا بالعالم", "السلام عليكم ورحمة الله ١٢٣٤٥", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก",
              "Привет, мир! Ёжик.", "Γειά σου Κόσμε αβγ ΑΒΓ", "Ünïcödé çàfé naïve résumé"]:
        add("scripts", t)
    for t in ["😀😃😄", "👨‍👩‍👧‍👦 family", "🏳️‍🌈 flag", "👍🏽 thumbs", "🧑🏿‍💻 coder", "❤️‍🔥", "🇺🇸🇯🇵 flags",
              "emoji in text 🎉 done 🎉🎉"]:
        add("emoji", t)
    for t in [" ", "  ", "\t", "\n", "\n\n\n", " \n \n ", "a  b   c    d", "trailing   ", "   leading", "\r\n",
              "line1\r\nline2\r\n\r\nline3", "\r", "a\rb", "tabs\t\tand\t spaces", " " * 200, "\n" * 50,
              "x" + " " * 70 + "y", "\u00a0nbsp\u00a0\u00a0x", "\u3000ideographic\u3000space", "nel\u0085x\u0085\u0085",
              "em\u2003space\u2002en", "zero\u200bwidth", "\u2028line\u2029para", "\x0bvt\x0cff\x1cfs"]:
        add("whitespace", t)
    for t in ["1234567890", "3.14159265358979323846264338327950288419716939937510", "1,000,000.00",
              "0" * 100, "12345678901234567890123456789012345678901234567890" * 3, "x^2 + 2x + 1 = 0",
              "１２３ full-width", "² ³ ¼ ½ Ⅻ ⅻ ① ⑩", "٣٤٥ ۴۵۶ ४५६"]:
        add("digits", t)
    for t in ["<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", "text<|endoftext|>more", "<think>\nhm\n</think>\n\nok",
              "a<|im_end|><|im_end|>b", "<|im_start|>", "<|im_start", "<|im_start|<|im_end|>", "<tool_call>{}</tool_call>",
              "x <|fim_prefix|> y <|fim_suffix|> z <|fim_middle|>", "<|vision_start|><|image_pad|><|vision_end|>",
              "   <|im_end|>   ", "<|endoftext|>"]:
        add("special", t)
    for t in ["e\u0301", "Cafe\u0301", "\u212b", "\u0041\u030a", "\uac00\u11a8", "\u1100\u1161\u11a8", "\u00c5",
              "o\u0308\u0301", "\u1e9b\u0323", "\ufb01 ligature", "\u2126 ohm", "q\u0307\u0323"]:
        add("nfc", t)
    for t in ["a" * 300, "ab" * 150, "Ġ" * 50, "x" * 1000, "supercalifragilisticexpialidocious" * 5,
              "abcdefghijklmnopqrstuvwxyz" * 10, "=" * 120, "-" * 64 + ">", "!" * 100, "😀" * 60,
              "aGVsbG8gd29ybGQgdGhpcyBpcyBhIGxvbmcgYmFzZTY0IHN0cmluZyB3aXRob3V0IHNwYWNlcw==" * 4]:
        add("long", t)
    for t in ["$\\frac{\\pi}{2}$", "\\[\\int_0^1 x^2\\,dx = \\frac{1}{3}\\]", "\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}",
              "$$\\sum_{k=1}^{n} k = \\frac{n(n+1)}{2}$$", "\\begin{pmatrix} 1 & 0 \\\\ 0 & 1 \\end{pmatrix}",
              "90^\\circ", "\\text{Evelyn}", "$x \\in \\mathbb{R}$, $\\sqrt[3]{8}=2$", "≤ ≥ ≠ ∞ ∑ ∏ ∫ √ π θ"]:
        add("latex", t)
    for t in ["", "a", "\x00", "nul\x00inside", "\x01\x02\x03", "\ufffd", "\U0010ffff", "\ue000 private",
              "\ufeffbom", "mixed: é中😀\t\n 1'S"]:
        add("misc", t)
    # code points that are letters / digits in tokenizers' Oniguruma (Unicode 16) but not in PCRE2 10.42's
    # Unicode 14 tables (tokenizer.c adds them to \p{L} / \p{N}); first and last of each range, in context
    for a, b in [(0x1C89, 0x1C8A), (0xA7CB, 0xA7CD), (0x105C0, 0x105F3), (0x10D4A, 0x10D65), (0x11380, 0x11389),
                 (0x11BC0, 0x11BE0), (0x11F04, 0x11F10), (0x13460, 0x143FA), (0x16D40, 0x16D6C), (0x1E4D0, 0x1E4EB),
                 (0x2EBF0, 0x2EE5D), (0x31350, 0x323AF), (0x10D40, 0x10D49), (0x116D0, 0x116E3), (0x11F50, 0x11F59),
                 (0x1CCF0, 0x1CCF9), (0x1D2C0, 0x1D2D3), (0x1E4F0, 0x1E4F9), (0x1E5F1, 0x1E5FA)]:
        for cp in (a, b):
            ch = chr(cp)
            add("unicode16", "a" + ch + "b " + ch + ch + "1" + ch + " x" + ch + "'s " + ch + "!?")
    return c


INVALID = [b"abc\xff", b"\xe4\xbd", b"\xed\xa0\x80", b"\xf0\x9f\x98", b"\xc0\xaf", b"\x80\x80hello", b"\xf4\x90\x80\x80",
           b"ok \xe4\xbd\xa0\xe5 broken", b"\xf0\x9f\x98\x80\xf0\x9f", b"\xfe\xff", b"a\xc3", b"\xe2\x82",
           b"\xe0\x80\x80", b"\xf8\x88\x80\x80\x80", b"x\xc3\x28y", b"\xa0\xa1", b"\xe2\x28\xa1", b"\xf0\x28\x8c\xbc",
           b"caf\xe9 latin-1", b"\xed\x9f\xbf\xed\xa0\x80\xee\x80\x80"]


def random_cases(n, seed=1234):
    rng = random.Random(seed)
    pools = [
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", " \t\n\r", "     ", "\r\n",
        "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", "éèàçßñøåÆŒ", "ЖжЯяЁё", "中文字日本語한국", "αβγΔΩ",
        "\u0301\u0308\u0323", "😀👍🏽‍❤️🎉", "\u00a0\u0085\u2003\u3000\u200b\u2028", "１２３²½Ⅻ",
        "مرحبا", "नमस्ते", "'s'S'll'LL'd've're'm't", "’", "\ufffd\x00\x7f",
    ]
    specials = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>"]
    out = []
    for _ in range(n):
        s = []
        for _ in range(rng.randint(1, 40)):
            r = rng.random()
            if r < 0.03:
                s.append(rng.choice(specials))
            else:
                p = rng.choice(pools)
                s.append("".join(rng.choice(p) for _ in range(rng.randint(1, 6))))
        out.append(("random", "".join(s)))
    return out


def dataset_rows():
    for f in DATA_FILES:
        with open(os.path.join(ROOT, "data", f), encoding="utf-8") as fh:
            for ln, line in enumerate(fh, 1):
                yield f, ln, json.loads(line)


def write_corpus(tok):
    cases = []
    for f, ln, row in dataset_rows():
        cases.append(("prompt", row["prompt"][0]["content"]))
        sol = row.get("extra_info", {}).get("solution")
        if sol and (f in ("math500-test.jsonl", "gsm8k-test.jsonl")):
            cases.append(("solution", sol))
    cases += hand_cases()
    cases += random_cases(400)
    lines = []
    for cat, text in cases:
        ids = tok.encode(text, add_special_tokens=False).ids
        d = {"cat": cat, "text": text, "ids": ids}
        dec = tok.decode(ids, skip_special_tokens=False)
        if dec != text:
            d["decoded"] = dec
        dec_s = tok.decode(ids, skip_special_tokens=True)
        if dec_s != dec:
            d["decoded_skip"] = dec_s
        lines.append(d)
    for b in INVALID:
        text = b.decode("utf-8", "replace")
        ids = tok.encode(text, add_special_tokens=False).ids
        d = {"cat": "invalid_utf8", "hex": b.hex(), "ids": ids}
        dec = tok.decode(ids)
        if dec != text:
            d["decoded"] = dec
        else:
            d["decoded"] = text    # decode(encode(x)) is the replaced text, never the raw bytes
        lines.append(d)
    raw = "".join(json.dumps(d, ensure_ascii=False, separators=(",", ":")) + "\n" for d in lines).encode("utf-8")
    path = os.path.join(OUT, "qwen3_corpus.jsonl.zst")
    subprocess.run(["zstd", "-19", "--long=27", "-q", "-f", "-o", path], input=raw, check=True)
    cats = {}
    for d in lines:
        cats[d["cat"]] = cats.get(d["cat"], 0) + 1
    print(f"{path}: {len(lines)} cases {cats}, {len(raw)} bytes raw, {os.path.getsize(path)} compressed")


def chat_message_sets():
    return [
        [{"role": "user", "content": "What is 2+2?"}],
        [{"role": "system", "content": "You are a math tutor."}, {"role": "user", "content": "Solve x+1=3."}],
        [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help?"},
         {"role": "user", "content": "Compute 7*6."}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q1"},
         {"role": "assistant", "content": "A1"}, {"role": "user", "content": "Q2"},
         {"role": "assistant", "content": "<think>\nLet me think.\n</think>\n\nA2"}],
        [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "<think>\n\nplan\n\n</think>\n\n\nThe answer is 4."}],
        [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "no think tags here"},
         {"role": "user", "content": "again"}, {"role": "assistant", "content": "reason</think>answer"}],
        [{"role": "user", "content": "first"}, {"role": "assistant", "content": "<think>r1</think>a1"},
         {"role": "user", "content": "second"}, {"role": "assistant", "content": "<think>r2</think>a2"},
         {"role": "assistant", "content": "plain follow-up"}],
        [{"role": "user", "content": "  padded content with spaces \n\n"}, {"role": "assistant", "content": "\n\tanswer\u3000"}],
        [{"role": "system", "content": "sys"}, {"role": "system", "content": "second system"},
         {"role": "user", "content": "中文 😀 \\frac{1}{2}"}],
        [{"role": "user", "content": "<tool_response>\nresult\n</tool_response>"}, {"role": "assistant", "content": "x</think>y"}],
        [{"role": "user", "content": ""}],
    ]


def write_chat(qwen_tok):
    for name, tmpl, bos in (("qwen2.5", QWEN25_TEMPLATE, None), ("llama3", LLAMA3_TEMPLATE, "<|begin_of_text|>")):
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        cfg = {"chat_template": tmpl, "bos_token": bos,
               "eos_token": "<|im_end|>" if name == "qwen2.5" else "<|eot_id|>",
               "note": "chat template fixture written by tests/reference/make_tokenizer_fixtures.py"}
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as fh:
            json.dump(cfg, fh, indent=2, ensure_ascii=False)
            fh.write("\n")
    hf = {"qwen3": AutoTokenizer.from_pretrained(QWEN3)}
    for name, tmpl, bos in (("qwen2.5", QWEN25_TEMPLATE, None), ("llama3", LLAMA3_TEMPLATE, "<|begin_of_text|>")):
        t = PreTrainedTokenizerFast(tokenizer_file=os.path.join(QWEN3, "tokenizer.json"))
        t.chat_template = tmpl
        if bos:
            t.bos_token = bos
        hf[name] = t
    configs = {"qwen3": "data/tokenizers/qwen3/tokenizer_config.json",
               "qwen2.5": "tests/data/tokenizer/qwen2.5/tokenizer_config.json",
               "llama3": "tests/data/tokenizer/llama3/tokenizer_config.json"}
    n = 0
    with open(os.path.join(OUT, "chat_cases.jsonl"), "w", encoding="utf-8") as fh:
        for fam, t in hf.items():
            for msgs in chat_message_sets():
                for gen in (True, False):
                    text = t.apply_chat_template(msgs, tokenize=False, add_generation_prompt=gen)
                    ids = qwen_tok.encode(text, add_special_tokens=False).ids
                    fh.write(json.dumps({"family": fam, "config": configs[fam], "messages": msgs,
                                         "add_generation_prompt": gen, "text": text, "ids": ids},
                                        ensure_ascii=False) + "\n")
                    n += 1
    print(f"chat_cases.jsonl: {n} renders")


def write_dataset_ids(qwen_tok):
    hf = AutoTokenizer.from_pretrained(QWEN3)
    n = 0
    with open(os.path.join(OUT, "dataset_ids.jsonl"), "w", encoding="utf-8") as fh:
        for f, ln, row in dataset_rows():
            if ln > 25:
                continue
            text = hf.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
            ids = qwen_tok.encode(text, add_special_tokens=False).ids
            fh.write(json.dumps({"file": f, "line": ln, "ids": ids}) + "\n")
            n += 1
    print(f"dataset_ids.jsonl: {n} prompts")


def write_tiny():
    path = os.path.join(TINY, "tokenizer.json")
    if not os.path.exists(path):
        print("no data/tokenizers/tiny yet (run tools/train_tiny_tokenizer.py); skipping tiny_encode.jsonl")
        return
    tok = Tokenizer.from_file(path)
    hf = AutoTokenizer.from_pretrained(TINY)
    texts = [t for _, t in hand_cases()] + [t for _, t in random_cases(60, seed=99)]
    rows = list(dataset_rows())
    for f, ln, row in rows[:40] + rows[-20:]:
        texts.append(hf.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True))
        sol = row.get("extra_info", {}).get("solution")
        if sol:
            texts.append(sol)
    with open(os.path.join(OUT, "tiny_encode.jsonl"), "w", encoding="utf-8") as fh:
        for t in texts:
            ids = tok.encode(t, add_special_tokens=False).ids
            fh.write(json.dumps({"text": t, "ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)},
                                ensure_ascii=False) + "\n")
    print(f"tiny_encode.jsonl: {len(texts)} texts")


LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def variant_json(name):
    with open(os.path.join(QWEN3, "tokenizer.json"), encoding="utf-8") as f:
        j = json.load(f)
    if name == "llama3":
        j["normalizer"] = None
        j["model"]["ignore_merges"] = True
        j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = LLAMA3_SPLIT
    elif name == "gpt2":
        j["normalizer"] = None
        j["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    elif name == "prefix":
        j["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = True
    return json.dumps(j)


def write_variants():
    texts = [t for _, t in hand_cases()] + [t for _, t in random_cases(200, seed=7)]
    rows = list(dataset_rows())
    texts += [r["prompt"][0]["content"] for _, _, r in rows[:300]]
    texts += [r["extra_info"]["solution"] for _, _, r in rows[1000:1100]]
    lines = []
    for name in ("llama3", "gpt2", "prefix"):
        tok = Tokenizer.from_str(variant_json(name))
        for t in texts:
            lines.append({"variant": name, "text": t, "ids": tok.encode(t, add_special_tokens=False).ids})
    raw = "".join(json.dumps(d, ensure_ascii=False, separators=(",", ":")) + "\n" for d in lines).encode("utf-8")
    path = os.path.join(OUT, "variants.jsonl.zst")
    subprocess.run(["zstd", "-19", "--long=27", "-q", "-f", "-o", path], input=raw, check=True)
    print(f"{path}: {len(lines)} cases, {os.path.getsize(path)} bytes")


def main():
    print(f"tokenizers {tokenizers.__version__}, transformers {transformers.__version__}")
    os.makedirs(OUT, exist_ok=True)
    tok = Tokenizer.from_file(os.path.join(QWEN3, "tokenizer.json"))
    write_corpus(tok)
    write_chat(tok)
    write_dataset_ids(tok)
    write_variants()
    write_tiny()


if __name__ == "__main__":
    sys.exit(main())
