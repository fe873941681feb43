package config

import "net"

// Advertised is bound, an address this node listens on, with its host
// replaced by node.advertise when that is set: the address other nodes
// and clients are told. An address without a port is returned as is.
func (n Node) Advertised(bound string) string {
	if n.Advertise == "" {
		return bound
	}
	_, port, err := net.SplitHostPort(bound)
	if err != nil {
		return bound
	}
	return net.JoinHostPort(n.Advertise, port)
}
