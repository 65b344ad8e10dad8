"""Student mistakes written blind: a second catalogue, independent of the suite's diagnoses.

``course/mutation/catalogue.py`` was written by the people who wrote the suite's hints, so it may favour the
mistakes the suite already recognises. This list was written without reading that catalogue,
the tests, their hints or the mutation tooling: only from what a student reads (the handout
README, ``docs/student.md``, the design's math conventions) and from the reference solution in
``cs336_basics/``, imagining how a student would misread the handout. Each entry is a
``course.mutation.catalogue.Bug``: exact ``(before, after)`` edits of the reference and the hint a TA would
give. Components are the rubric's (``course/grading/rubric.toml``); the ungraded parts (decoding, FLOP
and parameter accounting) name their tests with ``select``.

Running the component's tests with each bug applied measures how many of these the suite
catches and how many of its failures name the mistake, on bugs it was not written against.
"""

from __future__ import annotations

from course.mutation.catalogue import Bug, bug

DECODING_TESTS = "top_p or sample_next_token or generation"
ACCOUNTING_TESTS = "accounting"


def edits(name: str, component: str, path: str, hint: str, *pairs: tuple[str, str]) -> Bug:
    """A bug made of several edits of one file of ``cs336_basics``."""
    return Bug(name, component, f"cs336_basics/{path}", pairs, hint)


LINEAR = [
    bug(
        "blind_linear_no_transpose",
        "linear",
        "linear.py",
        "return x @ self.weight.T",
        "return x @ self.weight",
        "The weight is stored as (out_features, in_features), so the layer must multiply by its "
        "transpose: y = x W^T.",
    ),
    bug(
        "blind_linear_variance_as_std",
        "linear",
        "linear.py",
        "std = math.sqrt(2.0 / (self.in_features + self.out_features))",
        "std = 2.0 / (self.in_features + self.out_features)",
        "2 / (d_in + d_out) is the variance of the initial weights; the standard deviation you "
        "pass to trunc_normal_ is its square root.",
    ),
    bug(
        "blind_linear_cut_at_3_not_3_sigma",
        "linear",
        "linear.py",
        "a=-3 * std, b=3 * std",
        "a=-3.0, b=3.0",
        "The truncation is at three standard deviations (±3σ), not at ±3: trunc_normal_'s a and b "
        "are absolute bounds.",
    ),
]

EMBEDDING = [
    bug(
        "blind_embedding_small_std",
        "embedding",
        "embedding.py",
        "std=1.0, a=-3.0, b=3.0",
        "std=0.02, a=-0.06, b=0.06",
        "Embeddings start from N(0, 1) truncated at ±3, not the std 0.02 some GPT code uses.",
    ),
    bug(
        "blind_embedding_not_truncated",
        "embedding",
        "embedding.py",
        "nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)",
        "nn.init.normal_(self.weight, mean=0.0, std=1.0)",
        "The initial embedding weights must be truncated at ±3; a plain normal draw exceeds it.",
    ),
]

RMSNORM = [
    bug(
        "blind_rmsnorm_eps_outside_sqrt",
        "rmsnorm",
        "rmsnorm.py",
        "inverse_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)",
        "inverse_rms = 1 / (torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True)) + self.eps)",
        "eps goes inside the square root: RMS(x) = sqrt(mean(x^2) + eps), not sqrt(mean(x^2)) + eps.",
    ),
    bug(
        "blind_rmsnorm_sum_not_mean",
        "rmsnorm",
        "rmsnorm.py",
        ".mean(dim=-1, keepdim=True)",
        ".sum(dim=-1, keepdim=True)",
        "RMS is the root of the *mean* of the squares over d_model, not of their sum.",
    ),
    bug(
        "blind_rmsnorm_no_sqrt",
        "rmsnorm",
        "rmsnorm.py",
        "torch.rsqrt(",
        "torch.reciprocal(",
        "Divide by the root mean square, not by the mean square: take the square root.",
    ),
    bug(
        "blind_rmsnorm_wrong_axis",
        "rmsnorm",
        "rmsnorm.py",
        ".mean(dim=-1, keepdim=True)",
        ".mean(dim=0, keepdim=True)",
        "Normalise each position over its features (the last dim), not over the batch dim.",
    ),
    bug(
        "blind_rmsnorm_no_upcast",
        "rmsnorm",
        "rmsnorm.py",
        "        x = x.float()\n",
        "",
        "Compute the mean of squares in float32 and cast back: in float16 x^2 overflows.",
    ),
]

