// Package ctxwait owns one thing: waiting for a while unless a context
// ends first, the pause between retries that breaker (probe results),
// consensus (proposals and seat removals), queue (an enqueue whose
// outcome is unknown) and upstream (backoff) each make.
//
// Data flow: none of its own. A caller passes its context and the delay;
// Sleep returns when the delay has passed (true) or the context has ended
// (false), its timer stopped either way. It starts no goroutine.
package ctxwait
