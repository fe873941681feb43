package node

import (
	"context"

	"github.com/levee/levee/breaker"
)

// breakerGate adapts one *breaker.Breaker to proxy.Gate.
type breakerGate struct{ b *breaker.Breaker }

func (g breakerGate) Allow(ctx context.Context, route string, s breaker.Settings) (func(context.Context, bool) error, error) {
	t, err := g.b.Allow(ctx, route, s)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, failed bool) error { return g.b.Done(ctx, t, failed) }, nil
}