SILU = [
    bug(
        "blind_silu_sigmoid_only",
        "silu",
        "functional.py",
        "return x * torch.sigmoid(x)",
        "return torch.sigmoid(x)",
        "SiLU is x * sigmoid(x), not the sigmoid alone.",
    ),
    bug(
        "blind_silu_sigmoid_sign",
        "silu",
        "functional.py",
        "return x * torch.sigmoid(x)",
        "return x / (1 + torch.exp(x))",
        "sigmoid(x) is 1 / (1 + exp(-x)): the exponent is negative.",
    ),
]

SWIGLU = [
    bug(
        "blind_swiglu_gate_on_w3",
        "swiglu",
        "feedforward.py",
        "silu(self.w1(x)) * self.w3(x)",
        "self.w1(x) * silu(self.w3(x))",
        "The SiLU applies to W1 x; W3 x is the linear branch it multiplies.",
    ),
    bug(
        "blind_swiglu_silu_after_product",
        "swiglu",
        "feedforward.py",
        "silu(self.w1(x)) * self.w3(x)",
        "silu(self.w1(x) * self.w3(x))",
        "Apply SiLU to W1 x first, then multiply elementwise by W3 x: SiLU(W1 x) ⊙ W3 x.",
    ),
    bug(
        "blind_swiglu_no_gate",
        "swiglu",
        "feedforward.py",
        "silu(self.w1(x)) * self.w3(x)",
        "silu(self.w1(x))",
        "SwiGLU is gated: the SiLU branch is multiplied by W3 x before W2; W3 was left out.",
    ),
]

ROPE = [
    edits(
        "blind_rope_halves_not_pairs",
        "rope",
        "rope.py",
        "RoPE rotates interleaved pairs (x[2i], x[2i+1]), not the first half against the second.",
        ('"... (half two) -> ... half two"', '"... (two half) -> ... half two"'),
        ('"... half two -> ... (half two)"', '"... half two -> ... (two half)"'),
    ),
    bug(
        "blind_rope_frequency_exponent_i",
        "rope",
        "rope.py",
        "-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k",
        "-torch.arange(0, d_k // 2, dtype=torch.float64) / d_k",
        "The frequency of pair i is theta^(-2i/d_k): the exponent uses 2i (0, 2, 4, ...), not i.",
    ),
    bug(
        "blind_rope_rotation_sign",
        "rope",
        "rope.py",
        "even * cos - odd * sin, even * sin + odd * cos",
        "even * cos + odd * sin, -even * sin + odd * cos",
        "The rotation matrix is [[cos, -sin], [sin, cos]]: x'_even = x_even cos - x_odd sin; you "
        "rotate by the negative angle.",
    ),
    edits(
        "blind_rope_ignores_token_positions",
        "rope",
        "rope.py",
        "Look cos and sin up at token_positions; the first seq_len rows are right only for "
        "positions 0, 1, ..., seq_len - 1.",
        ("cos = self.cos[token_positions]", "cos = self.cos[: x.shape[-2]]"),
        ("sin = self.sin[token_positions]", "sin = self.sin[: x.shape[-2]]"),
    ),
    edits(
        "blind_rope_persistent_buffers",
        "rope",
        "rope.py",
        "Register the cos/sin tables with persistent=False: they are derived values, and a "
        "state dict holding them breaks strict loading of the model's weights.",
        (
            "angles.cos().to(device=device, dtype=torch.float32), persistent=False",
            "angles.cos().to(device=device, dtype=torch.float32)",
        ),
        (
            "angles.sin().to(device=device, dtype=torch.float32), persistent=False",
            "angles.sin().to(device=device, dtype=torch.float32)",
        ),
    ),
]

SOFTMAX = [
    bug(
        "blind_softmax_no_max_shift",
        "softmax",
        "functional.py",
        "shifted = x - x.amax(dim=dim, keepdim=True).detach()",
        "shifted = x",
        "Subtract the maximum along dim before exp, or large inputs overflow to inf/nan.",
    ),
    bug(
        "blind_softmax_sum_last_dim",
        "softmax",
        "functional.py",
        "exps.sum(dim=dim, keepdim=True)",
        "exps.sum(dim=-1, keepdim=True)",
        "Normalise along the dim you were given, not always along the last one.",
    ),
]

