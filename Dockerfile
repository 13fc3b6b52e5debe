# syntax=docker/dockerfile:1
#
# kubelet-gitops: one image with every binary,
#   /usr/local/bin/kubelet-gitops        the reconciler (and the CLI: validate, render, plan)
#   /usr/local/bin/kubelet-gitops-agent  the node agent
#   /usr/local/bin/kubelet-gitops-rescue the host-side rescue, copied out of the image onto
#                                        each node (deploy/host/README.md); nothing runs it here
# deploy/ runs the reconciler Deployment and the agent DaemonSet from this one image, each
# with its own `command`. Build and push (docs/deploy.md, "The image"):
#
#   docker build -t registry.example.com/kubelet-gitops:0.1.0 .
#
# Build: the Rust toolchain on Debian bookworm. Runtime: distroless `cc` on Debian 12,
# bookworm too, because the binaries link glibc and OpenSSL (libssl3, for git over https)
# dynamically and the two must match; it holds those, libgcc and CA certificates, and no
# shell or package manager. OpenSSL stays dynamic so that a rebuilt distroless base brings
# its security fixes.

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
# libgit2 is built from source (git2's vendored-libgit2). Its zlib is linked statically
# (libz-sys's bundled copy): distroless does not promise libz.so.1. Without this the
# reconciler links libz.so.1 dynamically (ldd target/release/kubelet-gitops).
ENV LIBZ_SYS_STATIC=1 \
    CARGO_PROFILE_RELEASE_STRIP=symbols \
    CARGO_PROFILE_AGENT_STRIP=symbols \
    CARGO_TERM_COLOR=never
COPY . .
# --locked: exactly the Cargo.lock versions. The caches keep downloaded crates and
# compiled dependencies between builds (BuildKit); the binaries are copied out of the
# cached target directory. The reconciler is built without its default `demo` feature:
# the image carries no simulated cluster (`kubelet-gitops demo` is a command of the
# source build, README.md). The agent and the rescue are built with the `agent` profile
# (Cargo.toml: small code, as one runs on every node).
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked \
        -p reconciler --no-default-features --bin kubelet-gitops \
 && cargo build --profile agent --locked \
        -p node-agent --bin kubelet-gitops-agent --bin kubelet-gitops-rescue \
 && install -D -m 0755 target/release/kubelet-gitops /out/kubelet-gitops \
 && install -D -m 0755 target/agent/kubelet-gitops-agent /out/kubelet-gitops-agent \
 && install -D -m 0755 target/agent/kubelet-gitops-rescue /out/kubelet-gitops-rescue

FROM gcr.io/distroless/cc-debian12:nonroot
LABEL org.opencontainers.image.title="kubelet-gitops" \
      org.opencontainers.image.description="Kubelet configuration from git: reconciler and node agent" \
      org.opencontainers.image.source="https://github.com/kubelet-gitops/kubelet-gitops" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/kubelet-gitops /usr/local/bin/kubelet-gitops
COPY --from=build /out/kubelet-gitops-agent /usr/local/bin/kubelet-gitops-agent
COPY --from=build /out/kubelet-gitops-rescue /usr/local/bin/kubelet-gitops-rescue
# distroless's `nonroot` (65532). The reconciler runs as this user; the agent's DaemonSet
# overrides it with user 0 and drops every capability (deploy/base/agent.yaml says why).
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/kubelet-gitops"]
CMD ["--help"]
