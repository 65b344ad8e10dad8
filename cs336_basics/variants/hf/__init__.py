"""Hugging Face interop: published model families in and out, apart from the architecture.

It reads and writes what the architecture builds; the architecture never imports it.

- ``named_builders``: one builder per published family (``llama3_2_1b``, ``qwen3_0_6b``,
  ``mixtral``, ...) and ``config_from_hf``; ``published``: their published configs
- ``convert``: state dicts to and from HF's tensor names; ``expert_layout``: per-expert or
  stacked expert tensors
- ``checkpoint``: HF checkpoint directories (``load_pretrained``, ``save_pretrained``)
- ``tokenizer``: ``tokenizer.json`` files as a ``Tokenizer``
"""
