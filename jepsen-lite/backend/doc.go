// Package backend runs a Levee cluster and its demo upstream somewhere the
// harness can break it for real: as processes in network namespaces
// (Local) or as the docker compose cluster (Docker). Faults are real:
// iptables partitions inside each node's network namespace, kill -9 and
// restart with the same data dir, SIGSTOP/SIGCONT (docker pause), packet
// loss by iptables, and slow links: latency, jitter and a bandwidth limit
// through the relays Local runs in each node's namespace (package relay,
// see links), by tc netem for Docker where the kernel has it.
package backend
