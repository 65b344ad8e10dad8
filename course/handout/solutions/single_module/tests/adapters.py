"""Adapters wiring the single-module solution into the test suite (a student's own copy)."""

import cs336_basics as sol


def run_linear(d_in, d_out, weights, in_features):
    layer = sol.Linear(d_in, d_out, dtype=weights.dtype)
    layer.load_state_dict({"weight": weights})
    return layer(in_features)


def run_embedding(vocab_size, d_model, weights, token_ids):
    layer = sol.Embedding(vocab_size, d_model, dtype=weights.dtype)
    layer.load_state_dict({"weight": weights})
    return layer(token_ids)


def run_swiglu(d_model, d_ff, w1_weight, w2_weight, w3_weight, in_features):
    layer = sol.SwiGLU(d_model, d_ff, dtype=w1_weight.dtype)
    layer.load_state_dict({"w1.weight": w1_weight, "w2.weight": w2_weight, "w3.weight": w3_weight})
    return layer(in_features)


def run_scaled_dot_product_attention(Q, K, V, mask=None):
    return sol.scaled_dot_product_attention(Q, K, V, mask)


def _attention(d_model, num_heads, rope, q, k, v, o):
    layer = sol.MultiHeadSelfAttention(d_model, num_heads, rope, dtype=q.dtype)
    layer.load_state_dict(
        {"q_proj.weight": q, "k_proj.weight": k, "v_proj.weight": v, "output_proj.weight": o}
    )
    return layer


def run_multihead_self_attention(
    d_model, num_heads, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features
):
    layer = _attention(
        d_model, num_heads, None, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight
    )
    return layer(in_features)


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
    rope = sol.RotaryPositionalEmbedding(theta, d_model // num_heads, max_seq_len)
    layer = _attention(
        d_model, num_heads, rope, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight
    )
    return layer(in_features, token_positions)


def run_rope(d_k, theta, max_seq_len, in_query_or_key, token_positions):
    return sol.RotaryPositionalEmbedding(theta, d_k, max_seq_len)(in_query_or_key, token_positions)


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
    block = sol.TransformerBlock(
        d_model,
        num_heads,
        d_ff,
        max_seq_len,
        theta,
        norm_placement,
        position_encoding,
        ffn,
        dtype=in_features.dtype,
    )
    block.load_state_dict(weights)
    return block(in_features)


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
    model = sol.TransformerLM(
        vocab_size,
        context_length,
        d_model,
        num_layers,
        num_heads,
        d_ff,
        rope_theta,
        dtype=weights["token_embeddings.weight"].dtype,
    )
    model.load_state_dict(weights)
    return model(in_indices)


def run_rmsnorm(d_model, eps, weights, in_features):
    layer = sol.RMSNorm(d_model, eps, dtype=weights.dtype)
    layer.load_state_dict({"weight": weights})
    return layer(in_features)


def run_silu(in_features):
    return sol.silu(in_features)


def run_softmax(in_features, dim):
    return sol.softmax(in_features, dim)


def run_get_batch(dataset, batch_size, context_length, device):
    return sol.get_batch(dataset, batch_size, context_length, device)


def run_cross_entropy(inputs, targets):
    return sol.cross_entropy(inputs, targets)


def run_gradient_clipping(parameters, max_l2_norm):
    sol.clip_gradients(parameters, max_l2_norm)


def get_adamw_cls():
    return sol.AdamW


def run_get_lr_cosine_schedule(
    it, max_learning_rate, min_learning_rate, warmup_iters, cosine_cycle_iters
):
    return sol.cosine_lr(it, max_learning_rate, min_learning_rate, warmup_iters, cosine_cycle_iters)


def run_save_checkpoint(model, optimizer, iteration, out):
    sol.save_checkpoint(model, optimizer, iteration, out)


def run_load_checkpoint(src, model, optimizer):
    return sol.load_checkpoint(src, model, optimizer)


def get_tokenizer(vocab, merges, special_tokens=None):
    return sol.Tokenizer(vocab, merges, special_tokens)


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    return sol.train_bpe(input_path, vocab_size, special_tokens)


def get_transformer_lm(
    vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta, weights=None
):
    model = sol.TransformerLM(
        vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta
    )
    if weights is not None:
        model.load_state_dict(weights)
    return model


def run_generate(model, prompt_ids, max_new_tokens, temperature, top_p, eos_id):
    return sol.decode(model, prompt_ids, max_new_tokens, temperature, top_p, eos_id)


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
    return sol.train_loop(
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
    return sol.parameter_count(vocab_size, d_model, num_layers, d_ff)


def run_forward_flops(
    vocab_size, context_length, d_model, num_layers, num_heads, d_ff, batch_size, sequence_length
):
    return sol.forward_flops(vocab_size, d_model, num_layers, d_ff, batch_size, sequence_length)


def run_init_linear(d_in, d_out):
    return sol.Linear(d_in, d_out).weight.detach()


def run_init_embedding(vocab_size, d_model):
    return sol.Embedding(vocab_size, d_model).weight.detach()


def run_init_rmsnorm(d_model):
    return sol.RMSNorm(d_model).weight.detach()


def run_top_p_filter(probabilities, top_p):
    return sol.nucleus(probabilities.clone(), top_p)


def run_sample_next_token(logits, temperature, top_p, generator=None):
    return sol.next_token(logits, temperature, top_p, generator)


def run_accumulate_gradients(model, micro_batches):
    return sol.accumulate_gradients(model, micro_batches)


def run_evaluate(model, dataset, batch_size, context_length, num_batches, device):
    return sol.evaluate(model, dataset, batch_size, context_length, num_batches, device)