SDPA = "scaled_dot_product_attention"
ATTENTION_SCALE = "/ math.sqrt(d_k)"
MASKED_SOFTMAX = """    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = softmax(scores, dim=-1)
"""
SCALED_DOT_PRODUCT_ATTENTION = [
    bug(
        "blind_sdpa_scale_by_dk",
        SDPA,
        "attention.py",
        ATTENTION_SCALE,
        "/ d_k",
        "Scale the scores by 1/sqrt(d_k), not 1/d_k.",
    ),
    bug(
        "blind_sdpa_no_scale",
        SDPA,
        "attention.py",
        ATTENTION_SCALE,
        "",
        "The scores are Q K^T / sqrt(d_k): the 1/sqrt(d_k) scale is missing.",
    ),
    bug(
        "blind_sdpa_mask_inverted",
        SDPA,
        "attention.py",
        'scores.masked_fill(~mask, float("-inf"))',
        'scores.masked_fill(mask, float("-inf"))',
        "In the mask True means 'may attend': fill -inf where the mask is False, not True.",
    ),
    bug(
        "blind_sdpa_mask_fills_zero",
        SDPA,
        "attention.py",
        'scores.masked_fill(~mask, float("-inf"))',
        "scores.masked_fill(~mask, 0.0)",
        "Masked scores must be -inf so they get probability 0; a score of 0 still gets weight.",
    ),
    bug(
        "blind_sdpa_mask_after_softmax",
        SDPA,
        "attention.py",
        MASKED_SOFTMAX,
        """    weights = softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * mask
""",
        "Mask the scores before the softmax; zeroing probabilities afterwards leaves rows that "
        "no longer sum to one.",
    ),
    bug(
        "blind_sdpa_softmax_over_queries",
        SDPA,
        "attention.py",
        "weights = softmax(scores, dim=-1)",
        "weights = softmax(scores, dim=-2)",
        "The softmax runs over the keys (the last dim of the scores), so each query's weights "
        "sum to one.",
    ),
]

MHSA = "multihead_self_attention"
MERGE_HEADS = 'rearrange(attended, "... heads seq d_k -> ... seq (heads d_k)")'
MULTIHEAD_SELF_ATTENTION = [
    edits(
        "blind_mhsa_heads_interleaved",
        MHSA,
        "attention.py",
        "Head h owns the contiguous features h*d_k .. (h+1)*d_k - 1 of each projection: split "
        "as (heads d_k), not (d_k heads).",
        (
            '"... seq (heads d_k) -> ... heads seq d_k"',
            '"... seq (d_k heads) -> ... heads seq d_k"',
        ),
        (
            '"... heads seq d_k -> ... seq (heads d_k)"',
            '"... heads seq d_k -> ... seq (d_k heads)"',
        ),
    ),
    bug(
        "blind_mhsa_merge_without_transpose",
        MHSA,
        "attention.py",
        MERGE_HEADS,
        "attended.reshape(*attended.shape[:-3], seq_len, -1)",
        "Before merging the heads, move the head dim next to d_k ((heads, seq, d_k) -> (seq, "
        "heads, d_k)); reshaping directly mixes positions and heads.",
    ),
    bug(
        "blind_mhsa_no_causal_mask",
        MHSA,
        "attention.py",
        "scaled_dot_product_attention(q, k, v, causal)",
        "scaled_dot_product_attention(q, k, v)",
        "Self-attention in a language model is causal: pass a mask so no position attends to "
        "later ones.",
    ),
    bug(
        "blind_mhsa_mask_upper_triangle",
        MHSA,
        "attention.py",
        ".tril()",
        ".triu()",
        "The causal mask is lower-triangular (query i may attend to keys j <= i); upper-"
        "triangular attends to the future.",
    ),
    bug(
        "blind_mhsa_mask_excludes_self",
        MHSA,
        "attention.py",
        ".tril()",
        ".tril(diagonal=-1)",
        "A position may attend to itself: the causal mask includes the diagonal (j <= i).",
    ),
    bug(
        "blind_mhsa_rope_on_values",
        MHSA,
        "attention.py",
        "            k = self.rope(k, head_positions)\n",
        "            k = self.rope(k, head_positions)\n            v = self.rope(v, head_positions)\n",
        "RoPE rotates queries and keys only; values are not rotated.",
    ),
    bug(
        "blind_mhsa_rope_on_queries_only",
        MHSA,
        "attention.py",
        "            k = self.rope(k, head_positions)\n",
        "",
        "Rotate the keys as well as the queries, so the scores depend on relative position.",
    ),
    bug(
        "blind_mhsa_no_output_projection",
        MHSA,
        "attention.py",
        f"return self.output_proj({MERGE_HEADS})",
        f"return {MERGE_HEADS}",
        "After merging the heads apply the output projection W_O.",
    ),
]

