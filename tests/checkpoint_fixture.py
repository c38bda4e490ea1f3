#!/usr/bin/python3
"""Writes tiny random Llama 2 checkpoints in Meta's exact layout with real PyTorch.

Run by Bazel (tests/BUILD.bazel) with Debian's /usr/bin/python3; nothing it
writes is committed. For each model in MODELS it writes, under --out_dir:

  <model>/consolidated.NN.pth   tensors as Meta publishes them, split across
                                NN model-parallel ranks as fairscale does
  <model>/params.json           Meta's fields (vocab_size -1, as Meta ships)
  <model>/checklist.chk         md5sum lines, as Meta ships
  <model>/reference.pt          (MP=1 models only) the unsplit state dict, for
                                bit-exact comparison by tests

plus odd files for the reader's tests:
  odd/shared_storage.pth   tensors that are views into one storage (offsets)
  odd/noncontiguous.pth    a transposed (non-contiguous) tensor
  odd/zip64.pth            tiny_fp32_mp1's shard rewritten with zip64 records
  odd/legacy.pth           the pre-1.6 non-zip format
  odd/parameter.pth        nn.Parameter values and integer and half tensors
  odd/protocol[45].pth     the same saved with pickle protocols 4 and 5
  odd/*.pkl                data.pkl records of the files above (unpickler fuzz seeds)
  odd/bad_*.pth            hand-built pickles whose tensors do not fit their
                           storages (offset, numel, shape)
  broken/<case>/            checkpoints with one thing wrong each, for the
                           converter's error tests (see write_broken_models)
  manifest.json            {relative .pth path: {tensor: {"dtype", "shape",
                           "sha256"}}} as torch sees each file: the bytes a
                           reader must produce, hashed, for bit-exact checks
"""

import argparse
import collections
import hashlib
import io
import json
import os
import pickle
import struct
import zipfile

import torch

# name: (params, dtype, model-parallel size, seed)
BASE = {"dim": 64, "n_layers": 2, "n_heads": 4, "multiple_of": 32, "norm_eps": 1e-05, "vocab_size": -1}
GQA = {"dim": 64, "n_layers": 2, "n_heads": 8, "n_kv_heads": 2, "multiple_of": 16,
       "ffn_dim_multiplier": 1.3, "norm_eps": 1e-06, "rope_theta": 500000.0, "vocab_size": -1}
MODELS = {
    "tiny_fp32_mp1": (BASE, torch.float32, 1, 1),
    "tiny_fp32_mp2": (BASE, torch.float32, 2, 1),
    "tiny_fp16_mp1": (BASE, torch.float16, 1, 1),
    "gqa_bf16_mp1": (GQA, torch.bfloat16, 1, 2),
    "gqa_bf16_mp2": (GQA, torch.bfloat16, 2, 2),
}

# fairscale's split dimension per tensor kind; None: replicated.
COLUMN_PARALLEL = ("attention.wq", "attention.wk", "attention.wv", "feed_forward.w1", "feed_forward.w3", "output")
ROW_PARALLEL = ("attention.wo", "feed_forward.w2")


