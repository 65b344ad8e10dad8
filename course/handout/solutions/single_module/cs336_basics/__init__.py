"""The basics assignment in one module, written without type annotations.

An independent solution kept by the course staff to prove that the test suite grades the
assignment's contract and nothing more: one file, its own helper names, PyTorch's order of
AdamW's decoupled weight decay (decay first, eps added to the bias-corrected root).
"""

import contextlib
import math
import os
from collections import Counter, defaultdict

import numpy as np
import regex
import torch
from torch import nn

# ----------------------------------------------------------------------------- layers


class Linear(nn.Module):
    def __init__(self, in_features, out_features, device=None, dtype=None):
        super().__init__()
        sigma = math.sqrt(2.0 / (in_features + out_features))
        w = torch.empty(out_features, in_features, device=device, dtype=dtype)
        self.weight = nn.Parameter(nn.init.trunc_normal_(w, 0.0, sigma, -3 * sigma, 3 * sigma))

    def forward(self, x):
        return torch.einsum("...i,oi->...o", x, self.weight)


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        w = torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype)
        self.weight = nn.Parameter(nn.init.trunc_normal_(w, 0.0, 1.0, -3.0, 3.0))

    def forward(self, token_ids):
        return self.weight[token_ids]


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x):
        original = x.dtype
        x32 = x.to(torch.float32)
        inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (x32 * inv_rms * self.weight.to(torch.float32)).to(original)


def silu(x):
    return x * torch.sigmoid(x)


def softmax(x, dim):
    shifted = x - x.amax(dim=dim, keepdim=True)
    e = torch.exp(shifted)
    return e / e.sum(dim=dim, keepdim=True)


class SwiGLU(nn.Module):
    def __init__(self, d_model, d_ff, device=None, dtype=None):
        super().__init__()
        self.w1 = Linear(d_model, d_ff, device, dtype)
        self.w2 = Linear(d_ff, d_model, device, dtype)
        self.w3 = Linear(d_model, d_ff, device, dtype)

    def forward(self, x):
        return self.w2(silu(self.w1(x)) * self.w3(x))


class SiLUMLP(nn.Module):
    def __init__(self, d_model, d_ff, device=None, dtype=None):
        super().__init__()
        self.w1 = Linear(d_model, d_ff, device, dtype)
        self.w2 = Linear(d_ff, d_model, device, dtype)

    def forward(self, x):
        return self.w2(silu(self.w1(x)))


class RotaryPositionalEmbedding(nn.Module):
    def __init__(self, theta, d_k, max_seq_len, device=None):
        super().__init__()
        if d_k % 2:
            raise ValueError("RoPE needs an even d_k")
        inv_freq = theta ** (-torch.arange(0, d_k, 2, dtype=torch.float64, device=device) / d_k)
        angles = torch.outer(
            torch.arange(max_seq_len, dtype=torch.float64, device=device), inv_freq
        )
        self.register_buffer("cos_table", angles.cos().float(), persistent=False)
        self.register_buffer("sin_table", angles.sin().float(), persistent=False)

    def forward(self, x, token_positions):
        cos = self.cos_table[token_positions]
        sin = self.sin_table[token_positions]
        even, odd = x[..., 0::2].float(), x[..., 1::2].float()
        rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
        return rotated.flatten(-2).to(x.dtype)


