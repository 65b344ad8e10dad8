"""Student mistakes written blind, a second time: a third catalogue, independent of the diagnoses.

Written by a session helper, 2026-11-28, blind: from what a student reads (``README.md``,
``docs/student.md``, the design's math conventions), the adapters in ``tests/adapters.py`` and
the reference solution in ``cs336_basics/``, without reading the tests, their hints or
diagnoses, the mutation tooling, or the other catalogues beyond their mistakes' names (used only
to avoid repeating a mistake already listed). Each entry imagines how a student misreads the
handout or slips while writing a part: a forgotten ``keepdim``, a wrong axis, an exponent's sign,
a Python idiom that shares one module, a generator consumed twice, a decode per token, and so
on. Each is a ``course.mutation.catalogue.Bug``: exact ``(before, after)`` edits of the
reference and the one-line hint a TA would give. Components are the rubric's
(``course/grading/rubric.toml``); the ungraded parts (decoding, FLOP and parameter accounting)
name their tests with ``select``.

Running each component's tests with each bug applied measures how many of these the suite
catches and how often its first failure names the mistake, on bugs nobody tuned it for.
"""

from __future__ import annotations

from course.mutation.catalogue import Bug, bug

DECODING_TESTS = "top_p or sample_next_token or generation"
ACCOUNTING_TESTS = "accounting"


def edits(
    name: str, component: str, path: str, hint: str, *pairs: tuple[str, str], select: str = ""
) -> Bug:
    """A bug made of several edits of one file of ``cs336_basics``."""
    return Bug(name, component, f"cs336_basics/{path}", pairs, hint, select)


LINEAR = [
    bug(
        "second_linear_init_fan_in_only",
        "linear",
        "linear.py",
        "std = math.sqrt(2.0 / (self.in_features + self.out_features))",
        "std = math.sqrt(2.0 / self.in_features)",
        "The handout's initialisation has variance 2 / (d_in + d_out), not He/Kaiming's 2 / d_in: "
        "both fan-in and fan-out go in the denominator.",
    ),
    bug(
        "second_linear_init_not_truncated",
        "linear",
        "linear.py",
        "nn.init.trunc_normal_(self.weight, mean=0.0, std=std, a=-3 * std, b=3 * std)",
        "nn.init.normal_(self.weight, mean=0.0, std=std)",
        "Linear weights come from a truncated normal: draws beyond 3 standard deviations are "
        "redrawn (nn.init.trunc_normal_ with a=-3*std, b=3*std), not a plain normal.",
    ),
]

EMBEDDING = [
    bug(
        "second_embedding_flattens_ids",
        "embedding",
        "embedding.py",
        "return self.weight[token_ids]",
        "return self.weight[token_ids.reshape(-1)]",
        "The lookup must keep the ids' shape: (batch, seq) ids give (batch, seq, d_model) "
        "vectors; flattening the ids loses the leading dimensions.",
    ),
    edits(
        "second_embedding_init_like_linear",
        "embedding",
        "embedding.py",
        "The embedding table is initialised from N(0, 1) truncated at +-3, not with the Linear "
        "layer's std sqrt(2 / (fan_in + fan_out)).",
        (
            "nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)",
            "std = (2.0 / (self.num_embeddings + self.embedding_dim)) ** 0.5\n"
            "        nn.init.trunc_normal_(self.weight, mean=0.0, std=std, a=-3 * std, b=3 * std)",
        ),
    ),
]