def ffn_hidden(params):
    hidden = int(2 * (4 * params["dim"]) / 3)
    if params.get("ffn_dim_multiplier") is not None:
        hidden = int(params["ffn_dim_multiplier"] * hidden)
    m = params["multiple_of"]
    return m * ((hidden + m - 1) // m)


def split_dim(name):
    if name == "tok_embeddings.weight":
        return 1  # ParallelEmbedding splits the embedding dimension.
    if any(name.endswith(k + ".weight") for k in COLUMN_PARALLEL):
        return 0
    if any(name.endswith(k + ".weight") for k in ROW_PARALLEL):
        return 1
    return None


def make_state_dict(params, vocab_size, seed):
    g = torch.Generator().manual_seed(seed)
    dim, n_heads = params["dim"], params["n_heads"]
    n_kv = params.get("n_kv_heads", n_heads)
    hd = dim // n_heads
    hidden = ffn_hidden(params)

    def w(*shape):
        return torch.randn(*shape, generator=g) * (1.0 / shape[-1] ** 0.5)

    sd = {"tok_embeddings.weight": w(vocab_size, dim)}
    for i in range(params["n_layers"]):
        p = f"layers.{i}."
        sd[p + "attention.wq.weight"] = w(n_heads * hd, dim)
        sd[p + "attention.wk.weight"] = w(n_kv * hd, dim)
        sd[p + "attention.wv.weight"] = w(n_kv * hd, dim)
        sd[p + "attention.wo.weight"] = w(dim, n_heads * hd)
        sd[p + "feed_forward.w1.weight"] = w(hidden, dim)
        sd[p + "feed_forward.w2.weight"] = w(dim, hidden)
        sd[p + "feed_forward.w3.weight"] = w(hidden, dim)
        sd[p + "attention_norm.weight"] = 1.0 + 0.1 * torch.randn(dim, generator=g)
        sd[p + "ffn_norm.weight"] = 1.0 + 0.1 * torch.randn(dim, generator=g)
    sd["norm.weight"] = 1.0 + 0.1 * torch.randn(dim, generator=g)
    sd["output.weight"] = w(vocab_size, dim)
    # Meta's Llama 2 shards also carry the rotary frequencies, which the
    # reference ignores (load_state_dict(strict=False)).
    theta = params.get("rope_theta", 10000.0)
    sd["rope.freqs"] = 1.0 / (theta ** (torch.arange(0, hd, 2)[: hd // 2].float() / hd))
    return sd


def md5(path):
    h = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_model(out_dir, name, params, dtype, mp, seed, vocab_size):
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    sd = make_state_dict(params, vocab_size, seed)
    sd = {k: (v if k == "rope.freqs" else v.to(dtype)) for k, v in sd.items()}
    files = []
    for rank in range(mp):
        shard = {}
        for k, v in sd.items():
            dim = split_dim(k)
            shard[k] = v.clone() if dim is None else v.chunk(mp, dim=dim)[rank].clone()
        fname = f"consolidated.{rank:02d}.pth"
        torch.save(shard, os.path.join(d, fname))
        files.append(fname)
    with open(os.path.join(d, "params.json"), "w") as f:
        json.dump(params, f)
    files.append("params.json")
    with open(os.path.join(d, "checklist.chk"), "w") as f:
        for fname in files:
            f.write(f"{md5(os.path.join(d, fname))}  {fname}\n")
    if mp == 1:
        torch.save(sd, os.path.join(d, "reference.pt"))


def rewrite_as_zip64(src, dst):
    """Rewrites a stored-only zip so every central entry uses zip64 fields."""
    with zipfile.ZipFile(src) as zin:
        infos = zin.infolist()
        blobs = [zin.read(i.filename) for i in infos]
    out = bytearray()
    central = bytearray()
    for info, data in zip(infos, blobs):
        name = info.filename.encode()
        offset = len(out)
        crc = zipfile.crc32(data) & 0xFFFFFFFF
        extra = struct.pack("<HHQQ", 0x0001, 16, len(data), len(data))
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, 0, 0, 0, crc, 0xFFFFFFFF, 0xFFFFFFFF,
                           len(name), len(extra)) + name + extra + data
        cextra = struct.pack("<HHQQQ", 0x0001, 24, len(data), len(data), offset)
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, 0, 0, 0, crc,
                               0xFFFFFFFF, 0xFFFFFFFF, len(name), len(cextra), 0, 0, 0, 0,
                               0xFFFFFFFF) + name + cextra
    cd_offset = len(out)
    out += central
    eocd64_offset = len(out)
    out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, len(infos), len(infos),
                       len(central), cd_offset)
    out += struct.pack("<IIQI", 0x07064B50, 0, eocd64_offset, 1)
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFFFFFF,
                       0xFFFFFFFF, 0)
    with open(dst, "wb") as f:
        f.write(out)


