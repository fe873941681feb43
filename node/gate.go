package node

import (
	"context"

	"github.com/levee/levee/breaker"
)

// doneFunc reports a logical call's outcome to the breaker that allowed it.
type doneFunc = breaker.DoneFunc

// gateFunc adapts a function to proxy.Gate.
type gateFunc func(ctx context.Context, route string, s breaker.Settings) (doneFunc, error)

func (g gateFunc) Allow(ctx context.Context, route string, s breaker.Settings) (doneFunc, error) {
	return g(ctx, route, s)
}

// breakerGate is the single-node gate: one local breaker.
func breakerGate(b *breaker.Breaker) gateFunc { return b.AllowCall }
