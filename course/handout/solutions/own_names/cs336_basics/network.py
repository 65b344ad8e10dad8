"""The decoder block and the language model."""

from torch import nn

from .failures import ShapeMismatch
from .mixing import CausalSelfAttention
from .primitives import Dense, GatedMLP, Lookup, PlainMLP, RootMeanSquareNorm
from .rotary import Rotary


class Block(nn.Module):
    def __init__(
        self,
        width,
        heads,
        hidden,
        max_positions,
        theta,
        norms="pre",
        rotary=True,
        gated=True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.norms = norms
        rope = Rotary(theta, width // heads, max_positions, device) if rotary else None
        self.mixer = CausalSelfAttention(width, heads, rope, device, dtype)
        self.mlp = (GatedMLP if gated else PlainMLP)(width, hidden, device, dtype)
        if norms != "none":
            self.norm_attn = RootMeanSquareNorm(width, device=device, dtype=dtype)
            self.norm_mlp = RootMeanSquareNorm(width, device=device, dtype=dtype)

    def forward(self, x):
        if self.norms == "pre":
            x = x + self.mixer(self.norm_attn(x))
            return x + self.mlp(self.norm_mlp(x))
        if self.norms == "post":
            x = self.norm_attn(x + self.mixer(x))
            return self.norm_mlp(x + self.mlp(x))
        x = x + self.mixer(x)
        return x + self.mlp(x)


class LanguageModel(nn.Module):
    def __init__(self, vocab, context, width, depth, heads, hidden, theta, device=None, dtype=None):
        super().__init__()
        self.context = context
        self.embed = Lookup(vocab, width, device, dtype)
        self.blocks = nn.ModuleList(
            Block(width, heads, hidden, context, theta, device=device, dtype=dtype)
            for _ in range(depth)
        )
        self.norm_out = RootMeanSquareNorm(width, device=device, dtype=dtype)
        self.unembed = Dense(width, vocab, device, dtype)

    def forward(self, ids):
        if ids.shape[-1] > self.context:
            raise ShapeMismatch(f"{ids.shape[-1]} tokens exceed the context of {self.context}")
        h = self.embed(ids)
        for block in self.blocks:
            h = block(h)
        return self.unembed(self.norm_out(h))
