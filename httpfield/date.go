package httpfield

import (
	"errors"
	"strings"
	"time"
)

// ErrDate is returned for a value that is no HTTP-date.
var ErrDate = errors.New("httpfield: not an HTTP-date")

var monthNames = [...]string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}

var dayNames = [...]string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}

var longDayNames = [...]string{"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}

// ParseDate parses an HTTP-date (RFC 9110 §5.6.7) in any of its three
// forms, exactly as the grammar spells them: the preferred IMF-fixdate
// ("Sun, 06 Nov 1994 08:49:37 GMT") and the two obsolete forms a recipient
// must accept, rfc850-date ("Sunday, 06-Nov-94 08:49:37 GMT") and
// asctime-date ("Sun Nov  6 08:49:37 1994"). Single spaces only, two-digit
// day, hour, minute and second, four-digit year (two in rfc850-date), and
// the time zone GMT: "2:01:18", "18  Aug", "UTC" and "AEST" are errors
// (http.ParseTime accepts a one-digit hour). Day names, month names and
// GMT are matched without regard to case, as caches do in practice (the
// http-tests cache suite's expires-parse cases call that optimal). A
// two-digit rfc850 year more than 50 years after now's is taken as the
// most recent past year ending in those digits, as §5.6.7 requires. The
// weekday is checked for its spelling, not against the date.
func ParseDate(s string, now time.Time) (time.Time, error) {
	if t, ok := imfFixdate(s); ok {
		return t, nil
	}
	if t, ok := rfc850(s, now); ok {
		return t, nil
	}
	if t, ok := asctime(s); ok {
		return t, nil
	}
	return time.Time{}, ErrDate
}

// imfFixdate: day-name "," SP 2DIGIT SP month SP 4DIGIT SP time SP "GMT".
func imfFixdate(s string) (time.Time, bool) {
	if len(s) != 29 || s[3] != ',' || s[4] != ' ' || s[7] != ' ' || s[11] != ' ' || s[16] != ' ' || s[25] != ' ' {
		return time.Time{}, false
	}
	if name(s[:3], dayNames[:]) < 0 || !strings.EqualFold(s[26:], "GMT") {
		return time.Time{}, false
	}
	return build(s[8:11], s[5:7], s[12:16], s[17:25])
}

// rfc850: day-name-l "," SP 2DIGIT "-" month "-" 2DIGIT SP time SP "GMT".
func rfc850(s string, now time.Time) (time.Time, bool) {
	day, rest, ok := strings.Cut(s, ", ")
	if !ok || name(day, longDayNames[:]) < 0 || len(rest) != 22 ||
		rest[2] != '-' || rest[6] != '-' || rest[9] != ' ' || rest[18] != ' ' || !strings.EqualFold(rest[19:], "GMT") {
		return time.Time{}, false
	}
	yy, ok := digits(rest[7:9])
	if !ok {
		return time.Time{}, false
	}
	year := now.UTC().Year()/100*100 + yy
	if year > now.UTC().Year()+50 {
		year -= 100
	}
	return buildYear(rest[3:6], rest[:2], year, rest[10:18])
}

// asctime: day-name SP month SP ( 2DIGIT / ( SP DIGIT ) ) SP time SP 4DIGIT.
func asctime(s string) (time.Time, bool) {
	if len(s) != 24 || s[3] != ' ' || s[7] != ' ' || s[10] != ' ' || s[19] != ' ' || name(s[:3], dayNames[:]) < 0 {
		return time.Time{}, false
	}
	day := s[8:10]
	if day[0] == ' ' {
		if day[1] < '1' || day[1] > '9' {
			return time.Time{}, false
		}
		day = "0" + day[1:]
	}
	return build(s[4:7], day, s[20:24], s[11:19])
}

func build(month, day, year, clock string) (time.Time, bool) {
	y, ok := digits(year)
	if !ok {
		return time.Time{}, false
	}
	return buildYear(month, day, y, clock)
}

// buildYear checks the fields and returns the instant, UTC. A day the
// month does not have (31 Feb) is an error, not the next month's.
func buildYear(month, day string, year int, clock string) (time.Time, bool) {
	m := name(month, monthNames[:])
	d, okD := digits(day)
	if m < 0 || !okD || len(clock) != 8 || clock[2] != ':' || clock[5] != ':' {
		return time.Time{}, false
	}
	hh, ok1 := digits(clock[:2])
	mm, ok2 := digits(clock[3:5])
	ss, ok3 := digits(clock[6:])
	if !ok1 || !ok2 || !ok3 || hh > 23 || mm > 59 || ss > 60 || d < 1 {
		return time.Time{}, false
	}
	t := time.Date(year, time.Month(m+1), d, hh, mm, min(ss, 59), 0, time.UTC)
	if t.Day() != d {
		return time.Time{}, false
	}
	return t, true
}

// name is the index of s in names, matched without regard to case; -1
// when it is none of them.
func name(s string, names []string) int {
	for i, n := range names {
		if strings.EqualFold(s, n) {
			return i
		}
	}
	return -1
}

// digits parses a run of ASCII digits (2 or 4 here); ok false for
// anything else, a sign or a space included.
func digits(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