BLOCK_BODY = """        x = x + self.attn(self.ln1(x), token_positions)
        return x + self.ffn(self.ln2(x))
"""
TRANSFORMER_BLOCK = [
    bug(
        "blind_block_post_norm",
        "transformer_block",
        "block.py",
        BLOCK_BODY,
        """        x = self.ln1(x + self.attn(x, token_positions))
        return self.ln2(x + self.ffn(x))
""",
        "The block is pre-norm: normalise the sublayer's input (x + attn(ln1(x))), not the sum "
        "after the residual.",
    ),
    bug(
        "blind_block_residual_from_normed",
        "transformer_block",
        "block.py",
        BLOCK_BODY,
        """        normed = self.ln1(x)
        x = normed + self.attn(normed, token_positions)
        return x + self.ffn(self.ln2(x))
""",
        "The residual adds the sublayer's output to the un-normalised input x, not to ln1(x).",
    ),
    bug(
        "blind_block_ln1_twice",
        "transformer_block",
        "block.py",
        "self.ffn(self.ln2(x))",
        "self.ffn(self.ln1(x))",
        "The feed-forward sublayer has its own norm, ln2; ln1 belongs to attention.",
    ),
    bug(
        "blind_block_ffn_sees_block_input",
        "transformer_block",
        "block.py",
        BLOCK_BODY,
        """        h = x + self.attn(self.ln1(x), token_positions)
        return h + self.ffn(self.ln2(x))
""",
        "The feed-forward sublayer takes the output of the attention sublayer (after its "
        "residual), not the block's input.",
    ),
    bug(
        "blind_block_no_ffn_residual",
        "transformer_block",
        "block.py",
        "return x + self.ffn(self.ln2(x))",
        "return self.ffn(self.ln2(x))",
        "The feed-forward sublayer has a residual connection too: add its output to its input.",
    ),
]

LM_OUTPUT = "return self.lm_head(self.ln_final(x))"
TRANSFORMER_LM = [
    edits(
        "blind_lm_returns_probabilities",
        "transformer_lm",
        "model.py",
        "The LM returns unnormalised logits: no softmax at the end.",
        (
            "from cs336_basics.embedding import Embedding\n",
            "from cs336_basics.embedding import Embedding\n"
            "from cs336_basics.functional import softmax\n",
        ),
        (LM_OUTPUT, "return softmax(self.lm_head(self.ln_final(x)), dim=-1)"),
    ),
    bug(
        "blind_lm_no_final_norm",
        "transformer_lm",
        "model.py",
        LM_OUTPUT,
        "return self.lm_head(x)",
        "Apply the final RMSNorm (ln_final) to the last block's output before the LM head.",
    ),
    bug(
        "blind_lm_tied_head",
        "transformer_lm",
        "model.py",
        "        self.lm_head = lm_head\n",
        "        self.lm_head = lm_head\n        self.lm_head.weight = self.token_embeddings.weight\n",
        "The handout's model has a separate LM head: tying it to the embedding makes loading "
        "lm_head.weight overwrite the embeddings.",
    ),
    bug(
        "blind_lm_extra_residual_around_blocks",
        "transformer_lm",
        "model.py",
        "x = layer(x, token_positions)",
        "x = x + layer(x, token_positions)",
        "A block already adds its residuals: feed its output to the next block as it is.",
    ),
    edits(
        "blind_lm_blocks_not_chained",
        "transformer_lm",
        "model.py",
        "Each block takes the previous block's output; here every block reads the embeddings "
        "and only the last one's output is used.",
        ("x = layer(x, token_positions)", "out = layer(x, token_positions)"),
        (LM_OUTPUT, "return self.lm_head(self.ln_final(out))"),
    ),
    bug(
        "blind_lm_rope_over_d_model",
        "transformer_lm",
        "model.py",
        "config.rope_theta, config.d_head, config.context_length",
        "config.rope_theta, config.d_model, config.context_length",
        "RoPE acts on each head's queries and keys, so its dimension is d_k = d_model / "
        "num_heads, not d_model.",
    ),
]

