"""Float64 PyTorch reference models (GPT-2 and Llama) and the file formats zerotrain reads.

Written from the math, independent of zerotrain's code and of Hugging Face's modelling code:
  GPT-2: learned positions, pre-LayerNorm blocks (eps 1e-5), Conv1D weights [in, out], causal
         attention scaled by 1/sqrt(head size), GELU (tanh form), tied head (logits = x·wteᵀ).
  Llama: RMSNorm (x / sqrt(mean x² + eps) · w), rotary embedding in the rotate-half convention
         with f_i = theta^(−2i/hs), grouped-query attention (K/V heads repeated: query head h
         reads K/V head h // (H/Hkv)), SwiGLU MLP, nn.Linear weights [out, in], untied or tied head.
Loss: mean cross-entropy over all positions (nats).

Files: safetensors written and read by hand (8-byte header length, JSON header, data block) so
the `safetensors` package is not needed; token files as raw little-endian uint16 (nanoGPT's
format, `tokens:PATH` in zerotrain).
"""
import json
import math
import os
import struct
import subprocess
import sys

try:
    import torch
except ImportError as e:
    print(f"SKIPPED: torch is not importable by {sys.executable} ({e}); scripts/setup.sh installs Debian's "
          f"python3-torch for /usr/bin/python3")
    sys.exit(77)  # ctest: skipped

DT = torch.float64
BIN = os.environ.get("ZT_BIN", "build/zerotrain")
MPIEXEC = os.environ.get("ZT_MPIEXEC", "mpirun")
MPI_FLAGS = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-x", "OMP_NUM_THREADS=1",
             "-x", "OPENBLAS_NUM_THREADS=1", "-x", "ZT_COMM_TIMEOUT_S=60"]


def train(args, metrics):
    """`zerotrain train ARGS --metrics METRICS` at 1 rank on the CPU: (process, metrics rows)."""
    cmd = [MPIEXEC, "-np", "1"] + MPI_FLAGS + [BIN, "train", "--device", "cpu", "--metrics", metrics] + list(args)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    rows = []
    if p.returncode == 0:
        with open(metrics) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    return p, rows


# ---- files ---------------------------------------------------------------------------------

def write_safetensors(path, tensors):
    """tensors: name -> torch tensor, written as fp32 in insertion order."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """name -> float64 tensor (F32 files only, what model_dump writes)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        if e["dtype"] != "F32":
            raise ValueError(f"{path}: tensor {name} has dtype {e['dtype']}, expected F32")
        b, end = e["data_offsets"]
        t = torch.frombuffer(bytearray(data[b:end]), dtype=torch.float32) if end > b else torch.zeros(0)
        out[name] = t.to(DT).reshape(e["shape"])
    return out


def write_tokens(path, tokens):
    with open(path, "wb") as f:
        f.write(struct.pack(f"<{len(tokens)}H", *tokens))


def trainer_batch(tokens, T, B, k=0):
    """Global batch k of the trainer's token-file stream (docs/data.md): S = (N-1)//T sequences
    per pass, sequence i is the T+1 tokens at offset (i mod S)·T; batch k holds k·B .. k·B+B-1.
    Returns (inputs, targets) as int64 [B, T]."""
    S = (len(tokens) - 1) // T
    seqs = []
    for i in range(k * B, k * B + B):
        o = (i % S) * T
        seqs.append(tokens[o:o + T + 1])
    s = torch.tensor(seqs, dtype=torch.int64)
    return s[:, :T], s[:, 1:]


# ---- shared pieces -------------------------------------------------------------------------