RMSNORM = [
    bug(
        "second_rmsnorm_mean_without_keepdim",
        "rmsnorm",
        "rmsnorm.py",
        "x.pow(2).mean(dim=-1, keepdim=True)",
        "x.pow(2).mean(dim=-1)",
        "The mean of x^2 over the last dimension needs keepdim=True so that it broadcasts back "
        "over d_model; without it the shape (..., seq) lines up against (..., d_model).",
    ),
    bug(
        "second_rmsnorm_unbiased_mean",
        "rmsnorm",
        "rmsnorm.py",
        "x.pow(2).mean(dim=-1, keepdim=True)",
        "x.pow(2).sum(dim=-1, keepdim=True) / (x.shape[-1] - 1)",
        "RMS(x) divides the sum of squares by d_model, not d_model - 1: it is a mean square, "
        "not an unbiased variance estimate.",
    ),
    bug(
        "second_rmsnorm_gain_plus_one",
        "rmsnorm",
        "rmsnorm.py",
        "(x * inverse_rms * self.weight)",
        "(x * inverse_rms * (1 + self.weight))",
        "The gain multiplies the normalised x directly (x / RMS(x) * g); the (1 + g) "
        "parametrisation of some codebases is not the handout's.",
    ),
]

SILU = [
    bug(
        "second_silu_is_gelu",
        "silu",
        "functional.py",
        "return x * torch.sigmoid(x)",
        "return torch.nn.functional.gelu(x)",
        "SiLU (swish) is x * sigmoid(x); GELU is a different smooth activation "
        "(x * Phi(x)), close to it but not equal.",
    ),
    bug(
        "second_silu_sigmoid_from_exp_overflows",
        "silu",
        "functional.py",
        "return x * torch.sigmoid(x)",
        "return x * torch.exp(x) / (1 + torch.exp(x))",
        "Writing sigmoid as e^x / (1 + e^x) overflows for large x (inf / inf = NaN in float32 "
        "past x ~ 88); use torch.sigmoid, which is stable at both ends.",
    ),
]

SWIGLU = [
    bug(
        "second_swiglu_gate_after_w2",
        "swiglu",
        "feedforward.py",
        "return self.w2(silu(self.w1(x)) * self.w3(x))",
        "return self.w2(silu(self.w1(x))) * self.w3(x)",
        "The gate multiplies inside W2: W2(SiLU(W1 x) * W3 x); applying W2 first and "
        "multiplying by W3 x afterwards mixes a d_model vector with a d_ff one.",
    ),
    bug(
        "second_swiglu_silu_on_both_branches",
        "swiglu",
        "feedforward.py",
        "return self.w2(silu(self.w1(x)) * self.w3(x))",
        "return self.w2(silu(self.w1(x)) * silu(self.w3(x)))",
        "Only the W1 branch goes through SiLU; the W3 branch is the linear 'value' the gate "
        "multiplies: W2(SiLU(W1 x) * W3 x).",
    ),
    bug(
        "second_swiglu_w2_built_d_model_to_d_ff",
        "swiglu",
        "feedforward.py",
        "self.w2 = Linear(d_ff, d_model, device=device, dtype=dtype)",
        "self.w2 = Linear(d_model, d_ff, device=device, dtype=dtype)",
        "W2 maps d_ff back to d_model: Linear(d_ff, d_model), whose weight has shape "
        "(d_model, d_ff); Linear's arguments are (in_features, out_features).",
    ),
]

ROPE = [
    bug(
        "second_rope_frequencies_not_inverted",
        "rope",
        "rope.py",
        "theta ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)",
        "theta ** (torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)",
        "The angle is position / theta^(2k/d): the frequencies are theta to a NEGATIVE power, "
        "so they fall from 1 towards 1/theta along the pairs.",
    ),
    bug(
        "second_rope_exponent_k_from_one",
        "rope",
        "rope.py",
        "theta ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)",
        "theta ** (-torch.arange(2, d_k + 2, 2, dtype=torch.float64) / d_k)",
        "With k = 1..d/2 the exponent is (2k - 2)/d, so the first pair has frequency 1 "
        "(exponent 0); using 2k/d shifts every pair's frequency by one step.",
    ),
    edits(
        "second_rope_output_halves_not_interleaved",
        "rope",
        "rope.py",
        "Rotated pairs go back where they came from, interleaved (out[2i], out[2i+1]); "
        "concatenating all rotated evens then all rotated odds permutes the output dimensions.",
        (
            "rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)",
            "rotated = torch.cat((even * cos - odd * sin, even * sin + odd * cos), dim=-1)",
        ),
        (
            'return rearrange(rotated, "... half two -> ... (half two)").to(x.dtype)',
            "return rotated.to(x.dtype)",
        ),
    ),
]

