package control

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/levee/levee/config"
	"github.com/levee/levee/consensus"
)

// TestConsensusTakesTheFileThenTheTuning: the config file names the node,
// its Raft port (advertised on node.advertise) and data dir; the timings
// and stores, which are not in the file, come from the caller, and a zero
// one keeps consensus's default.
func TestConsensusTakesTheFileThenTheTuning(t *testing.T) {
	cfg := config.Default()
	cfg.Node.Name, cfg.Node.Raft, cfg.Node.DataDir, cfg.Node.Advertise = "n1", "0.0.0.0:7000", "/var/lib/levee", "10.0.0.1"
	_, trans := raft.NewInmemTransport("")
	t.Cleanup(func() { trans.Close() })
	fast := consensus.FastTimings()
	tests := []struct {
		name   string
		t      RaftTimings
		s      Stores
		check  func(consensus.Config) bool
		expect string
	}{
		{"the file", RaftTimings{}, Stores{}, func(cc consensus.Config) bool {
			return cc.NodeID == "n1" && cc.BindAddr == "0.0.0.0:7000" && cc.AdvertiseAddr == "10.0.0.1:7000" &&
				cc.DataDir == "/var/lib/levee" && !cc.InMemory && cc.Transport == nil
		}, "the node's name, port, advertised address and data dir"},
		{"zero tuning keeps consensus's snapshots", RaftTimings{}, Stores{}, func(cc consensus.Config) bool {
			d := consensus.DefaultConfig()
			return cc.SnapshotThreshold == d.SnapshotThreshold && cc.TrailingLogs == d.TrailingLogs && cc.SnapshotInterval == d.SnapshotInterval
		}, "consensus's snapshot thresholds"},
		{"timings", RaftTimings{Raft: fast, RaftReconcile: time.Second, ContactLimit: 2 * time.Second}, Stores{}, func(cc consensus.Config) bool {
			return cc.Timings == fast && cc.ReconcileInterval == time.Second && cc.ContactLimit == 2*time.Second
		}, "the given timings"},
		{"stores", RaftTimings{}, Stores{InMemory: true, SnapshotEvery: 4, Transport: trans}, func(cc consensus.Config) bool {
			return cc.InMemory && cc.Transport == trans && cc.SnapshotThreshold == 4 && cc.TrailingLogs == 4 && cc.SnapshotInterval == snapshotCheck
		}, "in memory, over the transport, a snapshot every 4 entries keeping 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if cc := Consensus(cfg, tt.t, tt.s); !tt.check(cc) {
				t.Fatalf("Consensus = %+v, want %s", cc, tt.expect)
			}
		})
	}
}

// TestSoloConsensusKeepsTheDataDirAndLeavesTheRestToNewSolo: a Solo's log
// lives in node.data_dir whatever node.raft says, is tuned by the stores
// as a cluster's is, but takes no transport (it has its own), and zero
// timings stay zero so NewSolo picks the Solo's fast ones.
func TestSoloConsensusKeepsTheDataDirAndLeavesTheRestToNewSolo(t *testing.T) {
	cfg := config.Default()
	cfg.Node.Name, cfg.Node.DataDir = "solo", "/var/lib/levee"
	_, trans := raft.NewInmemTransport("")
	t.Cleanup(func() { trans.Close() })
	cc := SoloConsensus(cfg, RaftTimings{}, Stores{SnapshotEvery: 8, Transport: trans})
	if cc.DataDir != "/var/lib/levee" || cc.Transport != nil || cc.BindAddr != "" {
		t.Fatalf("SoloConsensus = %+v, want the data dir, no transport, no port", cc)
	}
	if cc.Timings != (consensus.Timings{}) {
		t.Fatalf("zero timings became %+v; NewSolo would not pick its own", cc.Timings)
	}
	if cc.SnapshotThreshold != 8 || cc.TrailingLogs != 8 {
		t.Fatalf("snapshot every %d keeping %d, want 8 and 8", cc.SnapshotThreshold, cc.TrailingLogs)
	}
}
