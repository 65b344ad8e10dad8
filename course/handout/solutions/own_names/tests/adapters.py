"""Wiring of this solution into the test suite: the suite's (handout) state-dict names are
translated to our own module layout here."""

import re

import torch
from cs336_basics.text.codec import ByteLevelCodec
from cs336_basics.text.merges import learn_bpe

from cs336_basics import (
    budget,
    mixing,
    network,
    optimization,
    persistence,
    primitives,
    rotary,
    runner,
    sampling,
    windows,
)

# handout name -> our name (block level; the LM adds "layers.{i}." -> "blocks.{i}.")
_BLOCK_NAMES = {
    "attn.q_proj.weight": "mixer.wq.w",
    "attn.k_proj.weight": "mixer.wk.w",
    "attn.v_proj.weight": "mixer.wv.w",
    "attn.output_proj.weight": "mixer.wo.w",
    "ln1.weight": "norm_attn.gain",
    "ln2.weight": "norm_mlp.gain",
    "ffn.w1.weight": "mlp.gate.w",
    "ffn.w2.weight": "mlp.down.w",
    "ffn.w3.weight": "mlp.up.w",
}
_LM_NAMES = {
    "token_embeddings.weight": "embed.table",
    "ln_final.weight": "norm_out.gain",
    "lm_head.weight": "unembed.w",
}


def _block_weights(weights):
    return {_BLOCK_NAMES.get(k, k): v for k, v in weights.items()}


def _lm_weights(weights):
    ours = {}
    for name, value in weights.items():
        layer = re.match(r"layers\.(\d+)\.(.*)", name)
        if layer:
            ours[f"blocks.{layer[1]}.{_BLOCK_NAMES.get(layer[2], layer[2])}"] = value
        else:
            ours[_LM_NAMES.get(name, name)] = value
    return ours


def run_linear(d_in, d_out, weights, in_features):
    layer = primitives.Dense(d_in, d_out, dtype=weights.dtype)
    layer.load_state_dict({"w": weights})
    return layer(in_features)


def run_embedding(vocab_size, d_model, weights, token_ids):
    layer = primitives.Lookup(vocab_size, d_model, dtype=weights.dtype)
    layer.load_state_dict({"table": weights})
    return layer(token_ids)


def run_swiglu(d_model, d_ff, w1_weight, w2_weight, w3_weight, in_features):
    layer = primitives.GatedMLP(d_model, d_ff, dtype=w1_weight.dtype)
    layer.load_state_dict({"gate.w": w1_weight, "down.w": w2_weight, "up.w": w3_weight})
    return layer(in_features)


def run_scaled_dot_product_attention(Q, K, V, mask=None):
    return mixing.attend(Q, K, V, mask)


def _attention(d_model, num_heads, rope, q, k, v, o):
    layer = mixing.CausalSelfAttention(d_model, num_heads, rope, dtype=q.dtype)
    layer.load_state_dict({"wq.w": q, "wk.w": k, "wv.w": v, "wo.w": o})
    return layer


def run_multihead_self_attention(
    d_model, num_heads, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features
):
    weights = (q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight)
    return _attention(d_model, num_heads, None, *weights)(in_features)