def causal_attention(q, k, v):
    """q [B,H,T,hs], k/v [B,H,T,hs] -> [B,H,T,hs]; softmax(q·kᵀ/sqrt(hs)) over keys <= query."""
    T, hs = q.shape[2], q.shape[3]
    s = q @ k.transpose(-1, -2) / math.sqrt(hs)
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def cross_entropy(logits, targets):
    V = logits.shape[-1]
    return torch.nn.functional.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def rms_norm(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


# ---- GPT-2 -------------------------------------------------------------------------------

def gpt_param_shapes(cfg):
    V, T, L, C = cfg["vocab_size"], cfg["n_ctx"], cfg["n_layer"], cfg["n_embd"]
    shapes = {"wte.weight": [V, C], "wpe.weight": [T, C]}
    for l in range(L):
        h = f"h.{l}."
        shapes.update({h + "ln_1.weight": [C], h + "ln_1.bias": [C], h + "attn.c_attn.weight": [C, 3 * C],
                       h + "attn.c_attn.bias": [3 * C], h + "attn.c_proj.weight": [C, C], h + "attn.c_proj.bias": [C],
                       h + "ln_2.weight": [C], h + "ln_2.bias": [C], h + "mlp.c_fc.weight": [C, 4 * C],
                       h + "mlp.c_fc.bias": [4 * C], h + "mlp.c_proj.weight": [4 * C, C], h + "mlp.c_proj.bias": [C]})
    shapes.update({"ln_f.weight": [C], "ln_f.bias": [C]})
    return shapes


def random_params(shapes, seed, std=0.3):
    """Weights N(0, std) (large enough that every term matters), norm weights 1 + N(0, 0.2),
    biases N(0, 0.1): zero biases and unit norms would hide bugs in their gradients."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, shape in shapes.items():
        r = torch.randn(shape, generator=g, dtype=DT)
        if "ln" in name or "norm" in name:
            out[name] = 1.0 + 0.2 * r if name.endswith("weight") else 0.1 * r
        elif name.endswith("bias"):
            out[name] = 0.1 * r
        else:
            out[name] = std * r
    # What the file holds is fp32: the reference starts from exactly the same values.
    return {k: v.to(torch.float32).to(DT) for k, v in out.items()}


def gpt_logits(p, cfg, idx):
    B, T = idx.shape
    C, H = cfg["n_embd"], cfg["n_head"]
    hs = C // H
    x = p["wte.weight"][idx] + p["wpe.weight"][:T]
    for l in range(cfg["n_layer"]):
        h = f"h.{l}."
        a = layer_norm(x, p[h + "ln_1.weight"], p[h + "ln_1.bias"])
        qkv = a @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"]
        q, k, v = (t.reshape(B, T, H, hs).transpose(1, 2) for t in qkv.split(C, dim=-1))
        y = causal_attention(q, k, v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"]
        m = layer_norm(x, p[h + "ln_2.weight"], p[h + "ln_2.bias"])
        f = gelu_tanh(m @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"])
        x = x + f @ p[h + "mlp.c_proj.weight"] + p[h + "mlp.c_proj.bias"]
    x = layer_norm(x, p["ln_f.weight"], p["ln_f.bias"])
    return x @ p["wte.weight"].t()


# ---- Llama ---------------------------------------------------------------------------------

def llama_head_dim(cfg):
    return cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])


def llama_param_shapes(cfg):
    V, C, I = cfg["vocab_size"], cfg["hidden_size"], cfg["intermediate_size"]
    H, Hkv, hs = cfg["num_attention_heads"], cfg["num_key_value_heads"], llama_head_dim(cfg)
    shapes = {"model.embed_tokens.weight": [V, C]}
    for l in range(cfg["num_hidden_layers"]):
        h = f"model.layers.{l}."
        shapes.update({h + "input_layernorm.weight": [C], h + "self_attn.q_proj.weight": [H * hs, C],
                       h + "self_attn.k_proj.weight": [Hkv * hs, C], h + "self_attn.v_proj.weight": [Hkv * hs, C],
                       h + "self_attn.o_proj.weight": [C, H * hs], h + "post_attention_layernorm.weight": [C],
                       h + "mlp.gate_proj.weight": [I, C], h + "mlp.up_proj.weight": [I, C],
                       h + "mlp.down_proj.weight": [C, I]})
    shapes["model.norm.weight"] = [C]
    if not cfg.get("tie_word_embeddings", False):
        shapes["lm_head.weight"] = [V, C]
    return shapes


def llama3_frequencies(f, s):
    """Llama 3's rescaled inverse frequencies (transformers' rope_type "llama3"), written from its
    definition: by wavelength, high frequencies kept, low ones divided by the factor, a blend between."""
    factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    old = s["original_max_position_embeddings"]
    wavelength = 2 * math.pi / f
    slow = torch.where(wavelength > old / low, f / factor, f)
    smooth = (old / wavelength - low) / (high - low)
    blended = (1 - smooth) * slow / factor + smooth * slow
    medium = (wavelength >= old / high) & (wavelength <= old / low)
    return torch.where(medium, blended, slow)


def rotary(x, theta, scaling=None):
    """x [B,nh,T,hs] at positions 0..T-1, rotate-half convention; scaling: a rope_scaling dict."""
    T, hs = x.shape[2], x.shape[3]
    f = theta ** (-torch.arange(0, hs // 2, dtype=DT) * 2.0 / hs)
    if scaling:
        f = llama3_frequencies(f, scaling)
    ang = torch.arange(T, dtype=DT)[:, None] * f[None, :]
    cos, sin = torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)
    x1, x2 = x[..., :hs // 2], x[..., hs // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def llama_logits(p, cfg, idx):
    B, T = idx.shape
    H, Hkv, hs = cfg["num_attention_heads"], cfg["num_key_value_heads"], llama_head_dim(cfg)
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    x = p["model.embed_tokens.weight"][idx]
    for l in range(cfg["num_hidden_layers"]):
        h = f"model.layers.{l}."
        a = rms_norm(x, p[h + "input_layernorm.weight"], eps)
        q = (a @ p[h + "self_attn.q_proj.weight"].t()).reshape(B, T, H, hs).transpose(1, 2)
        k = (a @ p[h + "self_attn.k_proj.weight"].t()).reshape(B, T, Hkv, hs).transpose(1, 2)
        v = (a @ p[h + "self_attn.v_proj.weight"].t()).reshape(B, T, Hkv, hs).transpose(1, 2)
        q, k = rotary(q, theta, cfg.get("rope_scaling")), rotary(k, theta, cfg.get("rope_scaling"))
        k, v = k.repeat_interleave(H // Hkv, dim=1), v.repeat_interleave(H // Hkv, dim=1)
        y = causal_attention(q, k, v).transpose(1, 2).reshape(B, T, H * hs)
        x = x + y @ p[h + "self_attn.o_proj.weight"].t()
        m = rms_norm(x, p[h + "post_attention_layernorm.weight"], eps)
        g, u = m @ p[h + "mlp.gate_proj.weight"].t(), m @ p[h + "mlp.up_proj.weight"].t()
        x = x + (torch.nn.functional.silu(g) * u) @ p[h + "mlp.down_proj.weight"].t()
    x = rms_norm(x, p["model.norm.weight"], eps)
    head = p["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", False) else p["lm_head.weight"]
    return x @ head.t()


def loss_and_grads(logits_fn, params, idx, targets):
    """(loss, logits, {name: grad}) in float64 by autograd."""
    leaves = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    logits = logits_fn(leaves, idx)
    loss = cross_entropy(logits, targets)
    loss.backward()
    return loss.detach(), logits.detach(), {k: v.grad.detach() for k, v in leaves.items()}
