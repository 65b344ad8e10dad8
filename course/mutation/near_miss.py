"""Near misses: mistakes that pass the public cases by a small margin or on one input rank.

Each was found where the public cases and the hidden instances of one component differ in kind
(input rank, eps sensitivity, a corpus that runs out of pairs): written for the shapes or the
scale the public cases happen to use, they pass everything a student can run. ``python -m
course.mutation --source near-miss --judge silent`` checks that each one the grader charges
also fails a shipped test of its component (docs/grading.md, "Nothing graded that the student
could not see fail").
"""

from __future__ import annotations

from course.mutation.catalogue import Bug, bug

NEAR_MISSES: list[Bug] = [
    bug(
        "near_miss_rmsnorm_3d_only",
        "rmsnorm",
        "rmsnorm.py",
        "x.pow(2).mean(dim=-1, keepdim=True)",
        "x.pow(2).mean(dim=2, keepdim=True)",
        "RMSNorm normalises over the last axis of an input of any rank, not over axis 2",
    ),
    bug(
        "near_miss_rmsnorm_eps_fixed",
        "rmsnorm",
        "rmsnorm.py",
        "keepdim=True) + self.eps)",
        "keepdim=True) + 1e-6)",
        "use the eps the layer is given, not a constant",
    ),
    bug(
        "near_miss_linear_3d_only",
        "linear",
        "linear.py",
        "return x @ self.weight.T",
        'return torch.einsum("bsi,oi->bso", x, self.weight)',
        "a linear layer takes any number of leading dimensions, not exactly (batch, seq)",
    ),
    bug(
        "near_miss_swiglu_3d_only",
        "swiglu",
        "feedforward.py",
        "return self.w2(silu(self.w1(x)) * self.w3(x))",
        "batch, seq, d_model = x.shape\n"
        "        flat = x.reshape(batch * seq, d_model)\n"
        "        return self.w2(silu(self.w1(flat)) * self.w3(flat)).reshape(batch, seq, -1)",
        "SwiGLU takes any number of leading dimensions, not exactly (batch, seq)",
    ),
    bug(
        "near_miss_lm_final_eps",
        "transformer_lm",
        "model.py",
        "ln_final=RMSNorm(config.d_model, config.norm_eps,",
        "ln_final=RMSNorm(config.d_model, 1e-6,",
        "the final norm takes the model's eps (1e-5), like the blocks' norms",
    ),
    bug(
        "near_miss_bpe_no_stop",
        "train_bpe",
        "bpe.py",
        "while len(merges) < num_merges and heap:",
        "while len(merges) < num_merges:",
        "stop merging when no pair is left, even below vocab_size",
    ),
]
