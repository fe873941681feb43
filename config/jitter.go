package config

import (
	"fmt"
	"strconv"
)

// Jitter says how far below its ceiling a backoff wait is drawn, as
// written in YAML: full, equal, none, or a number f in [0, 1]. The wait
// before the n-th retry on a schedule is drawn uniformly from
// [ceiling·(1−f), ceiling], ceiling = min(cap, base·2^(n−1)), so no wait
// exceeds cap and ceiling·(1−f) is its floor:
//
//	full   f = 1    from 0 to the ceiling (AWS "full jitter")
//	equal  f = 0.5  from half the ceiling to it
//	none   f = 0    the ceiling exactly
//
// It is kept as written (a string, which the decoder stores as is) and
// checked by Validate, because "full" is not a number; Fraction reads it.
type Jitter string

// The named jitter modes.
const (
	JitterFull  Jitter = "full"
	JitterEqual Jitter = "equal"
	JitterNone  Jitter = "none"
)

// Fraction returns the fraction of the ceiling a wait may fall below it:
// 1 for full, 0.5 for equal, 0 for none or the zero Jitter (a Backoff
// built in code without one), or the number written. Anything else is an
// error.
func (j Jitter) Fraction() (float64, error) {
	switch j {
	case JitterFull:
		return 1, nil
	case JitterEqual:
		return 0.5, nil
	case JitterNone, "":
		return 0, nil
	}
	f, err := strconv.ParseFloat(string(j), 64)
	if err != nil || !(f >= 0 && f <= 1) { // !(…) also rejects NaN
		return 0, fmt.Errorf("must be in [0, 1] or one of full, equal, none, not %q", string(j))
	}
	return f, nil
}
