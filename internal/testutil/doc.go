// Package testutil holds what Levee's tests share: a fake clock, a poll
// with a deadline, and a logger that writes to t.Log. Only tests import it.
package testutil
