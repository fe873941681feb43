package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// idLen is the length of every key's id: the demo upstream's comments
// answer repeats the id ten times, and at 64 characters (its maximum)
// the answer is about 1 KiB.
const idLen = 64

// keyFormat numbers the warm keys; Lua's string.format reads it the same.
const keyFormat = "k%05d"

// maxKeys keeps keyFormat's number at five digits, so every id has the
// same length.
const maxKeys = 100000

// keyPad fills a numbered id up to idLen.
var keyPad = strings.Repeat("x", idLen-len(fmt.Sprintf(keyFormat, 0)))

// keyPath is the path of warm key i; key 0 is the hot key.
func keyPath(i int) string {
	return "/api/stories/" + fmt.Sprintf(keyFormat, i) + keyPad + "/comments"
}

// coldPath is the path of a key named after one burst (e.g. "r1-nginx"):
// a distinct prefix ("c-") so no warm key can collide with it.
func coldPath(name string) (string, error) {
	id := "c-" + name
	if len(id) > idLen {
		return "", fmt.Errorf("cold key name %q is longer than %d characters", name, idLen-2)
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return "", fmt.Errorf("cold key name %q: only [A-Za-z0-9_-]", name)
		}
	}
	return "/api/stories/" + id + strings.Repeat("x", idLen-len(id)) + "/comments", nil
}

func pathCmd(args []string, out io.Writer) error {
	switch {
	case len(args) == 1 && args[0] == "hot":
		_, err := fmt.Fprintln(out, keyPath(0))
		return err
	case len(args) == 2 && args[0] == "cold":
		p, err := coldPath(args[1])
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(out, p)
		return err
	}
	return errors.New("compare path: want `hot` or `cold NAME`")
}

// luaScript draws one of n keys uniformly per request. It builds the
// same paths as keyPath; math.random is unseeded, so every server gets
// the same sequence.
func luaScript(n int) string {
	return fmt.Sprintf(`-- bench/compare: %[1]d keys drawn uniformly (compare lua -keys %[1]d)
local paths = {}
for i = 0, %[1]d - 1 do
  paths[i + 1] = "/api/stories/" .. string.format(%[2]q, i) .. %[3]q .. "/comments"
end
request = function()
  return wrk.format(nil, paths[math.random(%[1]d)])
end
`, n, keyFormat, keyPad)
}

func luaCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("compare lua", flag.ContinueOnError)
	keys := fs.Int("keys", 10000, "number of keys")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := checkKeys(*keys); err != nil {
		return err
	}
	_, err := io.WriteString(out, luaScript(*keys))
	return err
}

func checkKeys(n int) error {
	if n < 1 || n > maxKeys {
		return fmt.Errorf("-keys must be 1..%d, got %d", maxKeys, n)
	}
	return nil
}