def scaled_dot_product_attention(q, k, v, mask=None):
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.matmul(softmax(scores, dim=-1), v)


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, rope=None, device=None, dtype=None):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.num_heads = num_heads
        self.rope = rope
        self.q_proj = Linear(d_model, d_model, device, dtype)
        self.k_proj = Linear(d_model, d_model, device, dtype)
        self.v_proj = Linear(d_model, d_model, device, dtype)
        self.output_proj = Linear(d_model, d_model, device, dtype)

    def split_heads(self, t):
        t = t.unflatten(-1, (self.num_heads, t.shape[-1] // self.num_heads))
        return t.transpose(-2, -3)

    def forward(self, x, token_positions=None):
        seq = x.shape[-2]
        q = self.split_heads(self.q_proj(x))
        k = self.split_heads(self.k_proj(x))
        v = self.split_heads(self.v_proj(x))
        if self.rope is not None:
            if token_positions is None:
                token_positions = torch.arange(seq, device=x.device)
            positions = token_positions.unsqueeze(-2)  # broadcast over the head axis
            q = self.rope(q, positions)
            k = self.rope(k, positions)
        causal = torch.ones(seq, seq, dtype=torch.bool, device=x.device).tril()
        out = scaled_dot_product_attention(q, k, v, causal)
        return self.output_proj(out.transpose(-2, -3).flatten(-2))


class TransformerBlock(nn.Module):
    def __init__(
        self,
        d_model,
        num_heads,
        d_ff,
        max_seq_len,
        theta,
        norm_placement="pre",
        position_encoding="rope",
        ffn="swiglu",
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.norm_placement = norm_placement
        rope = None
        if position_encoding == "rope":
            rope = RotaryPositionalEmbedding(theta, d_model // num_heads, max_seq_len, device)
        self.attn = MultiHeadSelfAttention(d_model, num_heads, rope, device, dtype)
        self.ffn = (SwiGLU if ffn == "swiglu" else SiLUMLP)(d_model, d_ff, device, dtype)
        if norm_placement != "none":
            self.ln1 = RMSNorm(d_model, device=device, dtype=dtype)
            self.ln2 = RMSNorm(d_model, device=device, dtype=dtype)

    def forward(self, x):
        if self.norm_placement == "pre":
            x = x + self.attn(self.ln1(x))
            return x + self.ffn(self.ln2(x))
        if self.norm_placement == "post":
            x = self.ln1(x + self.attn(x))
            return self.ln2(x + self.ffn(x))
        x = x + self.attn(x)
        return x + self.ffn(x)


class TransformerLM(nn.Module):
    def __init__(
        self,
        vocab_size,
        context_length,
        d_model,
        num_layers,
        num_heads,
        d_ff,
        rope_theta,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.context_length = context_length
        self.token_embeddings = Embedding(vocab_size, d_model, device, dtype)
        self.layers = nn.ModuleList(
            TransformerBlock(
                d_model, num_heads, d_ff, context_length, rope_theta, device=device, dtype=dtype
            )
            for _ in range(num_layers)
        )
        self.ln_final = RMSNorm(d_model, device=device, dtype=dtype)
        self.lm_head = Linear(d_model, vocab_size, device, dtype)

    def forward(self, in_indices):
        if in_indices.shape[-1] > self.context_length:
            raise ValueError("input longer than the context_length")
        h = self.token_embeddings(in_indices)
        for layer in self.layers:
            h = layer(h)
        return self.lm_head(self.ln_final(h))


# ----------------------------------------------------------------------------- training


def cross_entropy(logits, targets):
    logits = logits.reshape(-1, logits.shape[-1])
    targets = targets.reshape(-1)
    top = logits.max(dim=-1, keepdim=True).values
    log_normaliser = top.squeeze(-1) + torch.log(torch.exp(logits - top).sum(dim=-1))
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return (log_normaliser - picked).mean()


def clip_gradients(parameters, max_l2_norm, eps=1e-6):
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return
    norm = torch.sqrt(sum((g.detach().float() ** 2).sum() for g in grads))
    if norm > max_l2_norm:
        for g in grads:
            g.mul_(max_l2_norm / (norm + eps))


class AdamW(torch.optim.Optimizer):
    """Decay first, then the Adam step, as torch.optim.AdamW does."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        if lr < 0:
            raise ValueError("invalid learning rate")
        if not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError("invalid betas")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None if closure is None else closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                t = state["step"]
                p.mul_(1 - group["lr"] * group["weight_decay"])
                state["exp_avg"].lerp_(p.grad, 1 - beta1)
                state["exp_avg_sq"].mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                root = (state["exp_avg_sq"] / (1 - beta2**t)).sqrt().add_(group["eps"])
                p.addcdiv_(state["exp_avg"], root, value=-group["lr"] / (1 - beta1**t))
        return loss


def cosine_lr(it, lr_max, lr_min, warmup_iters, cosine_cycle_iters):
    if it < warmup_iters:
        return lr_max * it / warmup_iters
    if it <= cosine_cycle_iters:
        phase = (it - warmup_iters) / (cosine_cycle_iters - warmup_iters)
        return lr_min + 0.5 * (1 + math.cos(math.pi * phase)) * (lr_max - lr_min)
    return lr_min


def get_batch(dataset, batch_size, context_length, device):
    starts = torch.randint(0, len(dataset) - context_length, (batch_size,))
    offsets = torch.arange(context_length + 1)
    windows = torch.from_numpy(
        np.asarray(dataset[(starts[:, None] + offsets).numpy()], dtype=np.int64)
    )
    return windows[:, :-1].to(device), windows[:, 1:].to(device)


def unwrap(model):
    while True:
        if isinstance(model, nn.parallel.DistributedDataParallel):
            model = model.module
        elif hasattr(model, "_orig_mod"):
            model = model._orig_mod
        else:
            return model


def save_checkpoint(model, optimizer, iteration, out):
    blob = {
        "model": unwrap(model).state_dict(),
        "optimizer": optimizer.state_dict(),
        "iteration": iteration,
    }
    torch.save(blob, out)


def load_checkpoint(src, model, optimizer):
    blob = torch.load(src, weights_only=True)
    unwrap(model).load_state_dict(blob["model"])
    optimizer.load_state_dict(blob["optimizer"])
    return blob["iteration"]


def train_loop(
    model,
    tokens,
    batch_size,
    steps,
    lr_max,
    lr_min,
    warmup,
    weight_decay,
    max_norm,
    out_dir,
    device,
):
    model.to(device)
    optimizer = AdamW(model.parameters(), lr=lr_max, betas=(0.9, 0.95), weight_decay=weight_decay)
    for it in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = cosine_lr(it, lr_max, lr_min, warmup, steps)
        x, y = get_batch(tokens, batch_size, model.context_length, device)
        loss = cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        clip_gradients(model.parameters(), max_norm)
        optimizer.step()
    os.makedirs(out_dir, exist_ok=True)
    save_checkpoint(model, optimizer, steps, os.path.join(out_dir, "final.pt"))
    return model


def accumulate_gradients(model, micro_batches):
    model.zero_grad(set_to_none=True)
    mean = 0.0
    for i, (x, y) in enumerate(micro_batches):
        defer = hasattr(model, "no_sync") and i < len(micro_batches) - 1
        with model.no_sync() if defer else contextlib.nullcontext():
            loss = cross_entropy(model(x), y) / len(micro_batches)
            loss.backward()
        mean = mean + loss.detach()
    return mean


@torch.no_grad()
def evaluate(model, tokens, batch_size, context_length, num_batches, device):
    mode = model.training
    model.eval()
    generator = torch.Generator().manual_seed(0)
    total = 0.0
    for _ in range(num_batches):
        starts = torch.randint(0, len(tokens) - context_length, (batch_size,), generator=generator)
        offsets = torch.arange(context_length + 1)
        rows = np.asarray(tokens[(starts[:, None] + offsets).numpy()], dtype=np.int64)
        windows = torch.from_numpy(rows).to(device)
        total += cross_entropy(model(windows[:, :-1]), windows[:, 1:]).item()
    model.train(mode)
    return total / num_batches


# ----------------------------------------------------------------------------- decoding


def nucleus(probs, top_p):
    ordered, order = torch.sort(probs, descending=True, stable=True)
    before = torch.cumsum(ordered, 0) - ordered
    ordered[before >= top_p] = 0
    kept = torch.zeros_like(probs)
    kept[order] = ordered
    return kept / kept.sum()


def next_token(logits, temperature, top_p, generator=None):
    if temperature == 0:
        return int(torch.argmax(logits))
    probs = nucleus(softmax(logits.double() / temperature, dim=-1), top_p)
    return int(torch.multinomial(probs, 1, generator=generator))


@torch.no_grad()
def decode(model, prompt, max_new_tokens, temperature=1.0, top_p=1.0, end_id=None):
    ids = list(prompt)
    new = []
    device = next(model.parameters()).device
    for _ in range(max_new_tokens):
        window = torch.tensor([ids[-model.context_length :]], device=device)
        choice = next_token(model(window)[0, -1], temperature, top_p)
        ids.append(choice)
        new.append(choice)
        if choice == end_id:
            break
    return new


# ----------------------------------------------------------------------------- accounting


def parameter_count(vocab_size, d_model, num_layers, d_ff):
    per_layer = 4 * d_model * d_model + 3 * d_model * d_ff + 2 * d_model
    return num_layers * per_layer + 2 * vocab_size * d_model + d_model


def forward_flops(vocab_size, d_model, num_layers, d_ff, batch_size, seq_len):
    n = batch_size * seq_len
    attention = 8 * n * d_model * d_model + 4 * batch_size * seq_len * seq_len * d_model
    return num_layers * (attention + 6 * n * d_model * d_ff) + 2 * n * d_model * vocab_size


# ----------------------------------------------------------------------------- BPE

SPLIT_PATTERN = regex.compile(
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
)


def specials_pattern(special_tokens):
    if not special_tokens:
        return None
    ordered = sorted(special_tokens, key=len, reverse=True)
    return regex.compile("(" + "|".join(regex.escape(s) for s in ordered) + ")")


def train_bpe(input_path, vocab_size, special_tokens):
    with open(input_path, "rb") as f:
        text = f.read().decode("utf-8")
    pattern = specials_pattern(special_tokens)
    pieces = pattern.split(text)[::2] if pattern else [text]
    counts = Counter()
    for piece in pieces:
        counts.update(m.encode("utf-8") for m in SPLIT_PATTERN.findall(piece))

    vocab = {i: bytes([i]) for i in range(256)}
    for s in special_tokens:
        vocab[len(vocab)] = s.encode("utf-8")
    words = [[bytes([b]) for b in w] for w in counts]
    freq = list(counts.values())
    pair_counts = Counter()
    where = defaultdict(set)
    for i, w in enumerate(words):
        for pair in zip(w, w[1:], strict=False):
            pair_counts[pair] += freq[i]
            where[pair].add(i)

    merges = []
    while len(vocab) < vocab_size and pair_counts:
        best = max(pair_counts.items(), key=lambda kv: (kv[1], kv[0]))[0]
        merges.append(best)
        joined = best[0] + best[1]
        vocab[len(vocab)] = joined
        for i in where.pop(best):
            w = words[i]
            for pair in zip(w, w[1:], strict=False):
                pair_counts[pair] -= freq[i]
                if pair_counts[pair] <= 0:
                    del pair_counts[pair]
            merged, j = [], 0
            while j < len(w):
                if j + 1 < len(w) and w[j] == best[0] and w[j + 1] == best[1]:
                    merged.append(joined)
                    j += 2
                else:
                    merged.append(w[j])
                    j += 1
            words[i] = merged
            for pair in zip(merged, merged[1:], strict=False):
                pair_counts[pair] += freq[i]
                where[pair].add(i)
    return vocab, merges


class Tokenizer:
    def __init__(self, vocab, merges, special_tokens=None):
        self.id_to_bytes = dict(vocab)
        self.specials = list(dict.fromkeys(special_tokens or []))
        known = set(self.id_to_bytes.values())
        for s in self.specials:
            if s.encode("utf-8") not in known:
                self.id_to_bytes[max(self.id_to_bytes) + 1] = s.encode("utf-8")
        self.bytes_to_id = {b: i for i, b in self.id_to_bytes.items()}
        self.rank = {pair: r for r, pair in enumerate(merges)}
        self.special_re = specials_pattern(self.specials)
        self.cache = {}

    def word_ids(self, word):
        if word in self.cache:
            return self.cache[word]
        parts = [bytes([b]) for b in word.encode("utf-8")]
        while len(parts) > 1:
            ranked = [
                (self.rank.get(p, math.inf), k)
                for k, p in enumerate(zip(parts, parts[1:], strict=False))
            ]
            r, k = min(ranked)
            if r == math.inf:
                break
            parts[k : k + 2] = [parts[k] + parts[k + 1]]
        ids = [self.bytes_to_id[p] for p in parts]
        if len(self.cache) < 200_000:
            self.cache[word] = ids
        return ids

    def encode(self, text):
        out = []
        pieces = self.special_re.split(text) if self.special_re else [text]
        for n, piece in enumerate(pieces):
            if n % 2:
                out.append(self.bytes_to_id[piece.encode("utf-8")])
            else:
                for word in SPLIT_PATTERN.findall(piece):
                    out.extend(self.word_ids(word))
        return out

    def safe_cut(self, buffer):
        """Where the buffer can be cut without changing how the whole text encodes: before any
        tail that may start a special token, then before the last two pre-tokens (the last
        one may grow, and a cut contraction like "'l" + "l" changes the one before it)."""
        cut = len(buffer)
        longest = max((len(s) for s in self.specials), default=0)
        for p in range(max(0, len(buffer) - longest + 1), len(buffer)):
            tail = buffer[p:]
            if any(len(s) > len(tail) and s.startswith(tail) for s in self.specials):
                cut = p
                break
        if self.special_re:  # never split a special token the whole buffer already holds
            for m in self.special_re.finditer(buffer):
                if m.start() < cut < m.end():
                    cut = m.start()
        head = buffer[:cut]
        pieces = self.special_re.split(head) if self.special_re else [head]
        if len(pieces) % 2 == 1 and pieces[-1]:
            starts = [m.start() for m in SPLIT_PATTERN.finditer(pieces[-1])]
            cut = len(head) - len(pieces[-1]) + starts[max(0, len(starts) - 2)]
        return cut

    def encode_iterable(self, iterable):
        buffer = ""
        for chunk in iterable:
            buffer += chunk
            cut = self.safe_cut(buffer)
            if cut:
                yield from self.encode(buffer[:cut])
                buffer = buffer[cut:]
        yield from self.encode(buffer)

    def decode(self, ids):
        return b"".join(self.id_to_bytes[i] for i in ids).decode("utf-8", errors="replace")
