# The server / worker image of a real deployment (compose.yaml): the project with its platform
# extra. Participant code never runs here: workers start sandboxes (docker/sandbox.Dockerfile)
# through the host's Docker engine.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
FROM ${PYTHON_IMAGE}
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY submission_api ./submission_api
COPY starting_kit ./starting_kit
COPY server ./server
COPY worker ./worker
# A CPU torch keeps the image small: the server and worker only prepare data and score; models
# run in the sandbox image, which brings its own (CUDA) torch.
RUN pip install --index-url https://download.pytorch.org/whl/cpu 'torch>=2.1' \
 && pip install '.[platform]' \
 && useradd --uid 10001 --create-home arena
USER arena
EXPOSE 8000
CMD ["arena", "serve", "--host", "0.0.0.0", "--port", "8000"]
