package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/levee/levee/consensus"
	"github.com/levee/levee/peer"
	"github.com/levee/levee/proxy"
)

// PeerEndpoint is a node-to-node message another package serves (replica's
// replicate and lookup). api authenticates the caller and reads the bounded
// body; Serve decodes it, acts, and returns the encoded msgpack reply (nil:
// an empty 200). An error refuses the message: 400, ErrBadPeerFrame.
type PeerEndpoint struct {
	// Path is the message's path, one of peer's Path constants.
	Path string
	// Serve handles one authenticated message body.
	Serve func(ctx context.Context, body []byte) (reply []byte, err error)
}

// RaftApplier applies a breaker command a follower handed to this node, the
// Raft leader. from is the sending node, as the peer call named it under
// the cluster token. An error wrapping consensus.ErrRefused means the
// command was checked and refused before anything was appended.
type RaftApplier interface {
	ApplyFromPeer(ctx context.Context, from string, data []byte) ([]byte, error)
}

// RaftRemover removes a server from the Raft configuration on this node,
// the leader, for a follower that handed the removal over.
type RaftRemover interface {
	RemoveFromPeer(ctx context.Context, id string) error
}

// PeerConfig enables the node-to-node endpoints.
type PeerConfig struct {
	// Token is peer.Token(cluster.secret); "" accepts every caller.
	Token string
	// Endpoints are the messages other packages serve. Default nil: only
	// forward (and Raft, when set) are mounted; other paths answer 404.
	Endpoints []PeerEndpoint
	// Raft applies forwarded breaker commands. Default nil: 404.
	Raft RaftApplier
	// RaftRemove runs forwarded Raft removals. Default nil: 404.
	RaftRemove RaftRemover
}

// EnablePeers registers the node-to-node endpoints. Call before serving.
func (s *Server) EnablePeers(pc PeerConfig) {
	s.admin.Handle("POST "+peer.PathForward, s.peerOnly(pc.Token, s.serveForward))
	for _, ep := range pc.Endpoints {
		s.admin.Handle("POST "+ep.Path, s.peerOnly(pc.Token, func(w http.ResponseWriter, r *http.Request, b []byte) error {
			reply, err := ep.Serve(r.Context(), b)
			if err != nil {
				return fmt.Errorf("%w: %v", ErrBadPeerFrame, err)
			}
			return writeReply(w, reply)
		}))
	}
	if pc.RaftRemove != nil {
		s.admin.Handle("POST "+peer.PathRaftRemove, s.peerOnly(pc.Token, func(w http.ResponseWriter, r *http.Request, b []byte) error {
			return serveRaftRemove(w, r, b, pc.RaftRemove)
		}))
	}
	if pc.Raft != nil {
		s.admin.Handle("POST "+peer.PathRaftApply, s.peerOnly(pc.Token, func(w http.ResponseWriter, r *http.Request, b []byte) error {
			return s.serveRaftApply(w, r, b, pc.Raft)
		}))
	}
}

// peerOnly authenticates a peer call and reads its bounded body. Calls
// without the cluster token are refused with 401 before any decoding.
func (s *Server) peerOnly(token string, h func(w http.ResponseWriter, r *http.Request, body []byte) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !peer.Authorized(r, token) {
			problem(w, r, fmt.Errorf("%w: from %q", ErrPeerRefused, r.Header.Get(peer.HeaderFrom)))
			return
		}
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, peer.MaxMessage))
		if err != nil {
			problem(w, r, fmt.Errorf("%w: %v", ErrBadPeerFrame, err))
			return
		}
		if err := h(w, r, b); err != nil {
			s.cfg.Logger.Warn("peer call refused", "path", r.URL.Path, "from", r.Header.Get(peer.HeaderFrom), "err", err)
			problem(w, r, err)
		}
	})
}

