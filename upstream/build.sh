#!/usr/bin/env bash
# Builds the upstream Kubernetes binaries the real-cluster tests run, from Kubernetes'
# published Go modules (go.mod here pins them; no upstream source is copied into this
# repository), into upstream/bin/ (ignored by git):
#
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet
#   fake-cri        (ours: upstream's fake CRI runtime on a unix socket, cmd/fake-cri)
#   kubelet-oracle  (ours: the kubelet's own start-up steps on a configuration, without
#                    starting anything, cmd/kubelet-oracle; core is compared with it)
#
# Go's module and build caches make a second run take seconds. The version ldflags are
# those of Kubernetes' own build (hack/lib/version.sh), so `kube-apiserver --version`
# prints the version pinned in go.mod.
#
# Usage: upstream/build.sh [BINARY...]   (default: all of them)
# Environment: UPSTREAM_BIN (default upstream/bin), GOFLAGS, GOMAXPROCS as for go build.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"
bin=${UPSTREAM_BIN:-$here/bin}

command -v go > /dev/null || { echo "upstream/build.sh: go is not installed (Go 1.26 or newer is needed)" >&2; exit 2; }

# The Kubernetes and etcd versions, read from go.mod so that there is one place to change.
kube_version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
etcd_version=$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
major=${kube_version#v}; major=${major%%.*}
minor=${kube_version#v*.}; minor=${minor%%.*}

version_flags() {
  local pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    printf -- '-X %s.gitVersion=%s -X %s.gitMajor=%s -X %s.gitMinor=%s -X %s.gitTreeState=clean -X %s.buildDate=1970-01-01T00:00:00Z ' \
      "$pkg" "$kube_version" "$pkg" "$major" "$pkg" "$minor" "$pkg" "$pkg"
  done
}

declare -A packages=(
  [etcd]=go.etcd.io/etcd/server/v3
  [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
  [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
  [kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
  [kubelet]=k8s.io/kubernetes/cmd/kubelet
  [fake-cri]=./cmd/fake-cri
  [kubelet-oracle]=./cmd/kubelet-oracle
)
order=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet fake-cri kubelet-oracle)
wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=("${order[@]}")

mkdir -p "$bin"
echo "upstream: Kubernetes $kube_version, etcd $etcd_version, into $bin"
for name in "${wanted[@]}"; do
  pkg=${packages[$name]:-}
  [ -n "$pkg" ] || { echo "upstream/build.sh: unknown binary \"$name\" (one of: ${order[*]})" >&2; exit 2; }
  start=$SECONDS
  ldflags="-s -w"
  case $name in
    etcd) ldflags+=" -X go.etcd.io/etcd/api/v3/version.GitSHA=module-$etcd_version" ;;
    fake-cri) ;;
    *) ldflags+=" $(version_flags)" ;;
  esac
  # CGO off as in Kubernetes' own release builds of these binaries (static, no libc).
  CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$bin/$name" "$pkg"
  echo "  $name: $((SECONDS - start)) s"
done

# The Prometheus Operator's CRDs, for the offline validation of deploy/components/monitoring
# (not a binary: only when every binary is built, as CI does).
if [ ${#@} -eq 0 ]; then
  monitoring-crds/generate.sh "$bin/monitoring-crds"
fi
