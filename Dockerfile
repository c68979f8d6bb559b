FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 \
    AGENTS_IDE_DATA_DIR=/data STATIC_ROOT=/app/staticfiles \
    MCP_STDIO_PATHS=/opt/mcp HOST=0.0.0.0 \
    TRUSTED_PROXIES=""
# TRUSTED_PROXIES: set it (docker run -e, compose) to the reverse proxy's address or network, so that the login
# lockout and the throttles see each client's own address, not the proxy's (docs/security.md).

# bubblewrap: the local tool sandbox (user namespaces; no setuid, works as the unprivileged `app` user).
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap && rm -rf /var/lib/apt/lists/*
# /opt/mcp: where an operator installs stdio MCP servers (a derived image's `npm install --prefix /opt/mcp …`).
RUN useradd --create-home --uid 1000 app && mkdir -p /data /app /opt/mcp && chown app:app /data /app
WORKDIR /app
# The runtime lock (scripts/lock writes it): the versions the test suite passed with, in a layer of their own.
COPY requirements.txt ./
RUN pip install --no-cache-dir -r requirements.txt
COPY pyproject.toml README.md ./
COPY agents_ide ./agents_ide
COPY core ./core
COPY memory ./memory
COPY tools ./tools
RUN pip install --no-cache-dir --no-deps .
COPY manage.py ./
COPY templates ./templates
COPY static ./static
RUN python manage.py collectstatic --noinput && chown -R app:app /app

USER app
EXPOSE 8000
# Migrations run on start (idempotent); daphne serves HTTP and websockets.
CMD ["sh", "-c", "python manage.py migrate --noinput && exec python -m agents_ide.serve -b \"$HOST\" -p 8000 agents_ide.asgi:application"]