SOFTMAX = [
    bug(
        "second_softmax_sum_without_keepdim",
        "softmax",
        "functional.py",
        "return exps / exps.sum(dim=dim, keepdim=True)",
        "return exps / exps.sum(dim=dim)",
        "The normaliser needs keepdim=True to broadcast back along dim; without it each row is "
        "divided by the wrong sums (or the shapes do not broadcast).",
    ),
    bug(
        "second_softmax_max_over_last_dim",
        "softmax",
        "functional.py",
        "x.amax(dim=dim, keepdim=True)",
        "x.amax(dim=-1, keepdim=True)",
        "Subtract the max along the softmax's own dim: a max taken along the last dim is not "
        "constant along another dim, so it changes the result when dim != -1.",
    ),
    bug(
        "second_softmax_returns_float64",
        "softmax",
        "functional.py",
        "exps = torch.exp(shifted)",
        "exps = torch.exp(shifted.double())",
        "Computing in float64 is fine, but cast the result back: softmax should return the "
        "input's dtype (float32 in, float32 out).",
    ),
]

SDPA = [
    bug(
        "second_sdpa_dot_T_reverses_batch_dims",
        "scaled_dot_product_attention",
        "attention.py",
        'einsum(Q, K, "... queries d_k, ... keys d_k -> ... queries keys") / math.sqrt(d_k)',
        "(Q @ K.T) / math.sqrt(d_k)",
        "K.T reverses every dimension of a batched tensor, not just the last two; transpose "
        "the last two only (K.transpose(-2, -1)) for Q K^T over leading batch dims.",
    ),
    edits(
        "second_sdpa_scale_after_softmax",
        "scaled_dot_product_attention",
        "attention.py",
        "The 1/sqrt(d_k) scales the scores before the softmax; dividing the softmax's output "
        "makes the weights sum to 1/sqrt(d_k) instead of 1.",
        (
            'einsum(Q, K, "... queries d_k, ... keys d_k -> ... queries keys") / math.sqrt(d_k)',
            'einsum(Q, K, "... queries d_k, ... keys d_k -> ... queries keys")',
        ),
        (
            "weights = softmax(scores, dim=-1)",
            "weights = softmax(scores, dim=-1) / math.sqrt(d_k)",
        ),
    ),
    bug(
        "second_sdpa_scale_by_number_of_keys",
        "scaled_dot_product_attention",
        "attention.py",
        "d_k = Q.shape[-1]",
        "d_k = K.shape[-2]",
        "d_k is the width of a query/key vector (the last dim of Q and K), not the number of "
        "keys (K.shape[-2]).",
    ),
]

MHSA = [
    bug(
        "second_mhsa_float_causal_mask",
        "multihead_self_attention",
        "attention.py",
        "causal = torch.ones(seq_len, seq_len, dtype=torch.bool, device=x.device).tril()",
        "causal = torch.ones(seq_len, seq_len, device=x.device).tril()",
        "The mask must be boolean (True = may attend): a float 0/1 lower triangle cannot be "
        "inverted with ~ or used as masked_fill's condition.",
    ),
    bug(
        "second_mhsa_split_heads_by_reshape",
        "multihead_self_attention",
        "attention.py",
        'rearrange(proj(x), "... seq (heads d_k) -> ... heads seq d_k", heads=self.num_heads)',
        "proj(x).reshape(*x.shape[:-2], self.num_heads, seq_len, -1)",
        "Reshaping (seq, d_model) straight to (heads, seq, d_k) mixes tokens across heads; "
        "split the features into (seq, heads, d_k) first, then move heads before seq.",
    ),
    bug(
        "second_mhsa_default_positions_from_one",
        "multihead_self_attention",
        "attention.py",
        "token_positions = default_positions(seq_len, device=x.device)",
        "token_positions = default_positions(seq_len, offset=1, device=x.device)",
        "Token positions count from 0: with no positions given, RoPE rotates the first token by "
        "angle 0 (positions 0, 1, ..., seq - 1).",
    ),
]

