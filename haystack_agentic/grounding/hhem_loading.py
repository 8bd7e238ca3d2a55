# SPDX-License-Identifier: Apache-2.0
"""Loading Vectara's HHEM-2.1-Open for `HHEMGrounder`, natively (`T5ForTokenClassification`) or by remote code."""

import json
from pathlib import Path
from typing import Any

#: The Hub id of HHEM-2.1-Open.
HHEM_MODEL = "vectara/hallucination_evaluation_model"
#: Its foundation model (config and tokenizer), as named in the checkpoint's `config.json`.
HHEM_FOUNDATION = "google/flan-t5-base"
#: The premise/hypothesis prompt of the model card (used when the checkpoint's config does not give one).
HHEM_PROMPT = "<pad> Determine if the hypothesis is true given the premise?\n\nPremise: {text1}\n\nHypothesis: {text2}"

#: How to get the model, for messages.
HOW_TO_GET = (
    f"download it with `huggingface-cli download {HHEM_MODEL}` and `huggingface-cli download {HHEM_FOUNDATION}` "
    "on a machine with Hub access (or copy both folders here and set the grounder's `model` and `foundation` to "
    "them), or use LLMJudgeGrounder with a chat generator"
)


class HHEMUnavailableError(RuntimeError):
    """The HHEM model could not be loaded (not downloaded, no Hub access, or not an HHEM checkpoint)."""


def pick_device(device: str | None) -> str:
    """The torch device: `device` itself, or for `None` / `"auto"` CUDA, then Apple MPS, then CPU."""
    if device and device != "auto":
        return device
    import torch  # noqa: PLC0415

    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def _checkpoint(model: str, revision: str | None, foundation: str | None, local: bool) -> tuple[Path, dict, str]:
    """The checkpoint's folder (a local one, the Hub cache or a download), its `config.json` and its foundation."""
    folder = Path(model).expanduser()
    if not folder.is_dir():
        from huggingface_hub import snapshot_download  # noqa: PLC0415

        patterns = ["*.json", "*.safetensors", "*.bin"]
        found = snapshot_download(repo_id=model, revision=revision, allow_patterns=patterns, local_files_only=local)
        folder = Path(found)
    config_path = folder / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.exists() else {}
    return folder, config, foundation or config.get("foundation") or HHEM_FOUNDATION


def hhem_missing(
    model: str | None, revision: str | None = None, foundation: str | None = None, local_files_only: bool = False
) -> str | None:
    """Why an HHEM checkpoint (`None`: `HHEM_MODEL`) cannot load, checked without loading it; `None` if it can."""
    model = model or HHEM_MODEL
    try:
        _, _, foundation = _checkpoint(model, revision, foundation, local_files_only)
        if Path(foundation).expanduser().is_dir():
            found = (Path(foundation).expanduser() / "config.json").exists()
        elif local_files_only:
            from huggingface_hub import try_to_load_from_cache  # noqa: PLC0415

            found = isinstance(try_to_load_from_cache(foundation, "config.json"), str)
        else:
            found = True  # downloaded on warm-up
        if not found:
            msg = f"the foundation {foundation} has no config.json here"
            raise HHEMUnavailableError(msg)
    except Exception as exc:
        return f"HHEM model {model!r} is not available ({type(exc).__name__}: {exc})"
    return None


def _read_weights(folder: Path) -> dict[str, Any]:
    safetensors_files = sorted(folder.glob("*.safetensors"))
    if safetensors_files:
        from safetensors.torch import load_file  # noqa: PLC0415

        return {key: value for file in safetensors_files for key, value in load_file(str(file)).items()}
    bins = sorted(folder.glob("pytorch_model*.bin"))
    if not bins:
        msg = f"{folder} has no *.safetensors or pytorch_model*.bin weights"
        raise HHEMUnavailableError(msg)
    import torch  # noqa: PLC0415

    return {k: v for file in bins for k, v in torch.load(str(file), map_location="cpu", weights_only=True).items()}


def load_hhem_native(
    model: str, revision: str | None, foundation: str | None, local_files_only: bool, device: str
) -> tuple[Any, Any, str]:
    """
    Load an HHEM-2.1-Open checkpoint into transformers' `T5ForTokenClassification`.

    Load an HHEM-2.1-Open checkpoint (Hub id or folder) into transformers' own `T5ForTokenClassification` (no remote
    code), with its foundation's config and tokenizer (`None`: the one its `config.json` names).

    :returns: `(model, tokenizer, prompt)`.
    :raises HHEMUnavailableError: If the files are missing or the weights do not fit.
    """
    from transformers import AutoConfig, AutoTokenizer, T5ForTokenClassification  # noqa: PLC0415

    folder, hhem_config, foundation = _checkpoint(model, revision, foundation, local_files_only)
    t5_config = AutoConfig.from_pretrained(foundation, local_files_only=local_files_only)
    t5_config.num_labels = 2
    network = T5ForTokenClassification(t5_config)
    weights = {key.removeprefix("t5."): value for key, value in _read_weights(folder).items()}
    missing, unexpected = network.load_state_dict(weights, strict=False)
    missing = [key for key in missing if "embed_tokens" not in key]  # tied to `shared`
    if missing or unexpected:
        msg = (
            f"{model} does not look like an HHEM-2.1-Open checkpoint for {foundation}: "
            f"missing {missing[:5]}, unexpected {list(unexpected)[:5]}. Try trust_remote_code=True."
        )
        raise HHEMUnavailableError(msg)
    tokenizer = AutoTokenizer.from_pretrained(foundation, local_files_only=local_files_only)
    network.to(device).eval()
    return network, tokenizer, hhem_config.get("prompt") or HHEM_PROMPT


def load_hhem_remote_code(
    model: str, revision: str | None, local_files_only: bool, device: str
) -> tuple[Any, Any, str]:
    """
    Load HHEM through the checkpoint repository's own modeling code (`trust_remote_code=True`; pin `revision`).

    :returns: `(model, tokenizer, prompt)` where `model` is the wrapped `T5ForTokenClassification`.
    :raises HHEMUnavailableError: If the loaded class does not expose HHEM's `t5` and tokenizer.
    """
    from transformers import AutoModelForSequenceClassification  # noqa: PLC0415

    wrapper = AutoModelForSequenceClassification.from_pretrained(
        model, revision=revision, trust_remote_code=True, local_files_only=local_files_only
    )
    network = getattr(wrapper, "t5", None)
    tokenizer = getattr(wrapper, "tokenzier", None) or getattr(wrapper, "tokenizer", None)  # upstream's spelling
    if network is None or tokenizer is None:
        msg = f"{model}'s remote code has no `t5` model and tokenizer: not an HHEM-2.x model."
        raise HHEMUnavailableError(msg)
    network.to(device).eval()
    return network, tokenizer, getattr(wrapper, "prompt", None) or HHEM_PROMPT
