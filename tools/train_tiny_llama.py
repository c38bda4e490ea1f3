#!/usr/bin/python3
"""Trains a small Llama on English text, for figures that random weights cannot give.

Random weights have nearly flat next-token distributions, so they cannot show
what a lower-precision kernel costs in perplexity (issue #48) or how often a
draft model's proposals are accepted (issue #47). This trains one in minutes
on two cores with Debian's PyTorch and SentencePiece, on the `fortunes`
package's English text (apt-get install fortunes fortunes-min; with
libopenblas0-pthread installed too, as Debian's PyTorch otherwise multiplies
with the reference BLAS, 15x slower), and writes a
checkpoint in Meta's layout that `launcher convert` (or //tools:convert)
reads as it reads Meta's downloads:

  <out_dir>/tokenizer.model        SentencePiece BPE (byte fallback, as Llama 2's)
  <out_dir>/train.txt, heldout.txt the fortunes split 95/5 (a seeded shuffle of
                                   whole fortunes); heldout.txt is never trained on
  <out_dir>/<name>/consolidated.00.pth, params.json
                                   the model, bf16 as Meta ships

The model is our transcription of Meta's model.py as a trainable module (the
parameter names are Meta's); its shape is set by flags so that a target and a
smaller draft can share one tokenizer:

  /usr/bin/python3 tools/train_tiny_llama.py --out_dir=/tmp/tiny --name=target
  /usr/bin/python3 tools/train_tiny_llama.py --out_dir=/tmp/tiny --name=draft --dim=128 --n_layers=2

Dimensions default to multiples of 256 along every weight's input so that
the model converts to every weight type we run (q4_k and q6_k take rows of
256). The run is seeded; PyTorch's CPU kernels make it close to, not
exactly, repeatable across machines.
"""

import argparse
import glob
import json
import math
import os
import random
import time

import sentencepiece as spm
import torch
import torch.nn as nn
import torch.nn.functional as F

FORTUNES = "/usr/share/games/fortunes"


def read_fortunes(folder):
    """Every fortune of the package's plain-text files (not the .dat indexes, not offensive ones)."""
    paths = sorted(p for p in glob.glob(os.path.join(folder, "*")) if os.path.isfile(p) and "." not in os.path.basename(p))
    if not paths:
        raise SystemExit(f"train_tiny_llama: no fortune files in {folder}; apt-get install fortunes fortunes-min")
    entries = []
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            entries += [e.strip("\n") for e in f.read().split("\n%\n") if e.strip()]
    return entries


def split_text(out_dir, seed):
    train_path, heldout_path = os.path.join(out_dir, "train.txt"), os.path.join(out_dir, "heldout.txt")
    if not os.path.exists(heldout_path):
        entries = read_fortunes(FORTUNES)
        random.Random(seed).shuffle(entries)
        cut = len(entries) * 95 // 100
        for path, part in ((train_path, entries[:cut]), (heldout_path, entries[cut:])):
            with open(path + ".partial", "w", encoding="utf-8") as f:
                f.write("\n\n".join(part) + "\n")
            os.replace(path + ".partial", path)
    with open(train_path, encoding="utf-8") as f:
        return f.read()


def train_tokenizer(out_dir, text, vocab_size):
    path = os.path.join(out_dir, "tokenizer.model")
    if not os.path.exists(path):
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(text.split("\n")),
            model_prefix=os.path.join(out_dir, "tokenizer"),
            model_type="bpe",
            vocab_size=vocab_size,
            byte_fallback=True,
            split_digits=True,
            character_coverage=0.9995,
            normalization_rule_name="identity",
            add_dummy_prefix=True,
            remove_extra_whitespaces=False,
            allow_whitespace_only_pieces=True,
            unk_id=0,
            bos_id=1,
            eos_id=2,
            pad_id=-1,
            num_threads=2,
            minloglevel=2,
        )
        os.remove(os.path.join(out_dir, "tokenizer.vocab"))
    return spm.SentencePieceProcessor(model_file=path)