BLOCK = [
    bug(
        "second_block_no_attention_residual",
        "transformer_block",
        "block.py",
        "x = x + self.attn(self.ln1(x), token_positions)",
        "x = self.attn(self.ln1(x), token_positions)",
        "Each sublayer is added to its input: h = x + attn(ln1(x)); dropping the first residual "
        "loses the block's input.",
    ),
    bug(
        "second_block_ffn_on_attention_output",
        "transformer_block",
        "block.py",
        "x = x + self.attn(self.ln1(x), token_positions)\n        return x + self.ffn(self.ln2(x))",
        "attended = self.attn(self.ln1(x), token_positions)\n"
        "        x = x + attended\n"
        "        return x + self.ffn(self.ln2(attended))",
        "The feed-forward sublayer reads the residual stream after the attention residual, "
        "ffn(ln2(x + attn(...))), not the attention output alone.",
    ),
    bug(
        "second_block_norms_swapped",
        "transformer_block",
        "block.py",
        "x = x + self.attn(self.ln1(x), token_positions)\n        return x + self.ffn(self.ln2(x))",
        "x = x + self.attn(self.ln2(x), token_positions)\n        return x + self.ffn(self.ln1(x))",
        "ln1 is the norm before attention and ln2 the one before the feed-forward; swapping "
        "them applies each loaded gain to the wrong sublayer.",
    ),
]

LM = [
    bug(
        "second_lm_embeddings_scaled_by_sqrt_d_model",
        "transformer_lm",
        "model.py",
        "x = self.token_embeddings(token_ids)\n",
        "x = self.token_embeddings(token_ids)\n        x = x * x.shape[-1] ** 0.5\n",
        "The handout's model feeds the embeddings to the first block as they are; the "
        "sqrt(d_model) scaling of the original Transformer paper is not part of it.",
    ),
    bug(
        "second_lm_logits_for_last_position_only",
        "transformer_lm",
        "model.py",
        "return self.lm_head(self.ln_final(x))",
        "return self.lm_head(self.ln_final(x[..., -1, :]))",
        "The LM returns next-token logits at every position, (batch, seq, vocab_size); "
        "keeping only the last position is what decoding does afterwards.",
    ),
    bug(
        "second_lm_one_block_repeated",
        "transformer_lm",
        "model.py",
        "            )\n            for _ in range(config.num_layers)\n        ],",
        "            )\n        ]\n        * config.num_layers,",
        "[block] * num_layers repeats ONE block object, so every layer shares its weights "
        "(loading layers.0, layers.1, ... overwrites the same tensors); build a new block per "
        "layer.",
    ),
]

CROSS_ENTROPY = [
    bug(
        "second_ce_arange_indexing_needs_2d",
        "cross_entropy",
        "losses.py",
        "target_logits = shifted.gather(-1, targets.unsqueeze(-1)).squeeze(-1)",
        "target_logits = shifted[torch.arange(shifted.shape[0]), targets]",
        "logits[arange(batch), targets] only works for 2-D (batch, vocab) logits; with more "
        "leading dims (batch, seq, vocab) pick the target along the last dim (gather).",
    ),
    bug(
        "second_ce_logsumexp_over_everything",
        "cross_entropy",
        "losses.py",
        "torch.log(torch.exp(shifted).sum(dim=-1))",
        "torch.log(torch.exp(shifted).sum())",
        "The log-sum-exp normalises each position over its own vocabulary row (sum over "
        "dim=-1), not over every logit of the batch.",
    ),
    bug(
        "second_ce_log_likelihood_sign",
        "cross_entropy",
        "losses.py",
        "return (log_normaliser - target_logits).mean()",
        "return (target_logits - log_normaliser).mean()",
        "Cross-entropy is the NEGATIVE log-likelihood: logsumexp(logits) - logit[target], "
        "which is >= 0.",
    ),
]

