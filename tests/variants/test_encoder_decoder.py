"""Encoder-decoder layers and a seq2seq model against ``torch.nn.Transformer*`` (post-LN, GELU)."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .adapters import (
    get_named_variant,
    run_decoder_layer,
    run_encoder_layer,
    run_seq2seq,
    run_sinusoidal_positions,
)

D_MODEL, HEADS, D_FF, EPS = 32, 4, 64, 1e-5


def randomised(module: nn.Module) -> nn.Module:
    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.normal_(0.0, 0.2 if parameter.ndim > 1 else 1.0)
    return module.eval()


def torch_layer(kind: type) -> nn.Module:
    return randomised(
        kind(
            D_MODEL,
            HEADS,
            D_FF,
            dropout=0.0,
            activation="gelu",
            layer_norm_eps=EPS,
            batch_first=True,
            norm_first=False,
        )
    )


def attention_weights(attention: nn.MultiheadAttention, prefix: str) -> dict[str, Tensor]:
    q, k, v = attention.in_proj_weight.chunk(3)
    q_bias, k_bias, v_bias = attention.in_proj_bias.chunk(3)
    return {
        f"{prefix}.q_proj.weight": q,
        f"{prefix}.q_proj.bias": q_bias,
        f"{prefix}.k_proj.weight": k,
        f"{prefix}.k_proj.bias": k_bias,
        f"{prefix}.v_proj.weight": v,
        f"{prefix}.v_proj.bias": v_bias,
        f"{prefix}.output_proj.weight": attention.out_proj.weight,
        f"{prefix}.output_proj.bias": attention.out_proj.bias,
    }


def layer_weights(layer: nn.Module) -> dict[str, Tensor]:
    weights = attention_weights(layer.self_attn, "self_attn")
    if isinstance(layer, nn.TransformerDecoderLayer):
        weights |= attention_weights(layer.multihead_attn, "cross_attn")
        weights |= {"ln3.weight": layer.norm3.weight, "ln3.bias": layer.norm3.bias}
    return weights | {
        "ffn.w1.weight": layer.linear1.weight,
        "ffn.w1.bias": layer.linear1.bias,
        "ffn.w2.weight": layer.linear2.weight,
        "ffn.w2.bias": layer.linear2.bias,
        "ln1.weight": layer.norm1.weight,
        "ln1.bias": layer.norm1.bias,
        "ln2.weight": layer.norm2.weight,
        "ln2.bias": layer.norm2.bias,
    }


def features(seq: int, seed: int) -> Tensor:
    return torch.randn(2, seq, D_MODEL, generator=torch.Generator().manual_seed(seed))


def test_encoder_decoder_encoder_layer_matches_torch() -> None:
    layer, x = torch_layer(nn.TransformerEncoderLayer), features(7, 1)
    with torch.no_grad():
        expected = layer(x)
        actual = run_encoder_layer(D_MODEL, HEADS, D_FF, EPS, layer_weights(layer), x)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)


def test_encoder_decoder_decoder_layer_matches_torch() -> None:
    layer, x, memory = torch_layer(nn.TransformerDecoderLayer), features(6, 2), features(9, 3)
    with torch.no_grad():
        expected = layer(
            x,
            memory,
            tgt_mask=nn.Transformer.generate_square_subsequent_mask(6),
            tgt_is_causal=True,
        )
        actual = run_decoder_layer(D_MODEL, HEADS, D_FF, EPS, layer_weights(layer), x, memory)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)


def test_encoder_decoder_decoder_layer_is_causal() -> None:
    layer, x, memory = torch_layer(nn.TransformerDecoderLayer), features(6, 2), features(9, 3)
    with torch.no_grad():
        full = run_decoder_layer(D_MODEL, HEADS, D_FF, EPS, layer_weights(layer), x, memory)
        prefix = run_decoder_layer(
            D_MODEL, HEADS, D_FF, EPS, layer_weights(layer), x[:, :4], memory
        )
    torch.testing.assert_close(prefix, full[:, :4], atol=1e-5, rtol=1e-5)


def test_encoder_decoder_seq2seq_matches_torch_stack() -> None:
    """A 2+2-layer seq2seq model against nn.TransformerEncoder/Decoder stacks with the same
    embedding, sqrt(d_model) scaling, sinusoidal positions and head."""
    vocab, context = 53, 16
    encoder = nn.TransformerEncoder(
        torch_layer(nn.TransformerEncoderLayer), 2, enable_nested_tensor=False
    )
    decoder = nn.TransformerDecoder(torch_layer(nn.TransformerDecoderLayer), 2)
    randomised(encoder), randomised(decoder)
    embedding, head = torch.randn(vocab, D_MODEL), torch.randn(vocab, D_MODEL) * 0.2
    source = torch.randint(0, vocab, (2, 9), generator=torch.Generator().manual_seed(4))
    target = torch.randint(0, vocab, (2, 6), generator=torch.Generator().manual_seed(5))

    def embed(ids: Tensor) -> Tensor:
        positions = torch.arange(ids.shape[1], dtype=torch.float64)[:, None]
        rates = 10000.0 ** (-torch.arange(0, D_MODEL, 2, dtype=torch.float64) / D_MODEL)
        table = torch.zeros(ids.shape[1], D_MODEL, dtype=torch.float64)
        table[:, 0::2], table[:, 1::2] = torch.sin(positions * rates), torch.cos(positions * rates)
        return embedding[ids] * math.sqrt(D_MODEL) + table.float()

    weights = {"token_embeddings.weight": embedding, "lm_head.weight": head}
    for i in range(2):
        weights |= {
            f"encoder_layers.{i}.{k}": v for k, v in layer_weights(encoder.layers[i]).items()
        }
        weights |= {
            f"decoder_layers.{i}.{k}": v for k, v in layer_weights(decoder.layers[i]).items()
        }
    config = dict(
        vocab_size=vocab,
        context_length=context,
        d_model=D_MODEL,
        num_heads=HEADS,
        d_ff=D_FF,
        num_encoder_layers=2,
        num_decoder_layers=2,
        norm_eps=EPS,
    )
    with torch.no_grad():
        mask = nn.Transformer.generate_square_subsequent_mask(6)
        expected = (
            decoder(embed(target), encoder(embed(source)), tgt_mask=mask, tgt_is_causal=True)
            @ head.T
        )
        actual = run_seq2seq(config, weights, source, target)
    torch.testing.assert_close(actual, expected, atol=5e-5, rtol=1e-5)
    # The same model from the transformer_base builder, given the sizes in HF Marian's names.
    model, named = get_named_variant(
        "transformer_base",
        vocab_size=vocab,
        max_position_embeddings=context,
        d_model=D_MODEL,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=HEADS,
        decoder_attention_heads=HEADS,
        encoder_ffn_dim=D_FF,
        decoder_ffn_dim=D_FF,
        layer_norm_eps=EPS,
    )
    assert named == config
    model.load_state_dict(weights)
    with torch.no_grad():
        torch.testing.assert_close(model(source, target), expected, atol=5e-5, rtol=1e-5)


def test_sinusoidal_position_encoding_matches_formula() -> None:
    positions = torch.tensor([[0, 1, 5, 15], [3, 3, 2, 0]])
    actual = run_sinusoidal_positions(12, 16, positions)
    p = positions[..., None].double()
    i = torch.arange(6, dtype=torch.float64)
    expected = torch.stack(
        (torch.sin(p / 10000 ** (2 * i / 12)), torch.cos(p / 10000 ** (2 * i / 12))), -1
    )
    torch.testing.assert_close(actual, expected.flatten(-2).float())
