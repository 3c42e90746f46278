# The sandbox image: where participant code runs (see worker/sandbox.py for the limits).
#
# BASE_IMAGE is the offline base by default (docker/build_offline_base.sh: Debian bookworm
# minbase + python3, no registry needed). On GPU hosts pass a CUDA image that already has torch,
# e.g. --build-arg BASE_IMAGE=pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime, with an empty
# wheels/ folder. Wheels placed in the build context's wheels/ folder are installed offline
# (pip --no-index); scripts/build_sandbox_image.sh downloads them on the host.
#
# The image holds no platform code: worker/sandbox.py mounts submission_api read-only at
# /opt/arena/submission_api and sets PYTHONPATH=/opt/arena at run time.
ARG BASE_IMAGE=metadl-arena/base:bookworm

# Stage 1: install the wheels into one folder, so the final image never carries the .whl files.
FROM ${BASE_IMAGE} AS wheels
# Lets scripts/build_sandbox_image.sh prune this stage once the image is built.
LABEL org.metadl-arena.stage=wheels
COPY wheels/ /tmp/wheels/
RUN set -eu; mkdir -p /opt/site; \
    if ls /tmp/wheels/*.whl >/dev/null 2>&1; then \
        pip_whl="$(ls /tmp/wheels/pip-*.whl 2>/dev/null | head -n1 || true)"; \
        if [ -n "$pip_whl" ]; then pip="python3 $pip_whl/pip"; else pip="python3 -m pip"; fi; \
        reqs="$(ls /tmp/wheels/*.whl | grep -v '/pip-' )"; \
        $pip install --no-index --no-cache-dir --no-compile --disable-pip-version-check \
            --root-user-action=ignore --target /opt/site $reqs; \
        rm -rf /opt/site/bin; \
    fi

# Stage 2: the runtime image.
FROM ${BASE_IMAGE}
ARG SITE_DIR=/usr/local/lib/python3.11/dist-packages
COPY --from=wheels /opt/site/ ${SITE_DIR}/
# `python` as well as `python3`; the unprivileged participant (uid/gid 1000, reused when the base
# already has a uid 1000 user, as Ubuntu-based CUDA images do); the mount points the driver uses.
RUN set -eu; \
    py="$(command -v python3 || command -v python)"; \
    command -v python >/dev/null 2>&1 || ln -s "$py" /usr/local/bin/python; \
    if ! grep -q '^[^:]*:[^:]*:1000:' /etc/group; then \
        echo 'participant:x:1000:' >> /etc/group; fi; \
    if ! grep -q '^[^:]*:[^:]*:1000:' /etc/passwd; then \
        echo 'participant:x:1000:1000:participant:/tmp:/usr/sbin/nologin' >> /etc/passwd; fi; \
    mkdir -p /submission /bundle /output /opt/arena; \
    "$py" -c "import numpy, PIL, torch; print('torch', torch.__version__)"
# The root filesystem is read-only at run time: every cache points into the /tmp tmpfs, and
# Python writes no bytecode next to the read-only submission.
ENV HOME=/tmp \
    XDG_CACHE_HOME=/tmp/.cache \
    TORCH_HOME=/tmp/.cache/torch \
    MPLCONFIGDIR=/tmp/.cache/matplotlib \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    LANG=C.UTF-8
USER 1000:1000
WORKDIR /submission
CMD ["python3", "-c", "print('metadl-arena sandbox')"]
