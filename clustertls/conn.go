package clustertls

import (
	"crypto/tls"
	"net"
)

// NameOf is the node name of the verified peer at the other end of c, a
// TLS connection (or one wrapping it, such as connmux's); false when c
// carries no verified certificate.
func NameOf(c net.Conn) (string, bool) {
	tc, ok := c.(interface{ ConnectionState() tls.ConnectionState })
	if !ok {
		return "", false
	}
	return PeerName(tc.ConnectionState())
}
