#!/usr/bin/env python3
"""Trains the tokenizer of dapo's tiny default model: byte-level BPE, vocab 1024, with HF `tokenizers`.

Training text: the math text of data/ — GSM8K (train + test) and MATH-500: each record's user prompt (the
DAPO-Math instruction around the problem, exactly what the model reads) and its reference solution.
Pipeline (the same components as Qwen2/Qwen3, so it loads through dapo's one tokenizer code path):
  normalizer NFC; pre-tokenizer Split(Qwen regex, Isolated) + ByteLevel(use_regex=False); BPE; ByteLevel decoder.
Special tokens (ids 0, 1, 2): <|endoftext|>, <|im_start|>, <|im_end|> (ChatML). Then the 256 byte tokens,
then merges up to 1024 ids. tokenizer_config.json carries the Qwen2.5 ChatML chat template (default system
prompt included), eos <|im_end|>, pad <|endoftext|>, no BOS.

Writes data/tokenizers/tiny/{tokenizer.json, tokenizer_config.json, SOURCE.txt}. Deterministic (one thread).
Run from anywhere: python3 tools/train_tiny_tokenizer.py [--vocab 1024]
"""
import argparse
import hashlib
import json
import os

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAYON_NUM_THREADS", "1")

import tokenizers  # noqa: E402
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
FILES = ["gsm8k-train.jsonl", "gsm8k-test.jsonl", "math500-test.jsonl"]
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
QWEN_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
              r"|\s+(?!\S)|\s+")

# Qwen2.5-Instruct tokenizer_config.json chat_template (tools and tool calls included, as shipped).
QWEN25_TEMPLATE = (
    "{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- messages[0]['content'] }}\n    {%- else %}\n"
    "        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}\n    {%- endif %}\n"
    "    {{- \"\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>\" }}\n"
    "    {%- for tool in tools %}\n        {{- \"\\n\" }}\n        {{- tool | tojson }}\n    {%- endfor %}\n"
    "    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, \\\"arguments\\\": "
    "<args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n{%- else %}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n    {%- else %}\n"
    "        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}\n"
    "    {%- endif %}\n{%- endif %}\n{%- for message in messages %}\n"
    "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) or "
    "(message.role == \"assistant\" and not message.tool_calls) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
    "    {%- elif message.role == \"assistant\" %}\n        {{- '<|im_start|>' + message.role }}\n"
    "        {%- if message.content %}\n            {{- '\\n' + message.content }}\n        {%- endif %}\n"
    "        {%- for tool_call in message.tool_calls %}\n            {%- if tool_call.function is defined %}\n"
    "                {%- set tool_call = tool_call.function %}\n            {%- endif %}\n"
    "            {{- '\\n<tool_call>\\n{\"name\": \"' }}\n            {{- tool_call.name }}\n"
    "            {{- '\", \"arguments\": ' }}\n            {{- tool_call.arguments | tojson }}\n"
    "            {{- '}\\n</tool_call>' }}\n        {%- endfor %}\n        {{- '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == \"tool\" %}\n"
    "        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != \"tool\") %}\n"
    "            {{- '<|im_start|>user' }}\n        {%- endif %}\n        {{- '\\n<tool_response>\\n' }}\n"
    "        {{- message.content }}\n        {{- '\\n</tool_response>' }}\n"
    "        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n"
    "            {{- '<|im_end|>\\n' }}\n        {%- endif %}\n    {%- endif %}\n{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}\n"
)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def texts():
    for name in FILES:
        with open(os.path.join(ROOT, "data", name), encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                yield row["prompt"][0]["content"]
                sol = row.get("extra_info", {}).get("solution")
                if sol:
                    yield sol


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--out", default=os.path.join(ROOT, "data", "tokenizers", "tiny"))
    a = ap.parse_args()
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=a.vocab, min_frequency=2, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts(), trainer=trainer)
    os.makedirs(a.out, exist_ok=True)
    tj = os.path.join(a.out, "tokenizer.json")
    tok.save(tj, pretty=False)
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "chat_template": QWEN25_TEMPLATE, "bos_token": None,
           "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "unk_token": None, "add_bos_token": False,
           "clean_up_tokenization_spaces": False, "split_special_tokens": False, "model_max_length": 4096}
    tc = os.path.join(a.out, "tokenizer_config.json")
    with open(tc, "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2, ensure_ascii=False)
        f.write("\n")
    nbytes = sum(len(t.encode()) for t in texts())
    ntok = sum(len(tok.encode(t, add_special_tokens=False).ids) for t in texts())
    with open(os.path.join(a.out, "SOURCE.txt"), "w", encoding="utf-8") as f:
        f.write(f"""Tiny tokenizer of dapo's default model (issue 5). Generated, not downloaded.

Made by: python3 tools/train_tiny_tokenizer.py --vocab {a.vocab}
  with tokenizers {tokenizers.__version__} (BpeTrainer, min_frequency 2, one thread; deterministic).
Training text: user prompt content and reference solution of every record of
""" + "".join(f"  data/{n}  sha256 {sha256(os.path.join(ROOT, 'data', n))}\n" for n in FILES) + f"""  ({nbytes:,} bytes of text; the provenance of those files is in data/README.md).
Result: vocab {tok.get_vocab_size()} ids = 3 special (0 <|endoftext|>, 1 <|im_start|>, 2 <|im_end|>) + 256 bytes + merges;
  {ntok:,} tokens on the training text ({nbytes / ntok:.2f} bytes/token).
Pipeline: NFC; Split(Qwen2/Qwen3 regex, Isolated) + ByteLevel(add_prefix_space=false, use_regex=false); BPE;
  ByteLevel decoder. tokenizer_config.json: Qwen2.5 ChatML chat template (default system prompt "You are Qwen,
  created by Alibaba Cloud. You are a helpful assistant."), eos <|im_end|>, pad <|endoftext|>, no BOS.
Files:
  tokenizer.json         sha256 {sha256(tj)}
  tokenizer_config.json  sha256 {sha256(tc)}
License: generated from MIT-licensed data (GSM8K, MATH); same terms as this repository.
""")
    print(f"{a.out}: vocab {tok.get_vocab_size()}, {nbytes / ntok:.2f} bytes/token on the training text")


if __name__ == "__main__":
    main()
