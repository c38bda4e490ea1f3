#!/usr/bin/python3
"""A PyTorch Llama 2 (forward pass, KV cache, generation loop) for golden outputs.

Our own transcription of Meta's reference (llama/model.py and
llama/generation.py as the seeds describe them), without fairscale: one
process, fp32 arithmetic. Weights in bf16 or fp16 are upcast to fp32, which
is exactly what the C++ CPU engine does, so both compute the same function
and differ only in summation order.

For each model given, it writes to --out_dir/<model>/:
  golden.json     prompts, per-prompt logit-file offsets, and generations:
                  greedy with and without echo/logprobs, per the reference
  logits.f32      float32 logits of one forward pass over each prompt
                  (all positions), concatenated, little-endian
"""

import argparse
import json
import math
import os
import random
import struct

import torch
import torch.nn.functional as F


class Args:
    def __init__(self, params, vocab_size, max_batch_size, max_seq_len):
        self.dim = params["dim"]
        self.n_layers = params["n_layers"]
        self.n_heads = params["n_heads"]
        self.n_kv_heads = params.get("n_kv_heads") or params["n_heads"]
        self.vocab_size = vocab_size
        self.multiple_of = params.get("multiple_of", 256)
        self.ffn_dim_multiplier = params.get("ffn_dim_multiplier")
        self.norm_eps = params.get("norm_eps", 1e-5)
        self.rope_theta = params.get("rope_theta", 10000.0)
        self.max_batch_size = max_batch_size
        self.max_seq_len = max_seq_len


def rms_norm(x, weight, eps):
    return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)).type_as(x) * weight


def precompute_freqs_cis(dim, end, theta):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    return torch.polar(torch.ones_like(freqs), freqs)


def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


class Transformer:
    def __init__(self, args, sd):
        self.a = args
        self.w = {k: v.float() for k, v in sd.items()}
        hd = args.dim // args.n_heads
        self.hd = hd
        self.freqs_cis = precompute_freqs_cis(hd, args.max_seq_len * 2, args.rope_theta)
        self.cache_k = [torch.zeros(args.max_batch_size, args.max_seq_len, args.n_kv_heads, hd)
                        for _ in range(args.n_layers)]
        self.cache_v = [torch.zeros_like(c) for c in self.cache_k]

    def attention(self, i, x, start_pos, freqs_cis, mask):
        a, w, p = self.a, self.w, f"layers.{i}.attention."
        bsz, seqlen, _ = x.shape
        xq = (x @ w[p + "wq.weight"].T).view(bsz, seqlen, a.n_heads, self.hd)
        xk = (x @ w[p + "wk.weight"].T).view(bsz, seqlen, a.n_kv_heads, self.hd)
        xv = (x @ w[p + "wv.weight"].T).view(bsz, seqlen, a.n_kv_heads, self.hd)
        xq, xk = apply_rotary_emb(xq, xk, freqs_cis)
        self.cache_k[i][:bsz, start_pos: start_pos + seqlen] = xk
        self.cache_v[i][:bsz, start_pos: start_pos + seqlen] = xv
        keys = self.cache_k[i][:bsz, : start_pos + seqlen]
        values = self.cache_v[i][:bsz, : start_pos + seqlen]
        n_rep = a.n_heads // a.n_kv_heads
        keys = keys.repeat_interleave(n_rep, dim=2)
        values = values.repeat_interleave(n_rep, dim=2)
        xq, keys, values = xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2)
        scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.hd)
        if mask is not None:
            scores = scores + mask
        scores = F.softmax(scores.float(), dim=-1).type_as(xq)
        out = torch.matmul(scores, values).transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return out @ w[p + "wo.weight"].T

    def feed_forward(self, i, x):
        w, p = self.w, f"layers.{i}.feed_forward."
        return (F.silu(x @ w[p + "w1.weight"].T) * (x @ w[p + "w3.weight"].T)) @ w[p + "w2.weight"].T

    @torch.inference_mode()
    def forward(self, tokens, start_pos):
        _, seqlen = tokens.shape
        h = self.w["tok_embeddings.weight"][tokens]
        freqs_cis = self.freqs_cis[start_pos: start_pos + seqlen]
        mask = None
        if seqlen > 1:
            mask = torch.full((seqlen, seqlen), float("-inf"))
            mask = torch.triu(mask, diagonal=1)
            mask = torch.hstack([torch.zeros((seqlen, start_pos)), mask])
        for i in range(self.a.n_layers):
            h = h + self.attention(i, rms_norm(h, self.w[f"layers.{i}.attention_norm.weight"], self.a.norm_eps),
                                   start_pos, freqs_cis, mask)
            h = h + self.feed_forward(i, rms_norm(h, self.w[f"layers.{i}.ffn_norm.weight"], self.a.norm_eps))
        h = rms_norm(h, self.w["norm.weight"], self.a.norm_eps)
        return (h @ self.w["output.weight"].T).float()


