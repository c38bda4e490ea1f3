#!/usr/bin/python3
"""Writes a random Llama 2 checkpoint (Meta's layout, real PyTorch) whose
every row is whole 256-value K-quant blocks: dim 256, one layer, 4 query and
2 KV heads, FFN width 256, the fixture tokenizer's 600 pieces. Used by
make_testdata.sh only."""
import hashlib
import json
import os
import sys

import torch

PARAMS = {"dim": 256, "n_layers": 1, "n_heads": 4, "n_kv_heads": 2, "multiple_of": 256,
          "ffn_dim_multiplier": 0.375, "norm_eps": 1e-05, "vocab_size": -1}
VOCAB, HIDDEN = 600, 256


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    g = torch.Generator().manual_seed(34)
    dim, hd = PARAMS["dim"], PARAMS["dim"] // PARAMS["n_heads"]
    kv = PARAMS["n_kv_heads"] * hd

    def w(*shape):
        return torch.randn(*shape, generator=g) * (1.0 / shape[-1] ** 0.5)

    sd = {"tok_embeddings.weight": w(VOCAB, dim)}
    p = "layers.0."
    sd[p + "attention.wq.weight"] = w(dim, dim)
    sd[p + "attention.wk.weight"] = w(kv, dim)
    sd[p + "attention.wv.weight"] = w(kv, dim)
    sd[p + "attention.wo.weight"] = w(dim, dim)
    sd[p + "feed_forward.w1.weight"] = w(HIDDEN, dim)
    sd[p + "feed_forward.w2.weight"] = w(dim, HIDDEN)
    sd[p + "feed_forward.w3.weight"] = w(HIDDEN, dim)
    sd[p + "attention_norm.weight"] = 1.0 + 0.1 * torch.randn(dim, generator=g)
    sd[p + "ffn_norm.weight"] = 1.0 + 0.1 * torch.randn(dim, generator=g)
    sd["norm.weight"] = 1.0 + 0.1 * torch.randn(dim, generator=g)
    sd["output.weight"] = w(VOCAB, dim)
    torch.save(sd, os.path.join(out_dir, "consolidated.00.pth"))
    with open(os.path.join(out_dir, "params.json"), "w") as f:
        json.dump(PARAMS, f)


if __name__ == "__main__":
    main(sys.argv[1])