def ffn_hidden(dim, multiple_of):
    """Meta's FeedForward: 2/3 of 4 dim, rounded up to multiple_of."""
    hidden = int(2 * (4 * dim) / 3)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def rope(x, cos, sin):
    """Meta's apply_rotary_emb (pairs of adjacent values as complex numbers), in real arithmetic."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Attention(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.hd = a.n_heads, a.n_kv_heads, a.dim // a.n_heads
        self.wq = nn.Linear(a.dim, a.n_heads * self.hd, bias=False)
        self.wk = nn.Linear(a.dim, a.n_kv_heads * self.hd, bias=False)
        self.wv = nn.Linear(a.dim, a.n_kv_heads * self.hd, bias=False)
        self.wo = nn.Linear(a.n_heads * self.hd, a.dim, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q = rope(self.wq(x).view(b, t, self.n_heads, self.hd), cos, sin).transpose(1, 2)
        k = rope(self.wk(x).view(b, t, self.n_kv_heads, self.hd), cos, sin).transpose(1, 2)
        v = self.wv(x).view(b, t, self.n_kv_heads, self.hd).transpose(1, 2)
        rep = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        # Torch 1.13 (Debian 12's) has no scaled_dot_product_attention.
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd)
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.wo(out.transpose(1, 2).reshape(b, t, -1))


class FeedForward(nn.Module):
    def __init__(self, a):
        super().__init__()
        hidden = ffn_hidden(a.dim, a.multiple_of)
        self.w1 = nn.Linear(a.dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, a.dim, bias=False)
        self.w3 = nn.Linear(a.dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.attention, self.feed_forward = Attention(a), FeedForward(a)
        self.attention_norm, self.ffn_norm = RMSNorm(a.dim, a.norm_eps), RMSNorm(a.dim, a.norm_eps)

    def forward(self, x, cos, sin):
        h = x + self.attention(self.attention_norm(x), cos, sin)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.tok_embeddings = nn.Embedding(a.vocab_size, a.dim)
        self.layers = nn.ModuleList(Block(a) for _ in range(a.n_layers))
        self.norm = RMSNorm(a.dim, a.norm_eps)
        self.output = nn.Linear(a.dim, a.vocab_size, bias=False)
        hd = a.dim // a.n_heads
        freqs = 1.0 / (a.rope_theta ** (torch.arange(0, hd, 2).float() / hd))
        angles = torch.outer(torch.arange(a.seq_len).float(), freqs)
        self.register_buffer("cos", angles.cos()[None, :, None, :], persistent=False)
        self.register_buffer("sin", angles.sin()[None, :, None, :], persistent=False)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * a.n_layers) if name.endswith(("wo.weight", "w2.weight")) else 0.02
                nn.init.normal_(p, std=std)

    def forward(self, tokens):
        t = tokens.shape[1]
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, self.cos[:, :t], self.sin[:, :t])
        return self.output(self.norm(h))


def evaluate(model, data, seq_len, batches=8):
    model.eval()
    losses = []
    with torch.no_grad():
        for i in range(batches):
            start = i * (len(data) - seq_len - 1) // batches
            chunk = data[start:start + seq_len + 1][None]
            logits = model(chunk[:, :-1])
            losses.append(F.cross_entropy(logits.flatten(0, 1), chunk[:, 1:].flatten()).item())
    model.train()
    return sum(losses) / len(losses)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out_dir", required=True)
    p.add_argument("--name", default="target", help="the model's folder under --out_dir")
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--n_layers", type=int, default=4)
    p.add_argument("--n_heads", type=int, default=8)
    p.add_argument("--n_kv_heads", type=int, default=4)
    p.add_argument("--multiple_of", type=int, default=256)
    p.add_argument("--vocab_size", type=int, default=2048)
    p.add_argument("--seq_len", type=int, default=256)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--minutes", type=float, default=12.0, help="training time; the learning rate's schedule fits it")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    args.norm_eps, args.rope_theta = 1e-5, 10000.0

    os.makedirs(os.path.join(args.out_dir, args.name), exist_ok=True)
    torch.manual_seed(args.seed)
    torch.set_num_threads(os.cpu_count())
    text = split_text(args.out_dir, args.seed)
    sp = train_tokenizer(args.out_dir, text, args.vocab_size)
    args.vocab_size = sp.get_piece_size()
    data = torch.tensor(sp.encode(text), dtype=torch.long)
    with open(os.path.join(args.out_dir, "heldout.txt"), encoding="utf-8") as f:
        heldout = torch.tensor(sp.encode(f.read()), dtype=torch.long)
    print(f"train_tiny_llama: {len(data)} training tokens, {len(heldout)} held out, vocabulary {args.vocab_size}")

    model = Transformer(args)
    params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() == 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(args.seed)
    start, step, budget = time.time(), 0, args.minutes * 60
    while True:
        elapsed = time.time() - start
        if elapsed >= budget:
            break
        # Warm up for 2% of the time, then a cosine down to a tenth.
        frac = elapsed / budget
        lr = args.lr * min(1.0, frac / 0.02) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for group in opt.param_groups:
            group["lr"] = lr
        starts = torch.randint(0, len(data) - args.seq_len - 1, (args.batch,), generator=gen)
        batch = torch.stack([data[s:s + args.seq_len + 1] for s in starts.tolist()])
        logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 25 == 0:
            print(f"step {step} {elapsed / 60:.1f} min lr {lr:.2e} train loss {loss.item():.3f}", flush=True)
    held = evaluate(model, heldout, args.seq_len)
    print(f"train_tiny_llama: {params} parameters, {step} steps of {args.batch}x{args.seq_len} tokens; "
          f"held-out loss {held:.3f} (perplexity {math.exp(held):.1f} at {args.seq_len} tokens)")

    folder = os.path.join(args.out_dir, args.name)
    state = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
    torch.save(state, os.path.join(folder, "consolidated.00.pth.partial"))
    os.replace(os.path.join(folder, "consolidated.00.pth.partial"), os.path.join(folder, "consolidated.00.pth"))
    with open(os.path.join(folder, "params.json"), "w") as f:
        json.dump({"dim": args.dim, "n_layers": args.n_layers, "n_heads": args.n_heads, "n_kv_heads": args.n_kv_heads,
                   "multiple_of": args.multiple_of, "norm_eps": args.norm_eps, "rope_theta": args.rope_theta,
                   "vocab_size": -1}, f)


if __name__ == "__main__":
    main()
