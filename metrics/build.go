package metrics

import (
	"runtime"
	"runtime/debug"
)

// stamp is the release `make build` stamps in (-ldflags -X
// github.com/levee/levee/metrics.stamp=$(VERSION), git describe), the
// same as `levee version` prints; "" in a plain go build.
var stamp string

// Version is the version of the running binary: make build's stamp, else
// as the Go toolchain stamped it (the module version of a `go install`ed
// release, or for a build from a checkout the VCS pseudo-version, with
// "+dirty" for uncommitted changes); "(devel)" when there is none, as in
// tests.
func Version() string {
	if stamp != "" {
		return stamp
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// registerBuildInfo adds levee_build_info, the constant 1 whose labels
// say which build runs: `count by (version) (levee_build_info)` shows a
// rolling upgrade's progress.
func registerBuildInfo(f factory) {
	f.gauge("levee_build_info", "Always 1; the labels name the running build: version (the Go toolchain's stamp of the module, \"(devel)\" when unstamped) and go_version.",
		"version", "go_version").WithLabelValues(Version(), runtime.Version()).Set(1)
}