CROSS_ENTROPY = [
    bug(
        "blind_ce_sum_not_mean",
        "cross_entropy",
        "losses.py",
        "(log_normaliser - target_logits).mean()",
        "(log_normaliser - target_logits).sum()",
        "The loss is the mean over all positions in the batch, not the sum.",
    ),
    bug(
        "blind_ce_no_max_shift",
        "cross_entropy",
        "losses.py",
        "shifted = logits - logits.amax(dim=-1, keepdim=True).detach()",
        "shifted = logits",
        "Subtract the maximum logit before exp (log-sum-exp trick), or large logits overflow.",
    ),
    bug(
        "blind_ce_target_logit_unshifted",
        "cross_entropy",
        "losses.py",
        "target_logits = shifted.gather(",
        "target_logits = logits.gather(",
        "You subtracted the max inside the log-sum-exp but took the target logit unshifted: "
        "subtract it from both (or add it back).",
    ),
    bug(
        "blind_ce_max_over_batch",
        "cross_entropy",
        "losses.py",
        "logits.amax(dim=-1, keepdim=True)",
        "logits.amax(dim=0, keepdim=True)",
        "The stabilising maximum is taken per position over the vocabulary (last dim), not over "
        "the batch.",
    ),
]

ADAM_MOMENTS = """                m.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
"""
ADAM_STEP_SIZE = "step_size = lr * math.sqrt(1 - beta2**t) / (1 - beta1**t)"
ADAM_DECAY = "                p.mul_(1 - lr * weight_decay)\n"
ADAMW = [
    bug(
        "blind_adamw_no_bias_correction",
        "adamw",
        "adamw.py",
        ADAM_STEP_SIZE,
        "step_size = lr",
        "Use the bias-corrected step size alpha_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t).",
    ),
    bug(
        "blind_adamw_bias_correction_swapped",
        "adamw",
        "adamw.py",
        ADAM_STEP_SIZE,
        "step_size = lr * math.sqrt(1 - beta1**t) / (1 - beta2**t)",
        "alpha_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t): the square root goes with beta2, the "
        "denominator with beta1.",
    ),
    bug(
        "blind_adamw_eps_inside_sqrt",
        "adamw",
        "adamw.py",
        "v.sqrt().add_(eps)",
        "v.add(eps).sqrt()",
        "eps is added after the square root: m / (sqrt(v) + eps).",
    ),
    bug(
        "blind_adamw_decay_with_step_size",
        "adamw",
        "adamw.py",
        "p.mul_(1 - lr * weight_decay)",
        "p.mul_(1 - step_size * weight_decay)",
        "Weight decay uses the plain learning rate: theta -= lr * lambda * theta, not alpha_t.",
    ),
    bug(
        "blind_adamw_state_not_kept",
        "adamw",
        "adamw.py",
        "state = self.state[p]",
        "state = {}",
        "m, v and t must persist between steps in self.state[p]; a fresh dict each step restarts "
        "Adam at every step.",
    ),
    bug(
        "blind_adamw_momentum_weights_swapped",
        "adamw",
        "adamw.py",
        "m.mul_(beta1).add_(p.grad, alpha=1 - beta1)",
        "m.mul_(1 - beta1).add_(p.grad, alpha=beta1)",
        "The first moment is m <- beta1 m + (1 - beta1) g: beta1 weighs the old m.",
    ),
    edits(
        "blind_adamw_l2_not_decoupled",
        "adamw",
        "adamw.py",
        "AdamW decouples weight decay: apply theta -= lr * lambda * theta separately instead of "
        "adding lambda * theta to the gradient (that is Adam with L2).",
        (
            ADAM_MOMENTS,
            """                grad = p.grad.add(p, alpha=weight_decay)
                m.mul_(beta1).add_(grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
""",
        ),
        (ADAM_DECAY, ""),
    ),
    bug(
        "blind_adamw_no_weight_decay",
        "adamw",
        "adamw.py",
        ADAM_DECAY,
        "",
        "The decoupled weight decay step theta -= lr * lambda * theta is missing.",
    ),
]

