package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/levee/levee/peer"
)

// The forward path's reading and writing, which every forwarded request
// pays on the owner (issue 15): the message is read into one allocation of
// the length its sender declared, and the answer is encoded into a pooled
// buffer (peer.EncodeTo) and sent with its Content-Length, so the sender
// reads it into one allocation too (peer.Client's readReply).

// readMessage reads a peer message's body, at most peer.MaxMessage bytes
// (a larger one is an error, as http.MaxBytesReader makes it), in one
// allocation when its sender declared its length (peer.ReadBody).
func readMessage(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return peer.ReadBody(http.MaxBytesReader(w, r.Body, peer.MaxMessage), r.ContentLength)
}

// writeForward writes a forward's answer.
func writeForward(w http.ResponseWriter, out *peer.ForwardResponse) error {
	err := peer.EncodeTo(out, func(b []byte) error {
		h := w.Header()
		h["Content-Type"] = []string{peer.ContentType}
		h["Content-Length"] = []string{strconv.Itoa(len(b))}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(b) // a failed write is the sender's to notice
		return nil
	})
	if err != nil {
		return errors.Join(ErrBadPeerFrame, err)
	}
	return nil
}
