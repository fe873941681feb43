package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"runtime/debug"
)

// version is this build's version: `make build` sets it with
// -ldflags "-X main.version=$(VERSION)" (git describe); a plain go build
// leaves "dev".
var version = "dev"

const versionUsage = `usage: levee version [-addr HOST:PORT] [-json]

Prints this binary's version (set by make build; "dev" otherwise), the
Go toolchain's stamp of the module when there is one, the Go version and
the platform. With -addr or
LEVEE_ADDR it also asks that node, and prints the node's version when the
node reports one (a "version" in /-/healthz, or levee_build_info's
version label in /metrics).
` + adminFlagsText + `
Exit codes: 0 printed, 2 usage, 3 the node named by -addr could not be
reached (the local version is printed first).
`

// buildInfo is what levee version prints.
type buildInfo struct {
	Version  string       `json:"version"`
	Go       string       `json:"go"`
	Platform string       `json:"platform"`
	Module   string       `json:"module,omitempty"`
	Node     *nodeVersion `json:"node,omitempty"`
}

// nodeVersion is the asked node's answer; Version "" when it reports none.
type nodeVersion struct {
	Name    string `json:"name"`
	Addr    string `json:"addr"`
	Version string `json:"version,omitempty"`
}

func versionCmd(args []string, e cliEnv) int {
	c := newAdminCmd("version", versionUsage, e)
	cl, _, code, ok := c.parse(args, false, nil)
	if !ok {
		return code
	}
	info := localBuild()
	var err error
	if isSet(c.fs, "addr") || e.getenv("LEVEE_ADDR") != "" {
		info.Node, err = askVersion(cl)
	}
	if *c.json {
		b, _ := json.Marshal(info) // plain strings: cannot fail
		c.printJSON(b)
	} else {
		printVersion(e, info)
	}
	if err != nil {
		return c.fail(err)
	}
	return exitOK
}

// localBuild is this binary's build. Module is the Go toolchain's stamp
// (a VCS pseudo-version, "+dirty" for uncommitted changes), what a node
// reports in levee_build_info, so the two compare.
func localBuild() buildInfo {
	info := buildInfo{Version: version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		info.Module = bi.Main.Version
	}
	return info
}

// askVersion reads the node's name from /-/healthz, and its version from
// there or from levee_build_info; a node that reports none is not an
// error.
func askVersion(cl *adminClient) (*nodeVersion, error) {
	var h struct{ Node, Version string }
	if _, err := cl.getJSON(http.MethodGet, "/-/healthz", nil, &h); err != nil {
		return nil, err
	}
	nv := &nodeVersion{Name: h.Node, Addr: cl.addr, Version: h.Version}
	if nv.Version == "" {
		if text, err := cl.call(http.MethodGet, "/metrics", nil); err == nil {
			nv.Version = versionFromMetrics(text)
		}
	}
	return nv, nil
}

func printVersion(e cliEnv, info buildInfo) {
	fmt.Fprintf(e.stdout, "levee %s (", info.Version)
	if info.Module != "" {
		fmt.Fprintf(e.stdout, "module %s, ", info.Module)
	}
	fmt.Fprintf(e.stdout, "%s %s)\n", info.Go, info.Platform)
	if n := info.Node; n != nil && n.Version != "" {
		fmt.Fprintf(e.stdout, "node %s at %s: levee %s\n", n.Name, n.Addr, n.Version)
	}
}