COSINE_SCHEDULE = [
    bug(
        "blind_cosine_warmup_off_by_one",
        "cosine_schedule",
        "schedule.py",
        "return it / warmup_iters * max_learning_rate",
        "return (it + 1) / warmup_iters * max_learning_rate",
        "During warmup the rate is it / T_w * max, starting from 0 at it = 0.",
    ),
    bug(
        "blind_cosine_progress_from_zero",
        "cosine_schedule",
        "schedule.py",
        "progress = (it - warmup_iters) / (cosine_cycle_iters - warmup_iters)",
        "progress = it / cosine_cycle_iters",
        "The cosine phase starts at the end of warmup: progress is (it - T_w) / (T_c - T_w).",
    ),
    bug(
        "blind_cosine_missing_half",
        "cosine_schedule",
        "schedule.py",
        "0.5 * (1.0 + math.cos(math.pi * progress))",
        "(1.0 + math.cos(math.pi * progress))",
        "The cosine factor is (1 + cos(pi * progress)) / 2: it runs from 1 to 0.",
    ),
]

CLIPPING_BODY = """    if total_norm > max_l2_norm:
        scale = max_l2_norm / (total_norm + eps)
        for g in grads:
            g.mul_(scale.to(g.dtype))
"""
GRADIENT_CLIPPING = [
    bug(
        "blind_clip_per_parameter",
        "gradient_clipping",
        "gradient_clipping.py",
        CLIPPING_BODY,
        """    for g in grads:
        norm = g.detach().float().norm()
        if norm > max_l2_norm:
            g.mul_((max_l2_norm / (norm + eps)).to(g.dtype))
""",
        "Clip by one global norm over all gradients together, not each parameter's own norm.",
    ),
    bug(
        "blind_clip_squared_norm",
        "gradient_clipping",
        "gradient_clipping.py",
        "total_norm = torch.sqrt(sum(",
        "total_norm = (sum(",
        "The L2 norm is the square root of the sum of squares.",
    ),
    bug(
        "blind_clip_scales_up_small_gradients",
        "gradient_clipping",
        "gradient_clipping.py",
        "    if total_norm > max_l2_norm:\n",
        "    if total_norm > 0:\n",
        "Only scale when the norm exceeds the maximum; smaller gradients are left as they are.",
    ),
]

GET_BATCH = [
    bug(
        "blind_batch_last_start_unreachable",
        "get_batch",
        "data.py",
        "torch.randint(0, num_tokens - context_length, ",
        "torch.randint(0, num_tokens - context_length - 1, ",
        "Every start i with i + context_length < n is valid, the last one included: randint's "
        "upper bound is exclusive.",
    ),
    bug(
        "blind_batch_start_past_end",
        "get_batch",
        "data.py",
        "torch.randint(0, num_tokens - context_length, ",
        "torch.randint(0, num_tokens - context_length + 1, ",
        "A window needs context_length + 1 tokens (the last target), so the largest start is "
        "n - context_length - 1.",
    ),
    bug(
        "blind_batch_inputs_targets_swapped",
        "get_batch",
        "data.py",
        "return windows[:, :-1], windows[:, 1:]",
        "return windows[:, 1:], windows[:, :-1]",
        "Targets are the inputs shifted one to the left (the next token): return (x, y) with "
        "y[t] = x[t + 1].",
    ),
    bug(
        "blind_batch_int32",
        "get_batch",
        "data.py",
        "dtype=np.int64",
        "dtype=np.int32",
        "Return token ids as int64 (torch.long), as embedding lookups and the loss expect.",
    ),
]

CHECKPOINT = [
    bug(
        "blind_ckpt_optimizer_not_restored",
        "checkpoint",
        "checkpoint.py",
        'optimizer.load_state_dict(checkpoint["optimizer"])',
        "pass",
        "load_checkpoint must restore the optimizer's state too (its moments and step counts).",
    ),
    bug(
        "blind_ckpt_saves_wrapped_keys",
        "checkpoint",
        "checkpoint.py",
        '"model": unwrap_model(model).state_dict(),',
        '"model": model.state_dict(),',
        "Save the underlying model's state dict: a compiled or DDP-wrapped model's keys carry an "
        "_orig_mod. or module. prefix.",
    ),
    bug(
        "blind_ckpt_iteration_plus_one",
        "checkpoint",
        "checkpoint.py",
        '"iteration": int(iteration),',
        '"iteration": int(iteration) + 1,',
        "Store the iteration you were given; load_checkpoint returns exactly it.",
    ),
]

