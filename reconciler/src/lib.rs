//! kubelet-gitops: the command-line tool and reconciler.
