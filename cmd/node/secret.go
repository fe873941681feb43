package main

import (
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
)

const secretUsage = `usage: levee secret [-env]

Prints a fresh random value for cluster.secret or cluster.admin_token:
32 bytes from the operating system's random source, base64url without
padding (43 characters). Give every node of a cluster the same secret;
make the admin token a second, different value.

  -env   print both, as the .env lines docker compose and make run read:
         LEVEE_CLUSTER_SECRET=... and LEVEE_CLUSTER_ADMIN_TOKEN=...

Exit codes: 0 printed, 2 usage.
`

// secretBytes is the entropy of one generated credential: 256 bits, the
// key size the secret is hashed into for gossip encryption.
const secretBytes = 32

// secretCmd is `levee secret`.
func secretCmd(args []string, e cliEnv) int {
	stdout, stderr := e.stdout, e.stderr
	fs := flag.NewFlagSet("levee secret", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, secretUsage) }
	asEnv := fs.Bool("env", false, "print LEVEE_CLUSTER_SECRET and LEVEE_CLUSTER_ADMIN_TOKEN lines")
	if err := fs.Parse(args); err != nil {
		return usageCode(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "levee secret: unexpected argument %q\n%s", fs.Arg(0), secretUsage)
		return 2
	}
	if *asEnv {
		fmt.Fprintf(stdout, "LEVEE_CLUSTER_SECRET=%s\nLEVEE_CLUSTER_ADMIN_TOKEN=%s\n", newSecret(), newSecret())
		return 0
	}
	fmt.Fprintln(stdout, newSecret())
	return 0
}

// newSecret returns secretBytes random bytes, base64url without padding:
// no character a shell, YAML or a .env file treats specially.
func newSecret() string {
	var b [secretBytes]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails: it crashes the program instead
	return base64.RawURLEncoding.EncodeToString(b[:])
}
