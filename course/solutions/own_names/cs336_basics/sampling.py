"""Sampling continuations: temperature, then the top-p nucleus."""

import numpy as np
import torch


def nucleus_probabilities(logits, temperature, top_p):
    p = torch.softmax(logits.double() / temperature, dim=-1).cpu().numpy()
    order = np.argsort(-p, kind="stable")
    mass = np.cumsum(p[order])
    size = int(np.searchsorted(mass, top_p)) + 1  # smallest prefix whose mass reaches top_p
    kept = np.zeros_like(p)
    kept[order[:size]] = p[order[:size]]
    return kept / kept.sum()


@torch.no_grad()
def continue_prompt(model, prompt, budget, temperature, top_p, stop=None):
    sequence, produced = list(prompt), []
    device = next(model.parameters()).device
    while len(produced) < budget:
        logits = model(torch.tensor(sequence[-model.context :], device=device)[None])[0, -1]
        probabilities = nucleus_probabilities(logits, temperature, top_p)
        token = int(np.random.choice(len(probabilities), p=probabilities))
        produced.append(token)
        sequence.append(token)
        if token == stop:
            break
    return produced