def write_odd_files(out_dir):
    d = os.path.join(out_dir, "odd")
    os.makedirs(d, exist_ok=True)
    base = torch.arange(24, dtype=torch.float32)
    torch.save({"a": base[2:8], "b": base[8:20].view(3, 4), "c": base}, os.path.join(d, "shared_storage.pth"))
    torch.save({"t": torch.arange(6, dtype=torch.float32).view(2, 3).t()}, os.path.join(d, "noncontiguous.pth"))
    torch.save({"x": torch.ones(3)}, os.path.join(d, "legacy.pth"), _use_new_zipfile_serialization=False)
    params = {"w": torch.nn.Parameter(torch.full((2, 2), 0.5)),
              "i": torch.arange(5, dtype=torch.int64),
              "h": torch.tensor([1.5, -2.0], dtype=torch.float16)}
    torch.save(params, os.path.join(d, "parameter.pth"))
    for protocol in (4, 5):  # torch.save's default is 2; users may pass others.
        torch.save(params, os.path.join(d, f"protocol{protocol}.pth"), pickle_protocol=protocol)
    rewrite_as_zip64(os.path.join(out_dir, "tiny_fp32_mp1", "consolidated.00.pth"), os.path.join(d, "zip64.pth"))
    for name in ("shared_storage", "parameter"):
        with zipfile.ZipFile(os.path.join(d, name + ".pth")) as z:
            with open(os.path.join(d, name + ".pkl"), "wb") as f:
                f.write(z.read(name + "/data.pkl"))
    # Proves the zip64 file is well-formed to PyTorch's own reader.
    loaded = torch.load(os.path.join(d, "zip64.pth"))
    assert torch.equal(loaded["norm.weight"],
                       torch.load(os.path.join(out_dir, "tiny_fp32_mp1", "consolidated.00.pth"))["norm.weight"])


class _StorageRef:
    def __init__(self, key, numel):
        self.key, self.numel = key, numel


class _TensorSpec:
    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, tuple(size), tuple(stride), False, collections.OrderedDict())


class _TorchLikePickler(pickle.Pickler):
    """Pickles _TensorSpec exactly as torch.save pickles a tensor, with any arguments."""

    def persistent_id(self, obj):
        if isinstance(obj, _StorageRef):
            return ("storage", torch.FloatStorage, obj.key, "cpu", obj.numel)
        return None

    def reducer_override(self, obj):
        if isinstance(obj, _TensorSpec):
            return torch._utils._rebuild_tensor_v2, obj.args
        return NotImplemented


def write_custom_pth(path, tensors, storages):
    prefix = os.path.splitext(os.path.basename(path))[0]
    buf = io.BytesIO()
    _TorchLikePickler(buf, protocol=2).dump(tensors)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{prefix}/data.pkl", buf.getvalue())
        for key, data in storages.items():
            z.writestr(f"{prefix}/data/{key}", data)
        z.writestr(f"{prefix}/version", "3\n")


def write_bad_files(out_dir):
    d = os.path.join(out_dir, "odd")
    data = torch.arange(24, dtype=torch.float32).numpy().tobytes()
    ok = _StorageRef("0", 24)
    write_custom_pth(os.path.join(d, "bad_offset.pth"), {"w": _TensorSpec(ok, 20, [8], [1])}, {"0": data})
    write_custom_pth(os.path.join(d, "bad_numel.pth"),
                     {"w": _TensorSpec(_StorageRef("0", 100), 0, [24], [1])}, {"0": data})
    write_custom_pth(os.path.join(d, "bad_shape.pth"), {"w": _TensorSpec(ok, 0, [5, 6], [6, 1])}, {"0": data})
    write_custom_pth(os.path.join(d, "missing_storage.pth"), {"w": _TensorSpec(_StorageRef("7", 24), 0, [24], [1])},
                     {"0": data})
    write_custom_pth(os.path.join(d, "good_custom.pth"), {"w": _TensorSpec(ok, 4, [2, 3], [3, 1])}, {"0": data})


BROKEN = ["missing_tensor", "extra_tensor", "shape_disagree", "dtype_disagree", "missing_shard",
          "bad_params", "bad_checksum"]


