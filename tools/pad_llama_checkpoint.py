#!/usr/bin/python3
"""Writes a checkpoint that gives a small trained Llama's answers at a large model's cost.

A draft model pays where the target's decode step streams its weights from
memory and the draft's does not, as with Llama 3.2 1B drafting for 3.1 8B
(issue #47). The models `tools/train_tiny_llama.py` can train in minutes on
two cores are a few MB: their steps are all overhead and their weights sit
in the cache, so no draft can speed them up. This pads one to a chosen size
without changing what it computes:

  - each layer's feed-forward gets more hidden units, with random `w1`/`w3`
    rows (so the extra units compute real, nonzero activations) and zero
    `w2` columns (so their products add exactly 0.0 to the output);
  - layers are appended whose `wo` and `w2` are zero (every other weight is
    random): each adds exactly 0.0 to the residual stream, while its
    attention, KV cache and feed-forward run and stream like a real layer's.

So the padded model reads its weights and runs every kernel as a model of
that size would; its next-token distributions equal the original's up to
the rounding of longer sums (each zero product is exact, but a longer row
can group the same nonzero terms into other partial sums). Acceptance
rates therefore stay those of the trained model, and the step costs are
those of the padded size. The result is in Meta's layout, in the input's
dtype (bf16 from train_tiny_llama.py), for `launcher convert` or
//tools:convert:

  /usr/bin/python3 tools/pad_llama_checkpoint.py --in_dir=/tmp/tiny/target \
      --out_dir=/tmp/tiny/target_padded --hidden_dim=16384 --n_layers=22

This is a benchmark fixture, not a model: its figures say what the engine
does with a cheap draft and a memory-bound target, not what a real large
model's drafts would be accepted at.
"""

import argparse
import json
import os

import torch

FEED_FORWARD_IN = ("w1", "w3")  # [hidden, dim]: rows are hidden units
FEED_FORWARD_OUT = "w2"  # [dim, hidden]: columns are hidden units


def padded_rows(weight, rows, gen, std):
    extra = torch.randn(rows - weight.shape[0], weight.shape[1], generator=gen) * std
    return torch.cat([weight.float(), extra]).to(weight.dtype)


def padded_columns_with_zeros(weight, columns):
    extra = torch.zeros(weight.shape[0], columns - weight.shape[1], dtype=weight.dtype)
    return torch.cat([weight, extra], dim=1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--in_dir", required=True, help="a folder with consolidated.00.pth and params.json (one rank)")
    p.add_argument("--out_dir", required=True)
    p.add_argument("--hidden_dim", type=int, required=True, help="feed-forward hidden units per layer (a multiple of 256)")
    p.add_argument("--n_layers", type=int, required=True, help="layers in all, at least the model's own")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()

    with open(os.path.join(args.in_dir, "params.json")) as f:
        params = json.load(f)
    state = torch.load(os.path.join(args.in_dir, "consolidated.00.pth"), map_location="cpu")
    own_layers = params["n_layers"]
    own_hidden = state["layers.0.feed_forward.w1.weight"].shape[0]
    if args.n_layers < own_layers:
        raise SystemExit(f"pad_llama_checkpoint: --n_layers={args.n_layers} is below the model's {own_layers} layers")
    if args.hidden_dim < own_hidden or args.hidden_dim % 256:
        raise SystemExit(f"pad_llama_checkpoint: --hidden_dim={args.hidden_dim} must be a multiple of 256 "
                         f"and at least the model's {own_hidden}")
    if "ffn_dim_multiplier" in params:
        raise SystemExit("pad_llama_checkpoint: models with ffn_dim_multiplier are not handled; pad one without it")

    gen = torch.Generator().manual_seed(args.seed)
    std = 0.02  # the initialisation train_tiny_llama.py uses
    out = dict(state)
    for layer in range(own_layers):
        prefix = f"layers.{layer}.feed_forward."
        for name in FEED_FORWARD_IN:
            out[prefix + name + ".weight"] = padded_rows(state[prefix + name + ".weight"], args.hidden_dim, gen, std)
        out[prefix + FEED_FORWARD_OUT + ".weight"] = padded_columns_with_zeros(
            state[prefix + FEED_FORWARD_OUT + ".weight"], args.hidden_dim)
    template = {k[len("layers.0."):]: v for k, v in out.items() if k.startswith("layers.0.")}
    for layer in range(own_layers, args.n_layers):
        for name, like in template.items():
            if name.endswith("norm.weight"):
                weight = torch.ones_like(like)
            elif name in ("attention.wo.weight", "feed_forward.w2.weight"):
                weight = torch.zeros_like(like)
            else:
                weight = (torch.randn(like.shape, generator=gen) * std).to(like.dtype)
            out[f"layers.{layer}.{name}"] = weight

    # Meta's FeedForward rounds 2/3 of 4*dim up to multiple_of; a multiple_of
    # of hidden_dim itself makes that the padded width.
    params = dict(params, n_layers=args.n_layers, multiple_of=args.hidden_dim)
    os.makedirs(args.out_dir, exist_ok=True)
    partial = os.path.join(args.out_dir, "consolidated.00.pth.partial")
    torch.save(out, partial)
    os.replace(partial, os.path.join(args.out_dir, "consolidated.00.pth"))
    with open(os.path.join(args.out_dir, "params.json"), "w") as f:
        json.dump(params, f)
    count = sum(v.numel() for v in out.values())
    print(f"pad_llama_checkpoint: {count} parameters ({2 * count / 1e6:.0f} MB at 16 bits), "
          f"{args.n_layers} layers of hidden width {args.hidden_dim}, in {args.out_dir}")


if __name__ == "__main__":
    main()