@torch.inference_mode()
def generate(model, prompt_tokens, max_gen_len, logprobs=False, echo=False, pad_id=-1, eos_id=2):
    """The reference's Llama.generate with temperature 0 (greedy)."""
    a = model.a
    bsz = len(prompt_tokens)
    min_prompt_len = min(len(t) for t in prompt_tokens)
    max_prompt_len = max(len(t) for t in prompt_tokens)
    total_len = min(a.max_seq_len, max_gen_len + max_prompt_len)
    tokens = torch.full((bsz, total_len), pad_id, dtype=torch.long)
    for k, t in enumerate(prompt_tokens):
        tokens[k, : len(t)] = torch.tensor(t, dtype=torch.long)
    token_logprobs = torch.zeros_like(tokens, dtype=torch.float)
    prev_pos = 0
    eos_reached = torch.tensor([False] * bsz)
    input_text_mask = tokens != pad_id
    for cur_pos in range(min_prompt_len, total_len):
        logits = model.forward(tokens[:, prev_pos:cur_pos], prev_pos)
        next_token = torch.argmax(logits[:, -1], dim=-1).reshape(-1)
        next_token = torch.where(input_text_mask[:, cur_pos], tokens[:, cur_pos], next_token)
        tokens[:, cur_pos] = next_token
        if logprobs:
            token_logprobs[:, prev_pos + 1: cur_pos + 1] = -F.cross_entropy(
                input=logits.transpose(1, 2), target=tokens[:, prev_pos + 1: cur_pos + 1],
                reduction="none", ignore_index=pad_id)
        eos_reached |= (~input_text_mask[:, cur_pos]) & (next_token == eos_id)
        prev_pos = cur_pos
        if all(eos_reached):
            break
    out_tokens, out_logprobs = [], []
    token_logprobs = token_logprobs.tolist()
    for i, toks in enumerate(tokens.tolist()):
        start = 0 if echo else len(prompt_tokens[i])
        toks = toks[start: len(prompt_tokens[i]) + max_gen_len]
        probs = token_logprobs[i][start: len(prompt_tokens[i]) + max_gen_len]
        if eos_id in toks:
            eos_idx = toks.index(eos_id)
            toks, probs = toks[:eos_idx], probs[:eos_idx]
        out_tokens.append(toks)
        out_logprobs.append(probs)
    return out_tokens, out_logprobs


# The prompts of the reference's example_text_completion.py.
TEXT_PROMPTS = [
    "I believe the meaning of life is",
    "Simply put, the theory of relativity states that ",
    """A brief message congratulating the team on the launch:

        Hi everyone,

        I just """,
    """Translate English to French:

        sea otter => loutre de mer
        peppermint => menthe poivrée
        plush girafe => girafe peluche
        cheese =>""",
]


def top2_gap(logits):
    top = torch.topk(logits, 2, dim=-1).values
    return (top[..., 0] - top[..., 1]).min().item()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--checkpoints", required=True, help="folder of checkpoint_fixture.py's output")
    parser.add_argument("--out_dir", required=True)
    parser.add_argument("--models", required=True, help="comma-separated MP=1 model names")
    parser.add_argument("--tokenizer", help="SentencePiece model: also golden text completions of TEXT_PROMPTS")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for name in args.models.split(","):
        ckpt = os.path.join(args.checkpoints, name)
        with open(os.path.join(ckpt, "params.json")) as f:
            params = json.load(f)
        sd = torch.load(os.path.join(ckpt, "reference.pt"))
        vocab = sd["tok_embeddings.weight"].shape[0]
        rng = random.Random(7)
        lengths = [1, 7, 33, 100]
        prompts = [[1] + [rng.randrange(3, vocab) for _ in range(n - 1)] for n in lengths]
        out = os.path.join(args.out_dir, name)
        os.makedirs(out, exist_ok=True)

        # Logits of one prefill pass per prompt, every position.
        offsets, gaps = [], []
        with open(os.path.join(out, "logits.f32"), "wb") as f:
            written = 0
            for p in prompts:
                model = Transformer(Args(params, vocab, 1, 256), sd)
                logits = model.forward(torch.tensor([p]), 0)[0]
                gaps.append(top2_gap(logits))
                f.write(logits.contiguous().numpy().astype("<f4").tobytes())
                offsets.append(written)
                written += logits.numel()
        golden = {"vocab_size": vocab, "max_seq_len": 256, "prompts": prompts, "logit_offsets": offsets,
                  "min_top2_gap": min(gaps), "generations": []}
        for max_gen_len, logprobs, echo in [(64, True, False), (64, True, True), (0, True, True), (5, False, False)]:
            model = Transformer(Args(params, vocab, len(prompts), 256), sd)
            toks, lps = generate(model, prompts, max_gen_len, logprobs=logprobs, echo=echo)
            golden["generations"].append({"max_gen_len": max_gen_len, "logprobs": logprobs, "echo": echo,
                                          "tokens": toks, "token_logprobs": lps})
        if args.tokenizer:
            # The reference's text_completion: encode with BOS, greedy, decode.
            import sentencepiece
            sp = sentencepiece.SentencePieceProcessor(model_file=args.tokenizer)
            prompt_tokens = [[sp.bos_id()] + sp.encode(p) for p in TEXT_PROMPTS]
            model = Transformer(Args(params, vocab, len(TEXT_PROMPTS), 128), sd)
            toks, lps = generate(model, prompt_tokens, 32, logprobs=True)
            golden["text_completions"] = [{"prompt": p, "token_ids": t, "logprobs": l, "generation": sp.decode(t)}
                                          for p, t, l in zip(TEXT_PROMPTS, toks, lps)]
        with open(os.path.join(out, "golden.json"), "w") as f:
            json.dump(golden, f)


if __name__ == "__main__":
    main()
