"""docker/podman run lines: flags, values, byte spans (scripts, Markdown, reST, Dockerfiles)."""

from __future__ import annotations

from shmguard.sources.load import load_bytes
from shmguard.sources.runline import RunLine


def _lines(data: bytes, name: str) -> tuple[bytes, list[RunLine]]:
    lf = load_bytes(data, name)
    return data, list(lf.run_lines)


def _span(data: bytes, a: int | None, b: int | None) -> bytes:
    assert a is not None and b is not None
    return data[a:b]


def test_script_with_continuations_quotes_and_both_forms() -> None:
    data = (
        "#!/bin/sh\n# docker run --commented out\n"
        "sudo docker run --rm \\\n  --shm-size=64m \\\n  -m 2g --ipc host \\\n"
        '  -e "NCCL_DEBUG=INFO" -v/dev/shm:/dev/shm --gpus all \\\n'
        "  nvcr.io/nvidia/pytorch:24.01 torchrun --nproc 8 train.py  # trailing\n"
        "echo é && podman run -itd --tmpfs /dev/shm:size=1g img\n"
    ).encode()
    data, (d, p) = _lines(data, "run.sh")
    assert d.tool == "docker" and (d.line, d.column) == (3, 6)
    shm = d.last("--shm-size")
    assert shm is not None and shm.value == "64m"
    assert _span(data, shm.flag_start, shm.flag_end) == b"--shm-size=64m"
    assert _span(data, shm.value_start, shm.value_end) == b"64m"
    mem = d.last("--memory")
    assert (
        mem is not None
        and mem.spelled == "-m"
        and _span(data, mem.value_start, mem.value_end) == b"2g"
    )
    env = d.last("--env")
    assert env is not None and env.value == "NCCL_DEBUG=INFO"
    assert _span(data, env.value_start, env.value_end) == b'"NCCL_DEBUG=INFO"'
    vol = d.last("--volume")
    assert vol is not None and vol.value == "/dev/shm:/dev/shm"
    assert d.image is not None and d.image[0] == "nvcr.io/nvidia/pytorch:24.01"
    assert [w for w, _, _ in d.command] == ["torchrun", "--nproc", "8", "train.py"]
    assert p.tool == "podman" and p.line == 8
    assert [f.name for f in p.flags] == ["--interactive", "--tty", "--detach", "--tmpfs"]
    tmpfs = p.last("--tmpfs")
    assert (
        tmpfs is not None and _span(data, tmpfs.value_start, tmpfs.value_end) == b"/dev/shm:size=1g"
    )


def test_markdown_code_blocks_only_not_inline_code_in_prose() -> None:
    # issue 21: `docker run pytorch/pytorch` in a sentence names a command, nobody runs it
    data = (
        "# Run ü\n\nUse `docker run --shm-size 1g img` or `docker run pytorch/pytorch`:\n\n"
        "```bash\n$ docker run --ipc=host \\\n    vllm/vllm-openai --model x\n```\n\n"
        "```yaml\ncommand: docker run ignored\n```\n\n"
        "Indented:\n\n    docker run --gpus all pytorch/pytorch python train.py\n"
    ).encode()
    data, (fence, indented) = _lines(data, "README.md")
    assert fence.line == 6 and fence.image is not None and fence.image[0] == "vllm/vllm-openai"
    ipc = fence.last("--ipc")
    assert ipc is not None and _span(data, ipc.value_start, ipc.value_end) == b"host"
    assert indented.line == 16 and indented.last("--gpus") is not None
    prose = b"Run `docker run --gpus all pytorch/pytorch python train.py` to train.\n"
    lf = load_bytes(prose, "README.md")
    assert lf.kind == "text" and lf.run_lines == ()


def test_rst_and_dockerfile() -> None:
    # an inline literal in prose is not read (issue 21), the literal block is
    data, (block,) = _lines(
        b"Intro ``docker run -m 2g x``\n\n.. code-block:: bash\n\n   docker run --gpus all img\n",
        "doc.rst",
    )
    assert block.line == 5 and block.last("--gpus").value == "all"  # type: ignore[union-attr]
    data, (run,) = _lines(
        b"FROM x\nRUN apt-get update && \\\n    docker run --rm -m2g img echo\nCMD docker run no\n",
        "Dockerfile",
    )
    m = run.last("--memory")
    assert m is not None and m.value == "2g" and _span(data, m.value_start, m.value_end) == b"2g"


def test_comment_in_a_continuation_ends_the_command() -> None:
    _, (rl,) = _lines(b"docker run \\\n  -v a:/b \\\n  # note\n  --shm-size 1g img\n", "x.sh")
    assert rl.image is None and rl.last("--shm-size") is None


def test_a_real_readme_names_docker_run_in_prose_only() -> None:
    # fairseq's README (tests/fixtures/markdown/SOURCES.tsv): `nvidia-docker run` in a sentence
    # was read as a run line before issue 21; only code blocks are read now
    from pathlib import Path

    readme = Path(__file__).parents[1] / "fixtures" / "markdown" / "fairseq-README-install.md"
    lf = load_bytes(readme.read_bytes(), "README.md")
    assert lf.kind == "text" and lf.run_lines == ()