ADAMW = [
    bug(
        "second_adamw_bias_correction_without_sqrt",
        "adamw",
        "adamw.py",
        "step_size = lr * math.sqrt(1 - beta2**t) / (1 - beta1**t)",
        "step_size = lr * (1 - beta2**t) / (1 - beta1**t)",
        "The step size is lr * sqrt(1 - beta2^t) / (1 - beta1^t): v is a second moment, so its "
        "correction enters under the square root.",
    ),
    bug(
        "second_adamw_step_starts_at_two",
        "adamw",
        "adamw.py",
        'state["step"] = 0',
        'state["step"] = 1',
        "t is 1 on the first update: start the count at 0 and increment before use (or start at "
        "1 and increment after), not both; otherwise the bias correction is a step late.",
    ),
    bug(
        "second_adamw_lr_from_defaults",
        "adamw",
        "adamw.py",
        'lr = group["lr"]',
        'lr = self.defaults["lr"]',
        "Read the learning rate from each param group (group['lr']): that is where a schedule "
        "or a loaded state dict sets it; self.defaults keeps the constructor's value.",
    ),
]

COSINE = [
    bug(
        "second_cosine_warmup_from_min",
        "cosine_schedule",
        "schedule.py",
        "return it / warmup_iters * max_learning_rate",
        "return min_learning_rate + it / warmup_iters * (max_learning_rate - min_learning_rate)",
        "Warm-up rises linearly from 0 (at it = 0) to the maximum: it / warmup_iters * max_lr; "
        "it does not start at the minimum rate.",
    ),
    edits(
        "second_cosine_cycle_counted_after_warmup",
        "cosine_schedule",
        "schedule.py",
        "cosine_cycle_iters is the iteration where the cosine reaches the minimum (counted from "
        "0, warm-up included), not the length of the cosine phase after warm-up.",
        ("if it > cosine_cycle_iters:", "if it > warmup_iters + cosine_cycle_iters:"),
        (
            "progress = (it - warmup_iters) / (cosine_cycle_iters - warmup_iters)",
            "progress = (it - warmup_iters) / cosine_cycle_iters",
        ),
    ),
    bug(
        "second_cosine_rises_instead_of_decays",
        "cosine_schedule",
        "schedule.py",
        "0.5 * (1.0 + math.cos(math.pi * progress))",
        "0.5 * (1.0 - math.cos(math.pi * progress))",
        "The cosine phase decays from max to min: min + (1 + cos(pi * progress)) / 2 * (max - "
        "min); with 1 - cos it climbs from min to max.",
    ),
]

CLIPPING = [
    bug(
        "second_clip_not_in_place",
        "gradient_clipping",
        "gradient_clipping.py",
        "g.mul_(scale.to(g.dtype))",
        "g = g * scale.to(g.dtype)",
        "Clipping must change the gradients in place (p.grad.mul_(scale)); g = g * scale only "
        "rebinds a local name and the parameters' .grad stay as they were.",
    ),
    bug(
        "second_clip_iterates_parameters_twice",
        "gradient_clipping",
        "gradient_clipping.py",
        "for g in grads:\n            g.mul_(scale.to(g.dtype))",
        "for p in parameters:\n"
        "            if p.grad is not None:\n"
        "                p.grad.mul_(scale.to(p.grad.dtype))",
        "The parameters may be a one-shot iterator (model.parameters() is a generator): after "
        "the norm's pass it is empty, so collect the gradients in a list once and scale those.",
    ),
    bug(
        "second_clip_scale_inverted",
        "gradient_clipping",
        "gradient_clipping.py",
        "scale = max_l2_norm / (total_norm + eps)",
        "scale = (total_norm + eps) / max_l2_norm",
        "The factor is max_l2_norm / (norm + eps), below 1 when the norm is too large; its "
        "inverse makes large gradients larger.",
    ),
]

