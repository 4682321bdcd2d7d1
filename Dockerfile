# syntax=docker/dockerfile:1
#
# rl-bot image: `docker build -t rl-bot .`
#   docker run --env-file .env -p 3000:3000 -v rlbot-data:/data rl-bot            # serve (HTTP)
#   docker run --env-file .env -v rlbot-data:/data rl-bot rl-bot migrate          # migrations
#   docker run --env-file .env -v rlbot-data:/data rl-bot rl-bot socket           # Socket Mode
# Data lives in the /data volume, which is also the working directory, so the SQLite
# default of .env.example (sqlite:///./rl-bot.db) lands there; set DATABASE_URL for PostgreSQL.

ARG PYTHON_IMAGE=python:3.11-slim

# ---------------------------------------------------------------- builder
FROM ${PYTHON_IMAGE} AS builder

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1

RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

WORKDIR /src

# Dependencies first, from pyproject.toml and the pinned constraints alone, so
# code edits reuse this layer and the image gets the versions CI tested.
COPY pyproject.toml constraints.txt ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
 && pip install --no-cache-dir -c constraints.txt -r /tmp/requirements.txt

# Then the package itself. (pyproject.toml is listed again so the COPY never has
# zero sources when there is no README.)
COPY pyproject.toml README* ./
COPY bot ./bot
COPY migrations ./migrations
RUN pip install --no-cache-dir --no-deps . \
 && rl-bot --help >/dev/null \
 && pip uninstall -y -q pip setuptools
# (pip and setuptools are not needed at run time: ~20 MB less in the runtime image.)

# ---------------------------------------------------------------- runtime
FROM ${PYTHON_IMAGE} AS runtime

LABEL org.opencontainers.image.title="rl-bot" \
      org.opencontainers.image.description="Slack chat-ops for RL training sessions on Together's API"

RUN groupadd --system --gid 10001 rlbot \
 && useradd --system --uid 10001 --gid rlbot --home-dir /data --no-create-home --shell /usr/sbin/nologin rlbot

COPY --from=builder /opt/venv /opt/venv

# The migration scripts ship inside the package (bot.migrations); the only writable place is /data.
RUN mkdir -p /data && chown rlbot:rlbot /data
WORKDIR /data

# matplotlib's font list, built here once: the home directory is not writable, so
# without it every process would rebuild the list (seconds) on its first chart.
ENV MPLCONFIGDIR=/opt/matplotlib
RUN /opt/venv/bin/python -c "import matplotlib.font_manager" \
 && chown -R rlbot:rlbot /opt/matplotlib

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATABASE_URL=sqlite:////data/rl-bot.db

VOLUME ["/data"]
USER rlbot:rlbot
EXPOSE 3000

# No curl in slim: use the interpreter. Exec form, so PORT is read from the environment.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('PORT', '3000'), timeout=4)"]

CMD ["rl-bot", "serve"]
