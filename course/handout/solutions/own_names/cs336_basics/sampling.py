"""Sampling continuations: temperature, then the top-p nucleus."""

import numpy as np
import torch


def nucleus_probabilities(logits, temperature, top_p):
    return nucleus(torch.softmax(logits.double() / temperature, dim=-1).cpu().numpy(), top_p)


def nucleus(p, top_p):
    order = np.argsort(-p, kind="stable")
    mass = np.cumsum(p[order])
    size = int(np.searchsorted(mass, top_p)) + 1  # smallest prefix whose mass reaches top_p
    kept = np.zeros_like(p)
    kept[order[:size]] = p[order[:size]]
    return kept / kept.sum()


def pick(logits, temperature, top_p):
    """One token: argmax at temperature 0, else a draw from the tempered nucleus."""
    if temperature == 0:
        return int(torch.argmax(logits))
    probabilities = nucleus_probabilities(logits, temperature, top_p)
    return int(np.random.choice(len(probabilities), p=probabilities))


@torch.no_grad()
def continue_prompt(model, prompt, budget, temperature, top_p, stop=None):
    sequence, produced = list(prompt), []
    device = next(model.parameters()).device
    while len(produced) < budget:
        logits = model(torch.tensor(sequence[-model.context :], device=device)[None])[0, -1]
        token = pick(logits, temperature, top_p)
        produced.append(token)
        sequence.append(token)
        if token == stop:
            break
    return produced