HEAP_KEY = "keys[pair[0]] + keys[pair[1]], pair)"
NEW_PAIR_KEY = "keys[new_pair[0]] + keys[new_pair[1]], new_pair)"
TRAIN_BPE = [
    edits(
        "blind_bpe_ties_to_smaller_pair",
        "train_bpe",
        "bpe.py",
        "Among pairs of equal count, merge the lexicographically greater pair of bytes, not the "
        "smaller.",
        (HEAP_KEY, "(vocab[ord(pair[0])], vocab[ord(pair[1])]), pair)"),
        (NEW_PAIR_KEY, "(vocab[ord(new_pair[0])], vocab[ord(new_pair[1])]), new_pair)"),
    ),
    edits(
        "blind_bpe_ties_by_token_id",
        "train_bpe",
        "bpe.py",
        "Break ties by comparing the pairs' bytes, not their token ids: a merged token's id "
        "says nothing about its bytes.",
        (HEAP_KEY, "(-ord(pair[0]), -ord(pair[1])), pair)"),
        (NEW_PAIR_KEY, "(-ord(new_pair[0]), -ord(new_pair[1])), new_pair)"),
    ),
    bug(
        "blind_bpe_no_special_split",
        "train_bpe",
        "pretokenization.py",
        """    for piece, is_special in split_on_special_tokens(text, special_regex):
        if not is_special:
            counts.update(pretokenize(piece))
""",
        """    counts.update(pretokenize(text))
""",
        "Split the text on the special tokens before pre-tokenizing: they are not text, and no "
        "merge may cross them.",
    ),
    bug(
        "blind_bpe_whitespace_pretokens",
        "train_bpe",
        "pretokenization.py",
        "counts.update(pretokenize(piece))",
        "counts.update(piece.split())",
        "Pre-tokenize with the GPT-2 regex (words keep their leading space; punctuation and "
        "digits are separate), not str.split().",
    ),
    bug(
        "blind_bpe_specials_not_in_vocab",
        "train_bpe",
        "bpe.py",
        """    for token in special_tokens:
        vocab[len(vocab)] = token.encode("utf-8")
""",
        "",
        "Each special token gets its own vocabulary entry, and counts towards vocab_size.",
    ),
    bug(
        "blind_bpe_vocab_size_counts_bytes_only",
        "train_bpe",
        "bpe.py",
        "vocab_size - len(vocab)",
        "vocab_size - 256",
        "vocab_size includes the special tokens: make vocab_size - 256 - len(special_tokens) "
        "merges.",
    ),
    bug(
        "blind_bpe_distinct_pretokens_once",
        "train_bpe",
        "bpe.py",
        'counts = [word_counts[word.encode("latin-1")] for word in words]',
        "counts = [1 for word in words]",
        "Weight each pre-token's pairs by how often the pre-token occurs in the corpus.",
    ),
    bug(
        "blind_bpe_stale_neighbour_counts",
        "train_bpe",
        "bpe.py",
        "        _lower(pair_counts, pair_words, x + pair[0], count)\n",
        "",
        "After a merge, the pair formed with the left neighbour no longer exists: decrement its "
        "count (the right side is decremented, the left is not).",
    ),
]