def run_multihead_self_attention_with_rope(
    d_model,
    num_heads,
    max_seq_len,
    theta,
    q_proj_weight,
    k_proj_weight,
    v_proj_weight,
    o_proj_weight,
    in_features,
    token_positions=None,
):
    rope = rotary.Rotary(theta, d_model // num_heads, max_seq_len)
    weights = (q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight)
    return _attention(d_model, num_heads, rope, *weights)(in_features, token_positions)


def run_rope(d_k, theta, max_seq_len, in_query_or_key, token_positions):
    return rotary.Rotary(theta, d_k, max_seq_len)(in_query_or_key, token_positions)


def run_transformer_block(d_model, num_heads, d_ff, max_seq_len, theta, weights, in_features):
    return run_transformer_block_ablation(
        d_model, num_heads, d_ff, max_seq_len, theta, weights, in_features
    )


def run_transformer_block_ablation(
    d_model,
    num_heads,
    d_ff,
    max_seq_len,
    theta,
    weights,
    in_features,
    norm_placement="pre",
    position_encoding="rope",
    ffn="swiglu",
):
    block = network.Block(
        d_model,
        num_heads,
        d_ff,
        max_seq_len,
        theta,
        norms=norm_placement,
        rotary=position_encoding == "rope",
        gated=ffn == "swiglu",
        dtype=in_features.dtype,
    )
    block.load_state_dict(_block_weights(weights))
    return block(in_features)


def get_transformer_lm(
    vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta, weights=None
):
    dtype = None if weights is None else weights["token_embeddings.weight"].dtype
    model = network.LanguageModel(
        vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta, dtype=dtype
    )
    if weights is not None:
        model.load_state_dict(_lm_weights(weights))
    return model


def run_transformer_lm(
    vocab_size,
    context_length,
    d_model,
    num_layers,
    num_heads,
    d_ff,
    rope_theta,
    weights,
    in_indices,
):
    model = get_transformer_lm(
        vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta, weights
    )
    return model(in_indices)


def run_rmsnorm(d_model, eps, weights, in_features):
    layer = primitives.RootMeanSquareNorm(d_model, eps, dtype=weights.dtype)
    layer.load_state_dict({"gain": weights})
    return layer(in_features)


def run_silu(in_features):
    return primitives.swish(in_features)


def run_softmax(in_features, dim):
    return primitives.stable_softmax(in_features, dim)


def run_get_batch(dataset, batch_size, context_length, device):
    return windows.sample_windows(dataset, batch_size, context_length, device)


def run_cross_entropy(inputs, targets):
    return optimization.nll(inputs, targets)


def run_gradient_clipping(parameters, max_l2_norm):
    optimization.clip_global_norm(parameters, max_l2_norm)


def get_adamw_cls():
    return optimization.DecoupledAdam


def run_get_lr_cosine_schedule(
    it, max_learning_rate, min_learning_rate, warmup_iters, cosine_cycle_iters
):
    return optimization.warmup_cosine(
        it, max_learning_rate, min_learning_rate, warmup_iters, cosine_cycle_iters
    )


def run_save_checkpoint(model, optimizer, iteration, out):
    persistence.save_state(model, optimizer, iteration, out)


def run_load_checkpoint(src, model, optimizer):
    return persistence.restore_state(src, model, optimizer)


def get_tokenizer(vocab, merges, special_tokens=None):
    return ByteLevelCodec(vocab, merges, special_tokens)


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    return learn_bpe(input_path, vocab_size, special_tokens)


def run_generate(model, prompt_ids, max_new_tokens, temperature, top_p, eos_id):
    return sampling.continue_prompt(model, prompt_ids, max_new_tokens, temperature, top_p, eos_id)


def run_train(
    train_tokens,
    vocab_size,
    context_length,
    d_model,
    num_layers,
    num_heads,
    d_ff,
    rope_theta,
    batch_size,
    num_steps,
    max_learning_rate,
    min_learning_rate,
    warmup_iters,
    weight_decay,
    max_l2_norm,
    out_dir,
    device,
):
    model = get_transformer_lm(
        vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta
    )
    return runner.fit(
        model,
        train_tokens,
        batch_size,
        num_steps,
        max_learning_rate,
        min_learning_rate,
        warmup_iters,
        weight_decay,
        max_l2_norm,
        out_dir,
        device,
    )


def run_count_parameters(vocab_size, context_length, d_model, num_layers, num_heads, d_ff):
    return budget.count_weights(vocab_size, d_model, num_layers, d_ff)


def run_forward_flops(
    vocab_size, context_length, d_model, num_layers, num_heads, d_ff, batch_size, sequence_length
):
    return budget.count_matmul_flops(
        vocab_size, d_model, num_layers, d_ff, batch_size, sequence_length
    )


def run_init_linear(d_in, d_out):
    return primitives.Dense(d_in, d_out).w.detach()


def run_init_embedding(vocab_size, d_model):
    return primitives.Lookup(vocab_size, d_model).table.detach()


def run_init_rmsnorm(d_model):
    return primitives.RootMeanSquareNorm(d_model).gain.detach()


def run_top_p_filter(probabilities, top_p):
    kept = sampling.nucleus(probabilities.detach().double().cpu().numpy(), top_p)
    return torch.from_numpy(kept)


def run_sample_next_token(logits, temperature, top_p, generator=None):
    return sampling.pick(logits, temperature, top_p)


def run_accumulate_gradients(model, micro_batches):
    return runner.accumulate(model, micro_batches)


def run_evaluate(model, dataset, batch_size, context_length, num_batches, device):
    return runner.held_out_loss(model, dataset, batch_size, context_length, num_batches, device)
