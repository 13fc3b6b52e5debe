//go:build tools

// The upstream commands built by build.sh, imported here only so that `go mod tidy`
// keeps their dependencies in go.sum; the build tag keeps this file out of every build.
package upstream

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
