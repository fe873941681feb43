package consensus

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// Recover rewrites the Raft configuration stored in cfg.DataDir to exactly
// voters, for a cluster that lost its quorum or whose nodes' configurations
// no longer agree (a wedged cluster). It is hashicorp/raft's RecoverCluster,
// which Consul runs for peers.json and rqlite for peers.json too: the
// node's snapshot and log are replayed into sm, a new snapshot holding that
// state and the new configuration is written, and the log is compacted.
//
// The node must be stopped: its bolt file is locked while it runs, and
// Recover fails after boltOpenTimeout instead of touching it. Run it on
// every node with the same voters, then start them all. Data committed only
// on nodes left out of voters may be lost; entries not yet committed
// anywhere may be committed by the recovered cluster.
func Recover(cfg Config, sm StateMachine, voters []Peer) error {
	if sm == nil {
		return fmt.Errorf("%w: nil StateMachine", ErrInvalidConfig)
	}
	cfg.InMemory, cfg.Transport = false, nil
	if cfg.BindAddr == "" {
		cfg.BindAddr = "127.0.0.1:0" // not used: Recover opens no listener
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	conf, err := recoveryConfiguration(cfg.NodeID, voters)
	if err != nil {
		return err
	}
	n := &Node{cfg: cfg, log: cfg.Logger.With("node", cfg.NodeID, "subsystem", "recover")}
	st, err := n.openStores()
	if err != nil {
		return fmt.Errorf("%w: %w (is the node still running?)", ErrRecover, err)
	}
	defer st.closer.Close()
	// The transport only names the local address inside the snapshot
	// metadata; nothing is dialled.
	_, trans := raft.NewInmemTransport(raft.ServerAddress(cfg.NodeID))
	defer trans.Close()
	rc := cfg.raftConfig()
	rc.Logger = newHclog(cfg.Logger.With("node", cfg.NodeID), "raft")
	sink := &fsm{sm: sm, log: n.log, rejected: &n.stats.applyErrors}
	if err := raft.RecoverCluster(rc, sink, st.logs, st.stable, st.snaps, trans, conf); err != nil {
		return fmt.Errorf("%w: %w", ErrRecover, err)
	}
	n.log.Info("raft configuration recovered", "voters", serverIDs(conf.Servers))
	return nil
}

// recoveryConfiguration turns the operator's list into a voter-only
// configuration; it must hold this node and no ID or address twice.
func recoveryConfiguration(self string, voters []Peer) (raft.Configuration, error) {
	var conf raft.Configuration
	ids, addrs := map[string]bool{}, map[string]bool{}
	for _, v := range voters {
		switch {
		case v.ID == "" || v.RaftAddr == "":
			return conf, fmt.Errorf("%w: every voter needs a name and a raft address, got %q=%q", ErrRecover, v.ID, v.RaftAddr)
		case ids[v.ID]:
			return conf, fmt.Errorf("%w: voter %q listed twice", ErrRecover, v.ID)
		case addrs[v.RaftAddr]:
			return conf, fmt.Errorf("%w: raft address %q listed twice", ErrRecover, v.RaftAddr)
		}
		ids[v.ID], addrs[v.RaftAddr] = true, true
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(v.ID), Address: raft.ServerAddress(v.RaftAddr)})
	}
	if !ids[self] {
		return conf, fmt.Errorf("%w: the voters must include this node (%s)", ErrRecover, self)
	}
	return conf, nil
}

// adopt rewrites the stored configuration to this node alone, at its
// transport's address, when Config.Adopt asks for it on reading the
// stored voters: raft.RecoverCluster over the stores Start just opened, as
// Recover does offline, so every committed entry is kept. It runs before
// raft.NewRaft, on the one open of raft.db (bolt panics on some damage
// after it locked the file, and its map of the file keeps the lock until
// the process exits: a second open here would wait on it). A store it
// cannot read is damage, as newRaft would find it.
func (n *Node) adopt(rc *raft.Config, st storeSet, trans raft.Transport) error {
	if n.cfg.Adopt == nil {
		return nil
	}
	var conf raft.Configuration
	err := guardDamage("reading the stored Raft configuration", func() error {
		var err error
		conf, err = storedConfiguration(st)
		return err
	})
	if err != nil {
		return err
	}
	was := voterPeers(conf)
	if !n.cfg.Adopt(was) {
		return nil
	}
	alone := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(n.cfg.NodeID), Address: trans.LocalAddr()}}}
	if err := raft.RecoverCluster(rc, n.fsm, st.logs, st.stable, st.snaps, trans, alone); err != nil {
		return fmt.Errorf("%w: adopting the stored state: %w", ErrRecover, err)
	}
	n.log.Warn("raft configuration adopted: the stored state is this node's alone now", "was", was)
	return nil
}

// voterPeers are conf's voters.
func voterPeers(conf raft.Configuration) []Peer {
	var voters []Peer
	for _, s := range conf.Servers {
		if s.Suffrage == raft.Voter {
			voters = append(voters, Peer{ID: string(s.ID), RaftAddr: string(s.Address)})
		}
	}
	return voters
}

// storedConfiguration is the latest configuration in st: the newest
// configuration entry above the newest snapshot, else that snapshot's.
func storedConfiguration(st storeSet) (raft.Configuration, error) {
	var conf raft.Configuration
	var since uint64
	snaps, err := st.snaps.List()
	if err != nil {
		return conf, err
	}
	if len(snaps) > 0 { // newest first
		conf, since = snaps[0].Configuration, snaps[0].Index
	}
	last, err := st.logs.LastIndex()
	if err != nil {
		return conf, err
	}
	var l raft.Log
	for i := last; i > since; i-- {
		switch err := st.logs.GetLog(i, &l); {
		case errors.Is(err, raft.ErrLogNotFound):
			return conf, nil // below the log's first entry: the snapshot's holds
		case err != nil:
			return conf, err
		case l.Type == raft.LogConfiguration:
			return raft.DecodeConfiguration(l.Data), nil
		}
	}
	return conf, nil
}
