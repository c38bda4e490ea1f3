#!/usr/bin/python3
"""Writes the two vocabularies //tools:grammar_bench measures at, full size.

Meta's tokenizer files cannot be fetched here, so each is built to the
same shape from what this machine has:
  llama3_shape.model  a tiktoken ranks file of 128,000 byte-level BPE ranks:
                      the first 128,000 of OpenAI's o200k_base (from the npm
                      package tiktoken, which third_party/setup.sh installs);
                      Llama 3's own file is 100k of cl100k plus 28k more, the
                      same kind of vocabulary. Loaded, it has Llama 3's 128,256
                      ids (the reference adds 256 special tokens).
  llama2_shape.model  a SentencePiece BPE model of 32,000 pieces trained as
                      Llama 2's was (byte fallback, split digits, identity
                      normalisation, dummy prefix) on the text under /usr/share
                      and Python's standard library.
Run by hand (Debian's /usr/bin/python3 with python3-sentencepiece):
  /usr/bin/python3 tools/make_bench_vocabularies.py --out_dir=/tmp/vocab
"""

import argparse
import base64
import glob
import io
import json
import os

import sentencepiece as spm

DEFAULT_ENCODERS = os.path.expanduser("~/.cache/llama2-cpp/node-tools/node_modules/tiktoken/encoders")


def write_llama3_shape(encoders, out):
    with open(os.path.join(encoders, "o200k_base.json")) as f:
        parts = json.load(f)["bpe_ranks"].split(" ")
    # js-tiktoken's packing: "! <first rank>" then the base64 tokens in rank order.
    ranks, rank, i = [], None, 0
    while i < len(parts):
        if parts[i] == "!":
            rank, i = int(parts[i + 1]), i + 2
            continue
        ranks.append((rank, parts[i]))
        rank, i = rank + 1, i + 1
    ranks.sort()
    with open(out, "w") as f:
        for r, token in ranks[:128000]:
            f.write(f"{token} {r}\n")


def corpus_lines(limit_bytes):
    paths = sorted(glob.glob("/usr/share/common-licenses/*")) + sorted(glob.glob("/usr/share/doc/*/copyright"))
    paths += sorted(glob.glob("/usr/lib/python3.11/**/*.py", recursive=True))
    total = 0
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                for line in f:
                    line = line.strip()
                    if line:
                        total += len(line)
                        yield line
        except (UnicodeDecodeError, OSError, IsADirectoryError):
            continue
        if total > limit_bytes:
            return


def write_llama2_shape(out):
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=corpus_lines(40 << 20), model_writer=model, model_type="bpe", vocab_size=32000,
        byte_fallback=True, split_digits=True, normalization_rule_name="identity", add_dummy_prefix=True,
        remove_extra_whitespaces=False, allow_whitespace_only_pieces=True, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        input_sentence_size=400000, shuffle_input_sentence=True, num_threads=2, max_sentence_length=8192,
        minloglevel=2)
    with open(out, "wb") as f:
        f.write(model.getvalue())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out_dir", required=True)
    parser.add_argument("--tiktoken_encoders", default=DEFAULT_ENCODERS)
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    write_llama3_shape(args.tiktoken_encoders, os.path.join(args.out_dir, "llama3_shape.model"))
    write_llama2_shape(os.path.join(args.out_dir, "llama2_shape.model"))
    print(f"wrote {args.out_dir}/llama3_shape.model and {args.out_dir}/llama2_shape.model")


if __name__ == "__main__":
    main()
