# Levee node image. Nothing is pulled: the image is FROM scratch around the
# static binary that `make build` (CGO_ENABLED=0) leaves in bin/levee, so run
# `make build` before `docker compose up --build`. Context: the repo root,
# trimmed by .dockerignore to bin/ and deploy/.
FROM scratch

# No CA bundle is copied: the binary embeds Mozilla's roots
# (x509roots/fallback) and uses them because scratch has no /etc/ssl, so
# https upstreams verify as they would on a host. A private API's CA comes
# in through a route's tls.ca_file, mounted read-only (see README).

# The default config; docker-compose.yml mounts deploy/levee.yaml over it
# read-only, so editing it needs a restart, not a rebuild.
COPY deploy/levee.yaml /etc/levee/levee.yaml
# Scratch has no mkdir and no users: copying an (almost) empty folder
# creates the data dir owned by the unprivileged uid, and a named volume
# mounted there starts with that ownership.
COPY --chown=65532:65532 deploy/empty-data/ /data/
COPY bin/levee /levee

USER 65532:65532
# 8080 HTTP (app servers + admin), 7946 gossip (tcp+udp), 8300 raft.
EXPOSE 8080 7946 7946/udp 8300
VOLUME ["/data"]
# Exec form: scratch has no shell.
HEALTHCHECK --interval=5s --timeout=3s --start-period=30s --retries=6 \
  CMD ["/levee", "health", "-url", "http://127.0.0.1:8080/-/readyz"]
ENTRYPOINT ["/levee"]
CMD ["-config", "/etc/levee/levee.yaml"]
