"""The catalogue of common bugs: realistic student mistakes, written as edits of the reference.

Each ``Bug`` names the rubric component it breaks, one or more exact ``(before, after)`` source
edits (each ``before`` occurs exactly once in its file; made by ``course.workspace.apply_edits``,
as the alternative solutions' edits are), and a plain hint a student could act on. ``make
mutants`` (``python -m course.mutation --source catalogue``) applies each bug to a copy of the
repository and runs the component's tests: every bug must make at least one test fail. The
hint strings double as the messages the suite's diagnostics use for the same mistakes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from course.workspace import Edit, apply_edits


@dataclass(frozen=True)
class Bug:
    name: str
    component: str
    path: str
    # Exact (before, after) replacements in ``path``, in order (``edits`` as the workspace's edits).
    replacements: tuple[tuple[str, str], ...]
    hint: str
    # The pytest -k expression of the tests to run; empty: the rubric component's own.
    select: str = ""

    @property
    def edits(self) -> tuple[Edit, ...]:
        return tuple(
            Edit(self.path, before, after, f"bug {self.name}")
            for before, after in self.replacements
        )

    def apply(self, root: Path) -> None:
        """Rewrite ``root / path`` with the bug; raise if an edit no longer fits the source."""
        apply_edits(root, self.edits)


def bug(
    name: str, component: str, path: str, before: str, after: str, hint: str, select: str = ""
) -> Bug:
    return Bug(name, component, f"cs336_basics/{path}", ((before, after),), hint, select)


# Decoding is not a graded component of the rubric; its bugs run these tests.
DECODING_TESTS = "top_p or sample_next_token or generation"


BUGS: list[Bug] = [
    # --- Layers -----------------------------------------------------------------------------------
    bug(
        "linear_weight_not_transposed",
        "linear",
        "linear.py",
        "return x @ self.weight.T",
        "return x @ self.weight",
        "the weight is (d_out, d_in): compute x @ W.T, not x @ W",
    ),
    bug(
        "embedding_indexes_columns",
        "embedding",
        "embedding.py",
        "return self.weight[token_ids]",
        "return self.weight.T[token_ids % self.embedding_dim]",
        "look up rows of the (vocab_size, d_model) table, not columns",
    ),
    bug(
        "rmsnorm_without_eps",
        "rmsnorm",
        "rmsnorm.py",
        "x.pow(2).mean(dim=-1, keepdim=True) + self.eps)",
        "x.pow(2).mean(dim=-1, keepdim=True))",
        "add eps inside the square root: x / sqrt(mean(x^2) + eps)",
    ),
    bug(
        "rmsnorm_subtracts_mean",
        "rmsnorm",
        "rmsnorm.py",
        "x.pow(2).mean(dim=-1, keepdim=True)",
        "(x - x.mean(dim=-1, keepdim=True)).pow(2).mean(dim=-1, keepdim=True)",
        "RMSNorm does not subtract the mean (that is LayerNorm): use mean(x^2), not the variance",
    ),
    bug(
        "rmsnorm_without_sqrt",
        "rmsnorm",
        "rmsnorm.py",
        "torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)",
        "1 / (x.pow(2).mean(dim=-1, keepdim=True) + self.eps)",
        "divide by the root of the mean square, not by the mean square itself",
    ),
    bug(
        "rmsnorm_in_input_precision",
        "rmsnorm",
        "rmsnorm.py",
        "x = x.float()\n",
        "\n",
        "compute the RMS in float32 and cast the result back to the input dtype",
    ),
    bug(
        "silu_is_sigmoid",
        "silu",
        "functional.py",
        "return x * torch.sigmoid(x)",
        "return torch.sigmoid(x)",
        "SiLU is x * sigmoid(x), not sigmoid(x)",
    ),
    bug(
        "swiglu_w1_w3_swapped",
        "swiglu",
        "feedforward.py",
        "return self.w2(silu(self.w1(x)) * self.w3(x))",
        "return self.w2(silu(self.w3(x)) * self.w1(x))",
        "SwiGLU gates with silu(W1 x) * W3 x: the SiLU goes on W1, not W3",
    ),
    bug(
        "softmax_without_max_subtraction",
        "softmax",
        "functional.py",
        "shifted = x - x.amax(dim=dim, keepdim=True).detach()",
        "shifted = x",
        "subtract the maximum before exp, or large inputs overflow to inf/NaN",
    ),
    bug(
        "softmax_sums_last_dim",
        "softmax",
        "functional.py",
        "exps / exps.sum(dim=dim, keepdim=True)",
        "exps / exps.sum(dim=-1, keepdim=True)",
        "normalise along the requested dim, not always the last one",
    ),
    # --- Attention --------------------------------------------------------------------------------
    bug(
        "attention_missing_scale",
        "scaled_dot_product_attention",
        "attention.py",
        '"... queries d_k, ... keys d_k -> ... queries keys") / math.sqrt(d_k)',
        '"... queries d_k, ... keys d_k -> ... queries keys")',
        "scale the scores by 1/sqrt(d_k) before the softmax",
    ),
    bug(
        "attention_scale_by_d_k",
        "scaled_dot_product_attention",
        "attention.py",
        "/ math.sqrt(d_k)",
        "/ d_k",
        "the scale is 1/sqrt(d_k), not 1/d_k",
    ),
    bug(
        "attention_inverted_mask",
        "scaled_dot_product_attention",
        "attention.py",
        'scores.masked_fill(~mask, float("-inf"))',
        'scores.masked_fill(mask, float("-inf"))',
        "mask True means 'may attend': fill -inf where the mask is False",
    ),
    bug(
        "causal_mask_excludes_diagonal",
        "multihead_self_attention",
        "attention.py",
        ".tril()",
        ".tril(diagonal=-1)",
        "a token may attend to itself: the causal mask includes the diagonal",
    ),
    bug(
        "causal_mask_attends_to_future",
        "multihead_self_attention",
        "attention.py",
        ".tril()",
        ".triu()",
        "the causal mask is lower-triangular: query i sees keys 0..i, not the future",
    ),
    bug(
        "attention_without_causal_mask",
        "multihead_self_attention",
        "attention.py",
        "attended = scaled_dot_product_attention(q, k, v, causal)",
        "attended = scaled_dot_product_attention(q, k, v)",
        "self-attention in a language model must be causal: pass the causal mask",
    ),
    Bug(
        "heads_split_in_wrong_order",
        "multihead_self_attention",
        "cs336_basics/attention.py",
        (
            (
                '"... seq (heads d_k) -> ... heads seq d_k"',
                '"... seq (d_k heads) -> ... heads seq d_k"',
            ),
        ),
        "head h owns the contiguous features h*d_k..(h+1)*d_k-1: split '(heads d_k)', not '(d_k heads)'",
    ),
    Bug(
        "rope_applied_to_values",
        "multihead_self_attention",
        "cs336_basics/attention.py",
        (
            (
                "k = self.rope(k, head_positions)\n",
                "k = self.rope(k, head_positions)\n            v = self.rope(v, head_positions)\n",
            ),
        ),
        "RoPE rotates queries and keys only, never values",
    ),
    # --- RoPE -------------------------------------------------------------------------------------
    Bug(
        "rope_rotate_half",
        "rope",
        "cs336_basics/rope.py",
        (
            (
                '"... (half two) -> ... half two", two=2)',
                '"... (two half) -> ... half two", two=2)',
            ),
            ('"... half two -> ... (half two)")', '"... half two -> ... (two half)")'),
        ),
        "rotate interleaved pairs (x[2i], x[2i+1]), not the two halves (rotate-half / NeoX style)",
    ),
    bug(
        "rope_positions_off_by_one",
        "rope",
        "rope.py",
        "positions = torch.arange(max_seq_len, dtype=torch.float64)",
        "positions = torch.arange(1, max_seq_len + 1, dtype=torch.float64)",
        "positions start at 0: the first token is not rotated",
    ),
    bug(
        "rope_frequency_exponent_i_over_d",
        "rope",
        "rope.py",
        "-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k",
        "-torch.arange(0, d_k // 2, dtype=torch.float64) / d_k",
        "pair i rotates by theta^(-2i/d_k), not theta^(-i/d_k)",
    ),
    bug(
        "rope_rotates_backwards",
        "rope",
        "rope.py",
        "(even * cos - odd * sin, even * sin + odd * cos)",
        "(even * cos + odd * sin, odd * cos - even * sin)",
        "rotate by +angle: (x cos - y sin, x sin + y cos)",
    ),
    # --- Block and model --------------------------------------------------------------------------
    bug(
        "block_post_norm",
        "transformer_block",
        "block.py",
        "x = x + self.attn(self.ln1(x), token_positions)\n        return x + self.ffn(self.ln2(x))",
        "x = self.ln1(x + self.attn(x, token_positions))\n        return self.ln2(x + self.ffn(x))",
        "the handout's block is pre-norm: x + attn(ln1(x)), not ln1(x + attn(x))",
    ),
    bug(
        "block_missing_ffn_residual",
        "transformer_block",
        "block.py",
        "return x + self.ffn(self.ln2(x))",
        "return self.ffn(self.ln2(x))",
        "keep the residual connection around the feed-forward sublayer",
    ),
    bug(
        "block_reuses_ln1",
        "transformer_block",
        "block.py",
        "return x + self.ffn(self.ln2(x))",
        "return x + self.ffn(self.ln1(x))",
        "the feed-forward sublayer has its own norm, ln2",
    ),
    bug(
        "lm_without_final_norm",
        "transformer_lm",
        "model.py",
        "return self.lm_head(self.ln_final(x))",
        "return self.lm_head(x)",
        "apply ln_final after the last block, before the LM head",
    ),
    bug(
        "lm_returns_probabilities",
        "transformer_lm",
        "model.py",
        "return self.lm_head(self.ln_final(x))",
        "return torch.softmax(self.lm_head(self.ln_final(x)), dim=-1)",
        "return unnormalised logits; the softmax belongs to the loss or the sampler",
    ),
    # --- Training ---------------------------------------------------------------------------------
    bug(
        "cross_entropy_unstable",
        "cross_entropy",
        "losses.py",
        "shifted = logits - logits.amax(dim=-1, keepdim=True).detach()",
        "shifted = logits",
        "subtract the max logit before exp (log-sum-exp trick), or large logits give inf/NaN",
    ),
    bug(
        "cross_entropy_sum_not_mean",
        "cross_entropy",
        "losses.py",
        "return (log_normaliser - target_logits).mean()",
        "return (log_normaliser - target_logits).sum()",
        "average the loss over the batch (and sequence), do not sum it",
    ),
    Bug(
        "adamw_coupled_l2",
        "adamw",
        "cs336_basics/adamw.py",
        (
            (
                "m.mul_(beta1).add_(p.grad, alpha=1 - beta1)",
                "grad = p.grad.add(p, alpha=weight_decay)\n                m.mul_(beta1).add_(grad, alpha=1 - beta1)",
            ),
            ("addcmul_(p.grad, p.grad, value=1 - beta2)", "addcmul_(grad, grad, value=1 - beta2)"),
            ("p.mul_(1 - lr * weight_decay)", "pass"),
        ),
        "AdamW decouples weight decay (theta -= lr * lambda * theta); adding lambda*theta to the gradient is Adam+L2",
    ),
    bug(
        "adamw_no_bias_correction",
        "adamw",
        "adamw.py",
        "step_size = lr * math.sqrt(1 - beta2**t) / (1 - beta1**t)",
        "step_size = lr",
        "use the bias-corrected step size lr * sqrt(1 - beta2^t) / (1 - beta1^t)",
    ),
    bug(
        "adamw_decay_uses_corrected_step",
        "adamw",
        "adamw.py",
        "p.mul_(1 - lr * weight_decay)",
        "p.mul_(1 - step_size * weight_decay)",
        "weight decay uses the plain learning rate: theta -= lr * lambda * theta",
    ),
    bug(
        "adamw_eps_inside_sqrt",
        "adamw",
        "adamw.py",
        "v.sqrt().add_(eps)",
        "v.add(eps).sqrt()",
        "eps goes outside the square root: m / (sqrt(v) + eps)",
    ),
    bug(
        "schedule_warmup_off_by_one",
        "cosine_schedule",
        "schedule.py",
        "return it / warmup_iters * max_learning_rate",
        "return (it + 1) / warmup_iters * max_learning_rate",
        "warmup is lr = it / warmup_iters * max_lr: iteration 0 has learning rate 0",
    ),
    bug(
        "schedule_cosine_over_whole_run",
        "cosine_schedule",
        "schedule.py",
        "progress = (it - warmup_iters) / (cosine_cycle_iters - warmup_iters)",
        "progress = it / cosine_cycle_iters",
        "the cosine phase runs from warmup_iters to cosine_cycle_iters: progress = (it - Tw) / (Tc - Tw)",
    ),
    Bug(
        "clipping_per_parameter",
        "gradient_clipping",
        "cs336_basics/gradient_clipping.py",
        (
            (
                "    if total_norm > max_l2_norm:\n        scale = max_l2_norm / (total_norm + eps)\n"
                "        for g in grads:\n            g.mul_(scale.to(g.dtype))\n",
                "    for g in grads:\n        norm = g.detach().float().norm()\n        if norm > max_l2_norm:\n"
                "            g.mul_((max_l2_norm / (norm + eps)).to(g.dtype))\n",
            ),
        ),
        "clip by one global L2 norm over all gradients, not each parameter separately",
    ),
    bug(
        "clipping_scales_small_gradients",
        "gradient_clipping",
        "gradient_clipping.py",
        "if total_norm > max_l2_norm:",
        "if True:",
        "only rescale when the global norm exceeds max_l2_norm",
    ),
    bug(
        "get_batch_never_samples_last_start",
        "get_batch",
        "data.py",
        "torch.randint(0, num_tokens - context_length, (batch_size,)",
        "torch.randint(0, num_tokens - context_length - 1, (batch_size,)",
        "the last valid start is len(dataset) - context_length - 1; randint's upper bound is exclusive",
    ),
    bug(
        "get_batch_targets_not_shifted",
        "get_batch",
        "data.py",
        "return windows[:, :-1], windows[:, 1:]",
        "return windows[:, :-1], windows[:, :-1]",
        "targets are the inputs shifted left by one token",
    ),
    bug(
        "checkpoint_skips_optimizer",
        "checkpoint",
        "checkpoint.py",
        '        optimizer.load_state_dict(checkpoint["optimizer"])\n',
        "        pass\n",
        "restore the optimizer state too (AdamW moments and step counts), or training does not resume identically",
    ),
    # --- Tokenizer --------------------------------------------------------------------------------
    bug(
        "bpe_ties_to_smaller_pair",
        "train_bpe",
        "bpe.py",
        'return "".join(chr(255 - b) for b in token) + _KEY_END',
        'return "".join(chr(1 + b) for b in token) + "\\x00"',
        "break frequency ties toward the lexicographically greater pair of bytes",
    ),
    Bug(
        "bpe_ties_by_token_ids",
        "train_bpe",
        "cs336_basics/bpe.py",
        (
            (
                "keys = {chr(token_id): _descending_key(token) for token_id, token in vocab.items()}",
                "keys = {chr(i): chr(0x10FFFF - i) + _KEY_END for i in vocab}",
            ),
            (
                "keys[new_token] = keys[pair[0]][:-1] + keys[pair[1]]",
                "keys[new_token] = chr(0x10FFFF - ord(new_token)) + _KEY_END",
            ),
        ),
        "compare tied pairs by their bytes, not by their token ids",
    ),
    Bug(
        "bpe_does_not_stop_when_pairs_run_out",
        "train_bpe",
        "cs336_basics/bpe.py",
        (
            # A naive trainer's Counter keeps the pairs whose count fell to 0 ...
            (
                "    if left:\n"
                "        pair_counts[pair] = left\n"
                "    else:\n"
                "        del pair_counts[pair]\n"
                "        pair_words.pop(pair, None)\n",
                "    pair_counts[pair] = left\n",
            ),
            # ... and its max() picks among them once no pair is left.
            (
                "                heapq.heappush(heap, (-count, keys[new_pair[0]] + keys[new_pair[1]], new_pair))\n"
                "    return merges\n",
                "                heapq.heappush(heap, (-count, keys[new_pair[0]] + keys[new_pair[1]], new_pair))\n"
                "        gone = sorted((p for p, c in pair_counts.items() if c == 0), key=lambda p: keys[p[0]] + keys[p[1]])\n"
                "        for pair in gone[: num_merges - len(merges)]:\n"
                "            merges.append((vocab[ord(pair[0])], vocab[ord(pair[1])]))\n"
                "            vocab[len(vocab)] = merges[-1][0] + merges[-1][1]\n"
                "    return merges\n",
            ),
        ),
        "stop merging when no pair is left: vocab_size is a maximum",
    ),
    bug(
        "bpe_counts_each_word_once",
        "train_bpe",
        "bpe.py",
        'counts = [word_counts[word.encode("latin-1")] for word in words]',
        "counts = [1 for word in words]",
        "weight each pair by how often its pre-token occurs in the corpus",
    ),
    bug(
        "bpe_merges_across_special_tokens",
        "train_bpe",
        "pretokenization.py",
        "for piece, is_special in split_on_special_tokens(text, special_regex):\n        if not is_special:",
        "for piece, is_special in [(text, False)]:\n        if not is_special:",
        "split the text on special tokens before pre-tokenizing, so no merge crosses them",
    ),
    bug(
        "bpe_chunk_boundary_inside_special",
        "train_bpe",
        "chunking.py",
        "            if not any(s < candidate < e for s, e in spans):",
        "            if True:",
        "cut the file into chunks only where no special token spans the cut",
    ),
    bug(
        "special_tokens_shortest_first",
        "tokenizer",
        "pretokenization.py",
        "ordered = sorted(special_tokens, key=len, reverse=True)",
        "ordered = sorted(special_tokens, key=len)",
        "match overlapping special tokens longest first",
    ),
    bug(
        "encode_applies_latest_merge_first",
        "tokenizer",
        "tokenizer.py",
        "for rank, (left, right) in enumerate(self.merges):",
        "for rank, (left, right) in enumerate(reversed(self.merges)):",
        "apply merges in the order they were learned (lowest rank first)",
    ),
    bug(
        "decode_drops_malformed_bytes",
        "tokenizer",
        "tokenizer.py",
        'data.decode("utf-8", errors="replace")',
        'data.decode("utf-8", errors="ignore")',
        "decode malformed UTF-8 with errors='replace' (U+FFFD), do not drop bytes",
    ),
    bug(
        "encode_iterable_splits_at_chunks",
        "tokenizer",
        "tokenizer.py",
        "cut = last_safe_boundary(buffer, searched, stop, self._special_regex)",
        "cut = len(buffer)",
        "encode_iterable must not split pre-tokens at chunk boundaries: carry the unfinished tail over",
    ),
    # --- Found by mistakes written outside this catalogue (issue 14) ---------------------------
    bug(
        "linear_init_variance_as_std",
        "linear",
        "linear.py",
        "std = math.sqrt(2.0 / (self.in_features + self.out_features))",
        "std = 2.0 / (self.in_features + self.out_features)",
        "the init's std is sqrt(2 / (d_in + d_out)); 2 / (d_in + d_out) is the variance",
    ),
    bug(
        "linear_init_truncated_at_3_absolute",
        "linear",
        "linear.py",
        "a=-3 * std, b=3 * std",
        "a=-3.0, b=3.0",
        "truncate the init at ±3σ: trunc_normal_'s a and b are absolute bounds",
    ),
    bug(
        "embedding_init_std_0_02",
        "embedding",
        "embedding.py",
        "std=1.0, a=-3.0, b=3.0",
        "std=0.02, a=-3.0, b=3.0",
        "the handout initialises embeddings from N(0, 1) truncated at ±3, not GPT-2's std 0.02",
    ),
    bug(
        "encode_merges_equal_ranks_from_the_right",
        "tokenizer",
        "tokenizer.py",
        "i = ranks.index(best)",
        "i = len(ranks) - 1 - ranks[::-1].index(best)",
        "merge the lowest-rank pair at its leftmost occurrence first ('ooo' is [oo, o])",
    ),
    bug(
        "encode_iterable_decides_specials_early",
        "tokenizer",
        "tokenizer.py",
        "lookahead = max(1, self._longest_special)",
        "lookahead = 1",
        "keep text that may still grow into a longer special token for the next chunk",
    ),
    bug(
        "encode_iterable_waits_for_shortest_special_only",
        "tokenizer",
        "tokenizer.py",
        "self._longest_special = max((len(s) for s in self.special_tokens), default=0)",
        "self._longest_special = min((len(s) for s in self.special_tokens), default=0)",
        "at a chunk boundary wait until the longest special token could have arrived",
    ),
    bug(
        "top_p_exclusive_at_threshold",
        "decoding",
        "generation.py",
        "masked_fill(mass_before >= top_p, 0.0)",
        "masked_fill(mass_before > top_p, 0.0)",
        "the nucleus is the smallest set with mass >= top_p: mass exactly top_p closes it",
        DECODING_TESTS,
    ),
    bug(
        "top_p_drops_the_token_that_crosses",
        "decoding",
        "generation.py",
        "mass_before = sorted_probabilities.cumsum(dim=-1) - sorted_probabilities",
        "mass_before = sorted_probabilities.cumsum(dim=-1)",
        "keep the token whose probability brings the mass up to top_p",
        DECODING_TESTS,
    ),
    bug(
        "temperature_multiplies_logits",
        "decoding",
        "generation.py",
        "softmax(logits.double() / temperature, dim=-1)",
        "softmax(logits.double() * temperature, dim=-1)",
        "divide the logits by the temperature",
        DECODING_TESTS,
    ),
    bug(
        "clipping_without_eps",
        "gradient_clipping",
        "gradient_clipping.py",
        "scale = max_l2_norm / (total_norm + eps)",
        "scale = max_l2_norm / total_norm",
        "scale by max / (norm + 1e-6); the eps matters for tiny norms",
    ),
    bug(
        "checkpoint_keeps_wrapper_prefixes",
        "checkpoint",
        "checkpoint.py",
        '"model": unwrap_model(model).state_dict(),',
        '"model": model.state_dict(),',
        "save the underlying model's state dict (model.module, model._orig_mod), not the wrapper's",
    ),
    # --- Mistakes whose diagnoses issue 26 added -------------------------------------------------
    bug(
        "rmsnorm_eps_outside_sqrt",
        "rmsnorm",
        "rmsnorm.py",
        "torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)",
        "1 / (x.pow(2).mean(dim=-1, keepdim=True).sqrt() + self.eps)",
        "add eps inside the square root: x / sqrt(mean(x^2) + eps)",
    ),
    bug(
        "softmax_subtracts_global_max",
        "softmax",
        "functional.py",
        "shifted = x - x.amax(dim=dim, keepdim=True)",
        "shifted = x - x.amax()",
        "subtract the max along dim, not the max of the whole tensor",
    ),
    bug(
        "get_batch_keeps_dataset_dtype",
        "get_batch",
        "data.py",
        "windows = np.asarray(dataset[starts.numpy()[:, None] + offsets], dtype=np.int64)",
        "windows = np.asarray(dataset[starts.numpy()[:, None] + offsets])",
        "cast the token ids to int64: a uint16 dataset must not give uint16 batches",
    ),
]

# What a correct, specific hint for each bug says: a regular expression (case-insensitive) that
# some ``hint:`` or ``diagnosis:`` line of a failing test must match for ``make mutants`` to count
# the bug as explained. Written from the bug, not from the messages the suite happens to print.
EXPECTED_HINTS: dict[str, str] = {
    "linear_weight_not_transposed": r"transpos|x @ w\.t|\(d_out, d_in\)",
    "embedding_indexes_columns": r"rows|transpos",
    "rmsnorm_without_eps": r"eps",
    "rmsnorm_subtracts_mean": r"mean|layernorm|variance",
    "rmsnorm_without_sqrt": r"root|sqrt",
    "rmsnorm_in_input_precision": r"float32|precision",
    "silu_is_sigmoid": r"sigmoid",
    "swiglu_w1_w3_swapped": r"w1|w3",
    "softmax_without_max_subtraction": r"max",
    "softmax_sums_last_dim": r"along (the requested )?dim|dim \d|last one",
    "attention_missing_scale": r"sqrt\(",
    "attention_scale_by_d_k": r"sqrt|d_k",
    "attention_inverted_mask": r"mask",
    "causal_mask_excludes_diagonal": r"diagonal|itself|masked row",
    "causal_mask_attends_to_future": r"future|causal|diagonal",
    "attention_without_causal_mask": r"causal|future|diagonal",
    "heads_split_in_wrong_order": r"head|permut|order",
    "rope_applied_to_values": r"value",
    "rope_rotate_half": r"rotate-half|halves|interleaved",
    "rope_positions_off_by_one": r"position|off-by-one|shift",
    "rope_frequency_exponent_i_over_d": r"theta|frequenc|exponent",
    "rope_rotates_backwards": r"sign|direction|backward|angle|wrong way",
    "block_post_norm": r"pre-norm|post-norm",
    "block_missing_ffn_residual": r"residual",
    "block_reuses_ln1": r"ln2",
    "lm_without_final_norm": r"ln_final|final norm",
    "lm_returns_probabilities": r"logits|softmax|probabilit",
    "cross_entropy_unstable": r"max|log-sum-exp|logsumexp",
    "cross_entropy_sum_not_mean": r"mean|average|sum",
    "adamw_coupled_l2": r"decoupl|l2",
    "adamw_no_bias_correction": r"bias.correct",
    "adamw_decay_uses_corrected_step": r"weight decay|plain (learning rate|lr)|decay uses",
    "adamw_eps_inside_sqrt": r"eps",
    "schedule_warmup_off_by_one": r"warmup|iteration 0|off-by-one",
    "schedule_cosine_over_whole_run": r"cosine|warmup_iters",
    "clipping_per_parameter": r"global|each parameter|per.parameter",
    "clipping_scales_small_gradients": r"exceed|only rescale|below",
    "get_batch_never_samples_last_start": r"last valid start|exclusive",
    "get_batch_targets_not_shifted": r"shift",
    "checkpoint_skips_optimizer": r"optimizer",
    "bpe_ties_to_smaller_pair": r"tie",
    "bpe_ties_by_token_ids": r"tie|bytes",
    "bpe_does_not_stop_when_pairs_run_out": r"stop|possible",
    "bpe_counts_each_word_once": r"how often|count|weight",
    "bpe_merges_across_special_tokens": r"special",
    "bpe_chunk_boundary_inside_special": r"special",
    "special_tokens_shortest_first": r"longest",
    "encode_applies_latest_merge_first": r"order|rank",
    "decode_drops_malformed_bytes": r"replace|u\+fffd",
    "encode_iterable_splits_at_chunks": r"chunk",
    "linear_init_variance_as_std": r"variance|std",
    "linear_init_truncated_at_3_absolute": r"trunc|3σ|3 std|±3",
    "embedding_init_std_0_02": r"n\(0, 1\)|std",
    "encode_merges_equal_ranks_from_the_right": r"leftmost",
    "encode_iterable_decides_specials_early": r"special|tail",
    "encode_iterable_waits_for_shortest_special_only": r"special|tail",
    "top_p_exclusive_at_threshold": r"top_p|nucleus",
    "top_p_drops_the_token_that_crosses": r"top_p|nucleus",
    "temperature_multiplies_logits": r"temperature",
    "clipping_without_eps": r"eps|1e-6",
    "checkpoint_keeps_wrapper_prefixes": r"wrapper|module|_orig_mod|prefix",
    "rmsnorm_eps_outside_sqrt": r"eps.*(inside|outside).*square root",
    "softmax_subtracts_global_max": r"whole tensor|global max|row's own",
    "get_batch_keeps_dataset_dtype": r"int64|dtype",
}