GET_BATCH = [
    bug(
        "second_batch_one_start_for_all_rows",
        "get_batch",
        "data.py",
        "torch.randint(0, num_tokens - context_length, (batch_size,), generator=generator)",
        "torch.randint(0, num_tokens - context_length, (1,), generator=generator).expand(batch_size)",
        "Each row of the batch gets its own random start; drawing one start and repeating it "
        "makes every row the same window.",
    ),
    bug(
        "second_batch_target_is_last_token_only",
        "get_batch",
        "data.py",
        "return windows[:, :-1], windows[:, 1:]",
        "return windows[:, :-1], windows[:, -1]",
        "The targets are a whole sequence, the inputs shifted by one (batch, context_length): "
        "a language model predicts the next token at every position, not only after the last.",
    ),
    bug(
        "second_batch_window_one_token_short",
        "get_batch",
        "data.py",
        "offsets = np.arange(context_length + 1)",
        "offsets = np.arange(context_length)",
        "A window needs context_length + 1 tokens: context_length inputs and, one further, the "
        "last target; with context_length tokens both come out one short.",
    ),
]

CHECKPOINT = [
    edits(
        "second_ckpt_forgets_iteration",
        "checkpoint",
        "checkpoint.py",
        "The checkpoint must store the iteration beside the model and optimizer states, and "
        "loading returns that saved iteration (not 0).",
        ('        "iteration": int(iteration),\n', ""),
        ('return checkpoint["iteration"]', 'return checkpoint.get("iteration", 0)'),
    ),
    bug(
        "second_ckpt_saves_module_not_state_dict",
        "checkpoint",
        "checkpoint.py",
        '"model": unwrap_model(model).state_dict(),',
        '"model": unwrap_model(model),',
        "Save model.state_dict(), not the module object: pickling the module ties the file to "
        "the class's code, and torch.load(weights_only=True) refuses it.",
    ),
]

TRAIN_BPE = [
    edits(
        "second_bpe_ties_by_merged_bytes",
        "train_bpe",
        "bpe.py",
        "Ties are broken by the pair (first token, second token) compared as a tuple of bytes; "
        "comparing the concatenation a + b orders e.g. (b'a', b'z') and (b'ab', b'c') "
        "differently.",
        (
            "heap = [(-count, keys[pair[0]] + keys[pair[1]], pair)",
            "heap = [(-count, keys[pair[0]][:-1] + keys[pair[1]], pair)",
        ),
        (
            "heapq.heappush(heap, (-count, keys[new_pair[0]] + keys[new_pair[1]], new_pair))",
            "heapq.heappush(heap, (-count, keys[new_pair[0]][:-1] + keys[new_pair[1]], new_pair))",
        ),
    ),
    bug(
        "second_bpe_merge_budget_ignores_specials",
        "train_bpe",
        "bpe.py",
        "merges = merge_pairs(word_counts, vocab, vocab_size - len(vocab), progress=progress)",
        "merges = merge_pairs(word_counts, vocab, vocab_size - 256, progress=progress)",
        "vocab_size counts the special tokens too: the number of merges is vocab_size - 256 - "
        "len(special_tokens), or the vocabulary ends up larger than vocab_size.",
    ),
    bug(
        "second_bpe_stops_at_pairs_seen_once",
        "train_bpe",
        "bpe.py",
        "                continue\n            new_token = chr(len(vocab))",
        "                continue\n"
        "            if -negative_count < 2:\n"
        "                break\n"
        "            new_token = chr(len(vocab))",
        "Keep merging until the vocabulary reaches vocab_size or no pair is left: a pair that "
        "occurs once is still the most frequent pair when every pair occurs once.",
    ),
]

