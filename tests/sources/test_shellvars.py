"""Shell variables assigned in the same file, resolved before the run line is read; words after
the image are the container's; here-documents and comments are not run lines."""

from __future__ import annotations

from shmguard.sources.load import load_bytes
from shmguard.sources.runline import RunLine
from shmguard.sources.shell import split_commands
from shmguard.sources.shellvars import ShellVars


def _runs(text: str, name: str = "run.sh") -> list[RunLine]:
    return list(load_bytes(text.encode(), name).run_lines)


def _expand(text: str) -> list[list[tuple[str, bool]]]:
    env = ShellVars()
    out = []
    for words in split_commands(text):
        if not env.assign(text, words):
            out.append([(w.value, w.bare) for w in env.expand(words)])
    return out


def test_the_issue_shape_resolves_image_and_options() -> None:
    text = (
        "IMAGE=nvcr.io/nvidia/pytorch:24.01-py3\n"
        'DOCKER_OPTS="--gpus all -v /data:/data"\n'
        'docker run --rm ${DOCKER_OPTS} "${IMAGE}" python train.py --workers 8\n'
    )
    (rl,) = _runs(text)
    assert rl.image is not None and rl.image[0] == "nvcr.io/nvidia/pytorch:24.01-py3"
    assert [f.name for f in rl.flags] == ["--rm", "--gpus", "--volume"]
    gpus = rl.last("--gpus")
    assert gpus is not None and gpus.value == "all"
    # a flag from a variable keeps the span of the word written on the run line
    data = text.encode()
    assert data[gpus.flag_start : gpus.flag_end] == b"${DOCKER_OPTS}"
    assert [w for w, _, _ in rl.command] == ["python", "train.py", "--workers", "8"]
    assert rl.opaque == ()


def test_forms_of_assignment_and_expansion() -> None:
    text = (
        "export TAG=${TAG:-24.01}\n"
        "readonly R='a b'\n"
        "declare -a A=(\n  --rm   # it's removed\n  --gpus all  # (all of them)\n"
        '  -v "/x y:/y"\n)\n'
        "A+=(--ipc=host)\n"
        "IMG=${1:-nvcr.io/nvidia/pytorch:$TAG}\n"
        'ARGS=("$@")\n'
        'echo "${A[@]}" $R "$R" ${R} ${UNSET:-dflt} ${A[1]} $IMG "${ARGS[@]}" \'$R\' ${R%% *}\n'
    )
    (words,) = _expand(text)
    assert words == [
        ("echo", False),
        ("--rm", False),
        ("--gpus", False),
        ("all", False),
        ("-v", False),
        ("/x y:/y", False),
        ("--ipc=host", False),
        ("a", False),
        ("b", False),
        ("a b", False),
        ("a", False),
        ("b", False),
        ("dflt", False),
        ("--gpus", False),
        ("nvcr.io/nvidia/pytorch:24.01", False),
        ("${ARGS[@]}", True),  # assigned from "$@": still unknown, any number of words
        ("$R", False),
        ("${R%% *}", True),
    ]


def test_a_commands_own_environment_is_no_assignment() -> None:
    assert _expand("X=1 docker run $X\n") == [
        [("X=1", False), ("docker", False), ("run", False), ("$X", True)]
    ]


def test_unresolved_expansion_among_the_flags_is_options() -> None:
    (rl,) = _runs("docker run --gpus all $EXTRA_MOUNTS nvcr.io/nvidia/pytorch:24.01-py3 x\n")
    assert rl.opaque == ("$EXTRA_MOUNTS",)
    assert rl.image is not None and rl.image[0] == "nvcr.io/nvidia/pytorch:24.01-py3"
    (rl,) = _runs('docker run -it ${gpus:+--gpus $gpus} "${ARGS[@]}" $IMAGE_NAME bash\n')
    assert rl.opaque == ("${gpus:+--gpus $gpus}", "${ARGS[@]}")
    assert rl.image is not None and rl.image[0] == "$IMAGE_NAME"
    (rl,) = _runs("docker run --rm $uid_mapping ${docker_image} bash\n")
    assert rl.opaque == ("$uid_mapping",) and rl.image is not None
    assert rl.image[0] == "${docker_image}"
    (rl,) = _runs("docker run -it $WHATEVER bash\n")  # nothing says options: the image
    assert rl.opaque == () and rl.image is not None and rl.image[0] == "$WHATEVER"


def test_words_after_the_image_are_the_containers() -> None:
    for tool in ("docker", "podman"):
        (rl,) = _runs(f"{tool} run --gpus all img --shm-size=1g --ipc=host python t.py\n")
        assert rl.get("--shm-size") == [] and rl.get("--ipc") == []
        assert [w for w, _, _ in rl.command][:2] == ["--shm-size=1g", "--ipc=host"]


def test_heredoc_bodies_and_comments_are_not_run_lines() -> None:
    text = (
        "cat <<EOF\ndocker run pytorch/pytorch\nEOF\n"
        "cat <<-'END' > f.sh\n\tdocker run pytorch/pytorch\n\tEND\n"
        "# docker run pytorch/pytorch\n"
        'cat <<< "docker run pytorch/pytorch"\n'
        "docker run -v <path to data>:/data --shm-size=1g pytorch/pytorch  # real\n"
    )
    (rl,) = _runs(text)
    assert rl.line == 9 and rl.get("--volume")[0].value == "<path to data>:/data"
    assert rl.image is not None and rl.image[0] == "pytorch/pytorch"


def test_markdown_blocks_share_a_documents_assignments() -> None:
    text = (
        "Set the image:\n\n```bash\nexport IMAGE=vllm/vllm-openai:latest\n```\n\n"
        "Then run it:\n\n```bash\ndocker run --gpus all $IMAGE --model x\n```\n"
    )
    (rl,) = _runs(text, "README.md")
    assert rl.image is not None and rl.image[0] == "vllm/vllm-openai:latest"
