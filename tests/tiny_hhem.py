# SPDX-License-Identifier: Apache-2.0
"""A tiny, randomly initialised model with HHEM-2.1-Open's structure (T5 foundation, `t5.`-prefixed checkpoint) that
`HHEMGrounder` loads as the real one: for tests of loading, shapes, batching and offsets (scores are meaningless)."""

import json
import re
from pathlib import Path

#: Words of the tiny vocabulary (anything else is `<unk>`).
_BASE_TEXT = """
determine if the hypothesis is true given the premise ? : . , ! ; ' " ( ) $ - 0 1 2 3 4 5 6 7 8 9
a an and are as at be by for from has he her his in it its of on or she that this to was were with
paris france capital city london england big stone gap film directed adriana trigiani new york greenwich
village director author based town virginia river population year born
"""


def build_tiny_hhem(folder: Path | str) -> tuple[Path, Path]:
    """Write a tiny HHEM-structured model into `folder/hhem` and `folder/foundation`; returns those two folders."""
    import torch
    from safetensors.torch import save_file
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast, T5Config, T5ForTokenClassification

    from haystack_agentic.components.grounders.hhem_grounder import HHEM_PROMPT

    folder = Path(folder)
    foundation, checkpoint = folder / "foundation", folder / "hhem"
    foundation.mkdir(parents=True, exist_ok=True)
    checkpoint.mkdir(parents=True, exist_ok=True)

    words = sorted(set(re.findall(r"\w+|[^\w\s]", _BASE_TEXT.lower())))
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2}
    for word in words:
        vocab.setdefault(word, len(vocab))
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.normalizer = None
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    core.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
    tokenizer.save_pretrained(str(foundation))

    sizes = {"d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 2, "num_heads": 4, "relative_attention_num_buckets": 8}
    ids = {"pad_token_id": 0, "eos_token_id": 1, "decoder_start_token_id": 0}
    config = T5Config(vocab_size=len(vocab), num_labels=2, **sizes, **ids)
    config.save_pretrained(str(foundation))
    torch.manual_seed(0)
    network = T5ForTokenClassification(config)
    state = {f"t5.{key}": value.detach().clone().contiguous() for key, value in network.state_dict().items()}
    save_file(state, str(checkpoint / "model.safetensors"))
    hhem_config = {"architectures": ["HHEMv2ForSequenceClassification"], "model_type": "HHEMv2"}
    hhem_config.update(foundation=str(foundation), prompt=HHEM_PROMPT)
    (checkpoint / "config.json").write_text(json.dumps(hhem_config, indent=2), encoding="utf-8")
    return checkpoint, foundation
