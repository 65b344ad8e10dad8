"""Reference solution of the transformer-LM-from-scratch assignment."""