TOKENIZER = [
    bug(
        "blind_tok_first_mergeable_pair",
        "tokenizer",
        "tokenizer.py",
        "best = min(ranks)",
        "best = next((rank for rank in ranks if rank != NO_MERGE), NO_MERGE)",
        "At each step apply the merge learned earliest among the word's pairs, not the first "
        "pair (from the left) that has any merge.",
    ),
    bug(
        "blind_tok_rightmost_equal_rank",
        "tokenizer",
        "tokenizer.py",
        "i = ranks.index(best)",
        "i = len(ranks) - 1 - ranks[::-1].index(best)",
        "When a merge applies at several places, merge them left to right ('ooo' is [oo, o]).",
    ),
    bug(
        "blind_tok_specials_not_longest_first",
        "tokenizer",
        "pretokenization.py",
        "ordered = sorted(special_tokens, key=len, reverse=True)",
        "ordered = list(special_tokens)",
        "Match overlapping special tokens longest first, so a special that contains another is "
        "not cut at the shorter one.",
    ),
    bug(
        "blind_tok_decode_per_token",
        "tokenizer",
        "tokenizer.py",
        'data = b"".join([vocab[i] for i in ids])',
        'data = "".join([vocab[i].decode("utf-8", errors="replace") for i in ids]).encode()',
        "Join all the tokens' bytes and decode once: one character's UTF-8 bytes may be spread "
        "over several tokens.",
    ),
    bug(
        "blind_tok_decode_drops_bad_bytes",
        "tokenizer",
        "tokenizer.py",
        'data.decode("utf-8", errors="replace")',
        'data.decode("utf-8", errors="ignore")',
        "Malformed UTF-8 is replaced by U+FFFD (errors='replace'), not dropped.",
    ),
    bug(
        "blind_tok_specials_encoded_as_text",
        "tokenizer",
        "tokenizer.py",
        "self._special_regex = special_token_regex(self.special_tokens)",
        "self._special_regex = None",
        "Split the text on the special tokens before pre-tokenizing and emit each one's id; "
        "they must not be encoded as ordinary text.",
    ),
    bug(
        "blind_tok_merges_cross_pretokens",
        "tokenizer",
        "tokenizer.py",
        "pretokens = pretokenize(word)",
        "pretokens = [word]",
        "Pre-tokenize with the GPT-2 regex before applying merges: merges never cross a "
        "pre-token boundary.",
    ),
    bug(
        "blind_tok_iterable_chunks_independent",
        "tokenizer",
        "tokenizer.py",
        "        for chunk in iterable:\n            buffer += chunk\n",
        "        for chunk in iterable:\n            yield from self.encode(buffer)\n"
        "            buffer = chunk\n            continue\n",
        "encode_iterable must give exactly encode of the joined text: a word or special token "
        "can span two chunks, so chunks cannot be encoded independently.",
    ),
    bug(
        "blind_tok_iterable_ignores_special_length",
        "tokenizer",
        "tokenizer.py",
        "lookahead = max(1, self._longest_special)",
        "lookahead = 1",
        "When streaming, keep back enough text for a special token that has only partly "
        "arrived; otherwise it is cut and encoded as text.",
    ),
]

DECODING = [
    Bug(
        "blind_top_p_drops_crossing_token",
        "decoding",
        "cs336_basics/generation.py",
        (
            (
                "masked_fill(mass_before >= top_p, 0.0)",
                "masked_fill(sorted_probabilities.cumsum(dim=-1) > top_p, 0.0)",
            ),
        ),
        "Keep the token whose probability makes the kept mass reach top_p: the nucleus is the "
        "smallest set with mass >= p.",
        DECODING_TESTS,
    ),
    Bug(
        "blind_temperature_multiplies",
        "decoding",
        "cs336_basics/generation.py",
        (("logits.double() / temperature", "logits.double() * temperature"),),
        "Divide the logits by the temperature: softmax(logits / T).",
        DECODING_TESTS,
    ),
    Bug(
        "blind_top_p_not_renormalised",
        "decoding",
        "cs336_basics/generation.py",
        (("return kept / kept.sum()", "return kept"),),
        "After zeroing the tokens outside the nucleus, renormalise so the rest sums to one.",
        DECODING_TESTS,
    ),
]

ACCOUNTING = [
    Bug(
        "blind_params_no_final_norm",
        "accounting",
        "cs336_basics/accounting.py",
        (("config.num_layers * 2 * d + d", "config.num_layers * 2 * d"),),
        "Count the final RMSNorm's d_model gains as well as the two per block.",
        ACCOUNTING_TESTS,
    ),
    Bug(
        "blind_flops_two_ffn_matrices",
        "accounting",
        "cs336_basics/accounting.py",
        (("2 * tokens * d * config.d_ff * 3", "2 * tokens * d * config.d_ff * 2"),),
        "SwiGLU has three d_model x d_ff matrices (W1, W2, W3), not the two of a plain MLP.",
        ACCOUNTING_TESTS,
    ),
]

BLIND: list[Bug] = [
    *LINEAR,
    *EMBEDDING,
    *RMSNORM,
    *SILU,
    *SWIGLU,
    *ROPE,
    *SOFTMAX,
    *SCALED_DOT_PRODUCT_ATTENTION,
    *MULTIHEAD_SELF_ATTENTION,
    *TRANSFORMER_BLOCK,
    *TRANSFORMER_LM,
    *CROSS_ENTROPY,
    *ADAMW,
    *COSINE_SCHEDULE,
    *GRADIENT_CLIPPING,
    *GET_BATCH,
    *CHECKPOINT,
    *TRAIN_BPE,
    *TOKENIZER,
    *DECODING,
    *ACCOUNTING,
]
