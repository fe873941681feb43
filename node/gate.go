package node

import (
	"context"

	"github.com/levee/levee/breaker"
)

// doneFunc reports a logical call's outcome to the breaker that allowed it.
type doneFunc = func(ctx context.Context, failed bool) error

// gateFunc adapts a function to proxy.Gate.
type gateFunc func(ctx context.Context, route string, s breaker.Settings) (doneFunc, error)

func (g gateFunc) Allow(ctx context.Context, route string, s breaker.Settings) (doneFunc, error) {
	return g(ctx, route, s)
}

// allowOf asks one breaker and turns its ticket into the done callback
// proxy.Gate hands back.
func allowOf(ctx context.Context, b *breaker.Breaker, route string, s breaker.Settings) (doneFunc, error) {
	t, err := b.Allow(ctx, route, s)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, failed bool) error { return b.Done(ctx, t, failed) }, nil
}

// breakerGate is the single-node gate: one local breaker.
func breakerGate(b *breaker.Breaker) gateFunc {
	return func(ctx context.Context, route string, s breaker.Settings) (doneFunc, error) {
		return allowOf(ctx, b, route, s)
	}
}