// serveForward serves a request a non-owner handed over. It is served HERE,
// never forwarded again, even if this node's ring disagrees about ownership
// (rings converge; a forwarding loop would not).
func (s *Server) serveForward(w http.ResponseWriter, r *http.Request, b []byte) error {
	var fr peer.ForwardRequest
	if err := peer.Decode(b, &fr); err != nil {
		return fmt.Errorf("%w: %v", ErrBadPeerFrame, err)
	}
	if err := checkPath(fr.Path); err != nil {
		return err
	}
	req := &proxy.Request{Route: fr.Route, Method: fr.Method, Path: fr.Path, RawQuery: fr.RawQuery,
		Header: cleanHeader(http.Header(fr.Header), true), Body: fr.Body}
	out := &peer.ForwardResponse{V: peer.Version, Owner: s.cfg.Node}
	// The forwarding node's connection carries the client's patience: if it
	// gives up, this caller stops waiting (the coalesced fetch goes on).
	resp, err := s.cfg.Engine.Serve(r.Context(), req)
	if err != nil {
		status, title, retryAfter := problemOf(err)
		out.Err = &peer.RemoteError{Status: status, Title: title, Detail: err.Error(), RetryAfter: int64(retryAfter)}
	} else {
		out.Status, out.Header, out.Body = resp.Status, resp.Header, resp.Body
		out.Result, out.Age, out.FreshFor = string(resp.Result), int64(resp.Age), int64(resp.FreshFor)
		out.Detail, out.Attempts = resp.Detail, resp.Attempts
	}
	return writeMsgpack(w, out)
}

// serveRaftApply applies a follower's entry. Decode bounds m.Data by
// peer.MaxRaftData, so the leader's own decoding of it (the state
// machine's command codec, in Stamp) is bounded too. The sender is the
// X-Levee-From of the authenticated call, which the message's own From
// must repeat. A proposal the leader refused (a command for
// another node, an unknown route, settings out of bounds) is answered with
// a problem, 403 (400 when malformed), and not logged here: the leader
// counts it and logs it at most once a minute per sender
// (consensus.Config.OnRefused), which a flood must not turn into a log
// line per request. Other errors (not the leader, a timeout) travel in the
// reply, as before.
func (s *Server) serveRaftApply(w http.ResponseWriter, r *http.Request, b []byte, ra RaftApplier) error {
	var m peer.RaftApply
	if err := peer.Decode(b, &m); err != nil {
		return fmt.Errorf("%w: %v", ErrBadPeerFrame, err)
	}
	from := r.Header.Get(peer.HeaderFrom)
	if m.From != from {
		return fmt.Errorf("%w: proposal from %q sent as %q", ErrBadPeerFrame, m.From, from)
	}
	res := &peer.RaftApplyResult{V: peer.Version}
	data, err := ra.ApplyFromPeer(r.Context(), from, m.Data)
	if errors.Is(err, consensus.ErrRefused) {
		problem(w, r, err)
		return nil
	}
	if err != nil {
		res.Err = err.Error()
	}
	res.Data = data
	return writeMsgpack(w, res)
}

func serveRaftRemove(w http.ResponseWriter, r *http.Request, b []byte, rr RaftRemover) error {
	var m peer.RaftRemove
	if err := peer.Decode(b, &m); err != nil {
		return fmt.Errorf("%w: %v", ErrBadPeerFrame, err)
	}
	res := &peer.RaftRemoveResult{V: peer.Version}
	if err := rr.RemoveFromPeer(r.Context(), m.ID); err != nil {
		res.Err = err.Error()
	}
	return writeMsgpack(w, res)
}

func writeMsgpack(w http.ResponseWriter, v any) error {
	b, err := peer.Encode(v)
	if err != nil {
		return errors.Join(ErrBadPeerFrame, err)
	}
	return writeReply(w, b)
}

// writeReply writes an encoded reply; nil is an empty 200.
func writeReply(w http.ResponseWriter, b []byte) error {
	if b != nil {
		w.Header().Set("Content-Type", peer.ContentType)
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return nil
}
