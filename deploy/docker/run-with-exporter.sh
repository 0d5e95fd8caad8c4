#!/bin/sh
# A training container and `shmguard exporter` beside it, sharing its IPC and PID namespaces
# (deploy/docker/README.md, docs/deploy.md).
#
#   JOB_IMAGE=registry.example.com/pytorch-train:1.0 \
#   SHMGUARD_IMAGE=ghcr.io/your-org/shmguard:0.1.0 \
#   sh deploy/docker/run-with-exporter.sh python train.py
#
# The job runs with --ipc=shareable: Docker's default IPC mode is private (20.10; older daemons
# defaulted to shareable), and a private IPC namespace cannot be joined (`docker run --ipc
# container:NAME` then fails with "non-shareable IPC (hint: use IpcMode:shareable for the donor
# container)"). The exporter joins it with
# --ipc container:NAME, so its /dev/shm is the job's (the same tmpfs: size, used, free), and
# --pid container:NAME, so it sees the job's processes (owners of /dev/shm, a stalled loader).
# Metrics on http://127.0.0.1:9808/metrics (the exporter's port published on loopback only).
set -eu
NAME="${NAME:-train}"
JOB_IMAGE="${JOB_IMAGE:?set JOB_IMAGE to the training image}"
SHMGUARD_IMAGE="${SHMGUARD_IMAGE:?set SHMGUARD_IMAGE to an image with shmguard installed}"
SHM_SIZE="${SHM_SIZE:-2g}"

docker run -d --name "$NAME" --ipc=shareable --shm-size="$SHM_SIZE" "$JOB_IMAGE" "$@"
docker run -d --name "$NAME-shmguard" \
  --ipc "container:$NAME" --pid "container:$NAME" \
  -e POD_NAME="$NAME" -e CONTAINER_NAME="$NAME" \
  -p 127.0.0.1:9808:9808 \
  "$SHMGUARD_IMAGE" shmguard exporter --listen 0.0.0.0:9808
