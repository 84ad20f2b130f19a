"""A real Kubernetes control plane on this machine, for ``berth up --real`` and the tests.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK run as local processes
from binaries built out of Go modules (``hack/build-k8s``) or named by the user
(:mod:`berth.realcluster.binaries`). KWOK plays the kubelets of simulated nodes, as Berth's
emulator does. Nothing here uses a Kubernetes client library: objects are created with the
real ``kubectl``, the client a user would use. See docs/real-cluster.md.
"""
