// Package resources samples what each node process holds, for soak runs:
// resident memory and open file descriptors from /proc (proc(5):
// /proc/PID/status VmRSS, the entries of /proc/PID/fd), goroutines from the
// node's own /metrics (go_goroutines, the Prometheus Go collector).
//
// Data flow: every Config.Every the Sampler asks Config.PIDs for each
// node's current process (a restarted node has a new one), reads the
// three figures and hands a history.Resources to Config.Record; a node
// whose process is not running is skipped for that round. The checker
// "resources" judges the samples and the report plots them.
package resources
