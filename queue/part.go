package queue

// Part is the durable queue on one node with Raft: the Service the API
// enqueues through and the Runner that delivers while the node leads,
// over one table and one log. A nil *Part is a node without a queue:
// Start and Stop do nothing.
type Part struct {
	Service *Service
	Runner  *Runner
}

// NewPart builds both: rc is the runner's; the service shares its Node,
// Table, Submit and Now, refuses jobs past bounds, and takes uncommitted
// as its Service.Uncommitted.
func NewPart(rc RunnerConfig, bounds Bounds, uncommitted func(error) bool) (*Part, error) {
	r, err := NewRunner(rc)
	if err != nil {
		return nil, err
	}
	svc := &Service{Node: rc.Node, Table: rc.Table, Submit: rc.Submit, Bounds: bounds, Now: rc.Now, Uncommitted: uncommitted}
	return &Part{Service: svc, Runner: r}, nil
}

// Start starts delivering (only while this node leads).
func (p *Part) Start() {
	if p != nil {
		p.Runner.Start()
	}
}

// Stop stops delivering; see Runner.Stop for graceful.
func (p *Part) Stop(graceful bool) {
	if p != nil {
		p.Runner.Stop(graceful)
	}
}
