"""A transformer language model from scratch: tokenizer, model, training and decoding."""
