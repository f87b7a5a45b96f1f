# syntax=docker/dockerfile:1
# nicguard: multi-stage build; the final image has no compilers, no pip and runs as non-root.
# Python 3.13: asyncio before 3.12.7 / 3.13.1 keeps TLS connections the peer reset mid-write
# (python/cpython#118950, BENCHMARKS.md "Closed TLS connections"); 3.11 gets no such fixes.
# The unit, HTTP and property tiers pass on 3.13 as on 3.11.

FROM python:3.13-slim-bookworm AS build
WORKDIR /src
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/nicguard
# Pinned dependencies first (their layer outlives changes to app/): every version fixed and every
# file checked against its hash in requirements.lock (`make lock`), the build backend included.
COPY requirements.lock ./
RUN /opt/nicguard/bin/pip install --require-hashes --no-deps --no-compile -r requirements.lock
COPY pyproject.toml README.md LICENSE ./
COPY app ./app
# nicguard itself: no dependency resolved here, no build backend fetched (no build isolation).
# Then bytecode for every module, compiled here for the image's interpreter: the root filesystem is
# read-only, so what is not compiled now is compiled in memory at every start. Hash-based and not
# checked against the sources, which nothing in the image can change.
RUN /opt/nicguard/bin/pip install --no-deps --no-compile --no-build-isolation . \
    && /opt/nicguard/bin/pip uninstall --yes pip setuptools \
    && find /opt/nicguard -name '__pycache__' -prune -exec rm -rf {} + \
    && /opt/nicguard/bin/python -m compileall -q -j 0 --invalidation-mode unchecked-hash /opt/nicguard/lib

FROM python:3.13-slim-bookworm
LABEL org.opencontainers.image.title="nicguard" \
      org.opencontainers.image.description="Validating admission webhook for GKE multi-NIC wiring of Kubeflow Trainer workloads" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/nicguard/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    NICGUARD_CERT_DIR=/var/run/nicguard/certs
COPY --from=build /opt/nicguard /opt/nicguard
# The base image ships its standard library without bytecode: compiled the same way.
RUN python -m compileall -q -j 0 --invalidation-mode unchecked-hash /usr/local/lib/python3.13
COPY LICENSE /usr/share/doc/nicguard/LICENSE
USER 65532:65532
EXPOSE 8443 8080
ENTRYPOINT ["nicguard"]
CMD ["serve"]
