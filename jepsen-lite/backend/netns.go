package backend

import (
	"fmt"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// netnsDir is where `ip netns add` keeps its namespaces (ip-netns(8)).
const netnsDir = "/run/netns"

// inNetns runs f on an OS thread inside the network namespace ns (a name
// `ip netns add` made): the sockets f creates (listeners, dials) belong to
// that namespace for good, whichever thread later uses them. The thread
// is locked to f's goroutine and moved back to its own namespace before it
// is unlocked, as vishvananda/netns does; if it cannot be moved back, the
// goroutine exits still locked, so Go discards the thread
// (runtime.LockOSThread) rather than let another goroutine run there.
//
// Moving back matters even though the thread would be discarded: when
// the goroutine happens to run on the main thread, Go cannot discard it,
// and a process whose main thread stays in a node's namespace is one that
// `ip netns pids` lists, so Teardown's cleanup would kill the harness.
func inNetns(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("backend: open own netns: %w", err)
			return
		}
		defer unix.Close(own)
		fd, err := unix.Open(filepath.Join(netnsDir, ns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("backend: open netns %s: %w", ns, err)
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("backend: enter netns %s: %w", ns, err)
			return
		}
		err = f()
		if unix.Setns(own, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		} // else: exit locked, the thread goes with the goroutine
		errc <- err
	}()
	return <-errc
}
