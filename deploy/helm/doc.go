// Package helm holds the Helm chart that runs Levee on Kubernetes
// (levee/, documented in docs/kubernetes.md) and its offline test: the
// chart rendered with Helm's own Go library for 3, 5 and 1 replicas and
// the values files under levee/ci, every object decoded strictly into
// the k8s.io/api types, the invariants a Raft cluster needs checked on
// them, and the rendered config loaded the way `levee check` loads it
// (config.LoadOverridden with the pod's environment).
//
// The package has no code of its own: it exists so that Helm and the
// Kubernetes API types compile only into this test binary.
package helm
