# One image for every example service and for the `gear` CLI.
#
# BASE_IMAGE: any image with Python >= 3.11 and pip. Where no registry is reachable,
# `python3 scripts/debian_images.py` builds one from Debian packages (gear-debian:bookworm-<hash>):
#   docker build --network host --build-arg BASE_IMAGE=gear-debian:bookworm-<hash> -t gear .
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# The package is gear: the SDK, the reference broker, gear.cli (the `gear` command) and gear.examples.
COPY pyproject.toml README.md ./
COPY gear ./gear
RUN pip install ".[metrics]" && rm -rf /app/build

# Never run services as root.
RUN useradd --create-home --uid 10001 gear
USER gear

# Each compose service sets its own command; by default the image is the CLI.
CMD ["gear", "--help"]