def write_broken_models(out_dir, vocab_size):
    """Each case is tiny_fp32 (MP=1 or MP=2) with one defect."""
    for case in BROKEN:
        mp = 2 if case in ("shape_disagree", "dtype_disagree", "missing_shard") else 1
        d = os.path.join(out_dir, "broken", case)
        write_model(os.path.join(out_dir, "broken"), case, BASE, torch.float32, mp, 1, vocab_size)
        os.remove(os.path.join(d, "reference.pt")) if mp == 1 else None
        shard0 = os.path.join(d, "consolidated.00.pth")
        shard1 = os.path.join(d, "consolidated.01.pth")
        if case == "missing_tensor":
            sd = torch.load(shard0)
            del sd["output.weight"]
            torch.save(sd, shard0)
        elif case == "extra_tensor":
            sd = torch.load(shard0)
            sd["layers.9.attention.wq.weight"] = torch.zeros(2, 2)
            torch.save(sd, shard0)
        elif case == "shape_disagree":
            sd = torch.load(shard1)
            sd["layers.1.attention.wq.weight"] = sd["layers.1.attention.wq.weight"][:-1].clone()
            torch.save(sd, shard1)
        elif case == "dtype_disagree":
            sd = torch.load(shard1)
            sd = {k: v.half() for k, v in sd.items()}
            torch.save(sd, shard1)
        elif case == "missing_shard":
            os.remove(shard1)
        elif case == "bad_params":
            with open(os.path.join(d, "params.json"), "w") as f:
                json.dump(dict(BASE, n_heads="four"), f)
        elif case == "bad_checksum":
            with open(shard0, "r+b") as f:
                f.seek(-100, os.SEEK_END)
                f.write(b"corrupt")


TORCH_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.int64: "i64"}


def write_manifest(out_dir):
    manifest = {}
    for root, dirs, files in os.walk(out_dir):
        dirs[:] = [d for d in dirs if d != "broken"]
        for fname in sorted(files):
            if not fname.endswith(".pth") or fname in ("legacy.pth", "noncontiguous.pth") or fname.startswith(
                    ("bad_", "missing_", "good_")):
                continue
            path = os.path.join(root, fname)
            entries = {}
            for name, t in torch.load(path).items():
                raw = t.detach().contiguous().view(torch.uint8).numpy().tobytes()
                entries[name] = {"dtype": TORCH_DTYPES[t.dtype], "shape": list(t.shape),
                                 "sha256": hashlib.sha256(raw).hexdigest()}
            manifest[os.path.relpath(path, out_dir)] = entries
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)


# Not written by default: a ~2.2 GB bf16 checkpoint (TinyLlama-1.1B's shapes)
# for //tools:convert_bench, made with --bench.
BENCH = {"dim": 2048, "n_layers": 22, "n_heads": 32, "n_kv_heads": 4, "multiple_of": 256,
         "ffn_dim_multiplier": 1.0, "norm_eps": 1e-05, "vocab_size": -1}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out_dir", required=True)
    parser.add_argument("--vocab_size", type=int, default=96)
    parser.add_argument("--tokenizer_model", help="take --vocab_size from this SentencePiece model")
    parser.add_argument("--bench", action="store_true",
                        help="write only bench_bf16_mp2: a multi-GB checkpoint for //tools:convert_bench")
    args = parser.parse_args()
    if args.tokenizer_model:
        import sentencepiece
        args.vocab_size = sentencepiece.SentencePieceProcessor(model_file=args.tokenizer_model).get_piece_size()
    if args.bench:
        write_model(args.out_dir, "bench_bf16_mp2", BENCH, torch.bfloat16, 2, 3, 32000)
        return
    for name, (params, dtype, mp, seed) in MODELS.items():
        write_model(args.out_dir, name, params, dtype, mp, seed, args.vocab_size)
    write_odd_files(args.out_dir)
    write_bad_files(args.out_dir)
    write_broken_models(args.out_dir, args.vocab_size)
    write_manifest(args.out_dir)


if __name__ == "__main__":
    main()