TOKENIZER = [
    bug(
        "second_tokenizer_decodes_each_token_alone",
        "tokenizer",
        "tokenizer.py",
        'return data.decode("utf-8", errors="replace")',
        'return "".join(vocab[i].decode("utf-8", errors="replace") for i in ids)',
        "Join all the tokens' bytes first and decode once: a multi-byte UTF-8 character split "
        "across tokens becomes U+FFFD characters when each token is decoded on its own.",
    ),
    bug(
        "second_tokenizer_encode_drops_special_tokens",
        "tokenizer",
        "tokenizer.py",
        "ids.append(self.special_ids[piece])",
        "continue",
        "Special tokens in the text are encoded as their own ids; only BPE training leaves them "
        "out of the counts.",
    ),
    bug(
        "second_tokenizer_iterable_never_flushes_tail",
        "tokenizer",
        "tokenizer.py",
        "        yield from self.encode(buffer)\n",
        "",
        "encode_iterable must encode what is left in its buffer once the input ends; without "
        "the final flush the text after the last safe boundary is lost.",
    ),
]

DECODING = [
    bug(
        "second_top_p_sorted_ascending",
        "decoding",
        "generation.py",
        "probabilities.sort(descending=True)",
        "probabilities.sort()",
        "The nucleus is the MOST likely tokens: sort the probabilities in descending order "
        "before accumulating their mass.",
        select=DECODING_TESTS,
    ),
    bug(
        "second_top_p_not_renormalised",
        "decoding",
        "generation.py",
        "return kept / kept.sum()",
        "return kept",
        "After zeroing the tokens outside the nucleus, divide by the kept mass so the "
        "probabilities sum to 1 again.",
        select=DECODING_TESTS,
    ),
    bug(
        "second_generate_never_extends_sequence",
        "decoding",
        "generation.py",
        "        sequence = sequence + [token]\n",
        "",
        "Each step must feed the sequence including the tokens generated so far; running the "
        "model on the prompt alone predicts the same next token's distribution every step.",
        select=DECODING_TESTS,
    ),
]

ACCOUNTING = [
    bug(
        "second_accounting_ffn_two_matrices",
        "accounting",
        "accounting.py",
        '"ffn": config.num_layers * 3 * d * d_ff,',
        '"ffn": config.num_layers * 2 * d * d_ff,',
        "SwiGLU has three weight matrices (W1, W2, W3: 3 * d_model * d_ff parameters per "
        "layer), not the two of a plain MLP.",
        select=ACCOUNTING_TESTS,
    ),
    edits(
        "second_accounting_attention_one_head",
        "accounting",
        "accounting.py",
        "Attention scores and the weighted values cost 2 * T * T * d_k FLOPs per head, and there "
        "are num_heads heads: 2 * T * T * d_model per sequence in all, not per head.",
        (
            '"attention_scores": 2 * batch_size * T * T * d,',
            '"attention_scores": 2 * batch_size * T * T * (d // config.num_heads),',
        ),
        (
            '"attention_values": 2 * batch_size * T * T * d,',
            '"attention_values": 2 * batch_size * T * T * (d // config.num_heads),',
        ),
        select=ACCOUNTING_TESTS,
    ),
    bug(
        "second_accounting_forgets_final_norm",
        "accounting",
        "accounting.py",
        '"norms": config.num_layers * 2 * d + d,',
        '"norms": config.num_layers * 2 * d,',
        "Besides ln1 and ln2 in every layer, the model has the final RMSNorm (ln_final): "
        "d_model more parameters.",
        select=ACCOUNTING_TESTS,
    ),
]

SECOND_BLIND: list[Bug] = [
    *LINEAR,
    *EMBEDDING,
    *RMSNORM,
    *SILU,
    *SWIGLU,
    *ROPE,
    *SOFTMAX,
    *SDPA,
    *MHSA,
    *BLOCK,
    *LM,
    *CROSS_ENTROPY,
    *ADAMW,
    *COSINE,
    *CLIPPING,
    *GET_BATCH,
    *CHECKPOINT,
    *TRAIN_BPE,
    *TOKENIZER,
    *DECODING,
    *ACCOUNTING,
]
