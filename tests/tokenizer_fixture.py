#!/usr/bin/python3
"""Builds the tokenizer fixture and its golden outputs with Python's SentencePiece.

Run by Bazel (tests/BUILD.bazel) with Debian's /usr/bin/python3; nothing it
writes is committed. Outputs, in --out_dir:
  tokenizer.model       a small BPE model trained like Llama 2's (byte
                        fallback, BOS=1, EOS=2, unk=0, no pad, digits split,
                        identity normalisation, dummy prefix, whitespace kept)
  encode_golden.json    [{"text_b64", "bos", "eos", "ids"}] for awkward strings
  decode_golden.json    [{"ids", "text_b64"}] for random id sequences
  chat_golden.json      [{"tokens", "unsafe"} | {"error"}] for --dialogs, built
                        the way the reference's Llama.chat_completion does
"""

import argparse
import base64
import io
import json
import os
import random

import sentencepiece as spm

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Llama 2 is a collection of pretrained and fine-tuned generative text models.",
    "I believe the meaning of life is to find happiness in small things.",
    "Simply put, the theory of relativity states that time is relative.",
    "A brief message congratulating the team on the launch:",
    "Translate English to French: sea otter => loutre de mer, cheese => fromage",
    "[INST] <<SYS>>\nAlways answer with Haiku\n<</SYS>>\n\nI am going to Paris, what should I see? [/INST]",
    "Paris, the capital of France, is known for the Eiffel Tower and the Louvre.",
    "def generate(prompt_tokens, max_gen_len, temperature=0.6, top_p=0.9):",
    "    return [tokens[i] for i in range(len(tokens))]",
    "東京は日本の首都です。北京是中国的首都。",
    "Les élèves étudient à l'université; naïve café façade.",
    "Emoji: 🙂 🦙 🚀 — and numbers 1234567890 3.14159.",
]

# Strings chosen to stress the tokenizer: whitespace rules, byte fallback,
# multi-byte characters, and invalid UTF-8 (given to SentencePiece as bytes).
AWKWARD = [
    b"",
    b" ",
    b"   ",
    b"\t\n",
    b"Hello",
    b" Hello",
    b"  Hello  world  ",
    b"Hello\nworld\n\n",
    b"\n",
    "🦙🙂👩‍👩‍👧".encode(),
    "東京 北京 서울".encode(),
    "e\u0301 a\u0308 n\u0303".encode(),  # combining marks
    "Ω≈ç√∫˜µ≤≥÷".encode(),
    b"\xff\xfe invalid \xc3\x28 bytes \xe2\x82",
    b"\x80",
    "[INST] hi [/INST]".encode(),
    b"12345 678.90",
    ("The quick brown fox. " * 300).encode(),
]


def train(out_dir):
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS * 20),
        model_writer=model,
        model_type="bpe",
        vocab_size=600,
        hard_vocab_limit=False,
        byte_fallback=True,
        split_digits=True,
        character_coverage=1.0,
        normalization_rule_name="identity",
        add_dummy_prefix=True,
        remove_extra_whitespaces=False,
        allow_whitespace_only_pieces=True,
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=-1,
        num_threads=1,
        minloglevel=2,
    )
    path = os.path.join(out_dir, "tokenizer.model")
    with open(path, "wb") as f:
        f.write(model.getvalue())
    return spm.SentencePieceProcessor(model_file=path)


def b64(data):
    return base64.b64encode(data).decode("ascii")


def encode_golden(sp):
    rows = []
    for text in AWKWARD:
        for bos, eos in [(False, False), (True, False), (True, True)]:
            ids = sp.encode(text)  # the reference's Tokenizer.encode
            ids = ([sp.bos_id()] if bos else []) + ids + ([sp.eos_id()] if eos else [])
            rows.append({"text_b64": b64(text), "bos": bos, "eos": eos, "ids": ids})
    return rows


def decode_golden(sp):
    rng = random.Random(1234)
    n = sp.get_piece_size()
    byte_ids = [i for i in range(n) if sp.is_byte(i)]
    rows = []
    for _ in range(300):
        length = rng.randint(0, 24)
        # Mostly byte pieces in runs, so multi-byte characters form and break.
        ids = [rng.choice(byte_ids) if rng.random() < 0.5 else rng.randrange(n) for _ in range(length)]
        rows.append({"ids": ids, "text_b64": b64(sp.decode(ids).encode("utf-8"))})
    return rows


# The reference's chat prompt building (llama/generation.py), transcribed.
B_INST, E_INST = "[INST]", "[/INST]"
B_SYS, E_SYS = "<<SYS>>\n", "\n<</SYS>>\n\n"
SPECIAL_TAGS = [B_INST, E_INST, "<<SYS>>", "<</SYS>>"]


def encode(sp, s, bos, eos):
    t = sp.encode(s)
    return ([sp.bos_id()] if bos else []) + t + ([sp.eos_id()] if eos else [])


def chat_tokens(sp, dialog):
    unsafe = any(tag in msg["content"] for tag in SPECIAL_TAGS for msg in dialog)
    if dialog and dialog[0]["role"] == "system":
        if len(dialog) < 2:
            raise ValueError("system message without a user message")
        dialog = [{"role": dialog[1]["role"],
                   "content": B_SYS + dialog[0]["content"] + E_SYS + dialog[1]["content"]}] + dialog[2:]
    if not (all(m["role"] == "user" for m in dialog[::2]) and
            all(m["role"] == "assistant" for m in dialog[1::2])):
        raise ValueError("roles do not alternate")
    if not dialog or dialog[-1]["role"] != "user":
        raise ValueError("last message is not from the user")
    tokens = sum([encode(sp, f"{B_INST} {(p['content']).strip()} {E_INST} {(a['content']).strip()} ", True, True)
                  for p, a in zip(dialog[::2], dialog[1::2])], [])
    tokens += encode(sp, f"{B_INST} {(dialog[-1]['content']).strip()} {E_INST}", True, False)
    return tokens, unsafe


def chat_golden(sp, dialogs_path):
    with open(dialogs_path, encoding="utf-8") as f:
        dialogs = json.load(f)
    rows = []
    for dialog in dialogs:
        try:
            tokens, unsafe = chat_tokens(sp, dialog)
            rows.append({"tokens": tokens, "unsafe": unsafe})
        except ValueError as e:
            rows.append({"error": str(e)})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out_dir", required=True)
    parser.add_argument("--dialogs", required=True)
    args = parser.parse_args()
    sp = train(args.out_dir)
    for name, rows in [("encode_golden.json", encode_golden(sp)),
                       ("decode_golden.json", decode_golden(sp)),
                       ("chat_golden.json", chat_golden(sp, args.dialogs))]:
        with open(os.path.join(args.out_dir, name), "w", encoding="utf-8") as f:
            json.dump(rows, f)


if __name__ == "__main__":
    main()
