"""Counting: parameters and matmul FLOPs of the model, on paper."""


def count_weights(vocab, width, depth, hidden):
    block = 4 * width * width + 3 * width * hidden + 2 * width
    return vocab * width + depth * block + width + width * vocab


def count_matmul_flops(vocab, width, depth, hidden, batch, length):
    rows = batch * length

    def matmul(m, k, n):
        return 2 * m * k * n

    block = (
        4 * matmul(rows, width, width)
        + 2 * batch * matmul(length, width, length)
        + 3 * matmul(rows, width, hidden)
    )
    return depth * block + matmul(rows, width, vocab)
