package main

import (
	"fmt"
	"os"
	"strings"
)

// command is one subcommand of the levee binary: `levee NAME ...`.
type command struct {
	name    string
	summary string // one line in the command list
	usage   string // the whole usage text: levee help NAME, levee NAME -h
	run     func(args []string, e cliEnv) int
}

// commands lists every subcommand, in the order the command list shows
// them.
func commands() []command {
	return []command{
		{"status", "the node's view of the cluster: leader, term, health, members, breakers, queue", statusUsage, statusCmd},
		{"members", "members with state, address, ring share and Raft suffrage", membersUsage, membersCmd},
		{"breakers", "every route's circuit breaker", breakersUsage, breakersCmd},
		{"breaker", "force a route's breaker: levee breaker open|close ROUTE", breakerUsage, breakerCmd},
		{"owner", "which node owns a request's cache key: levee owner PATH [-tenant T]", ownerUsage, ownerCmd},
		{"purge", "remove cached answers cluster-wide: levee purge PATH [-tenant T] | -route R", purgeUsage, purgeCmd},
		{"jobs", "the durable queue's jobs: levee jobs [-state dead]", jobsUsage, jobsCmd},
		{"job", "act on one job: levee job replay ID", jobUsage, jobCmd},
		{"leave", "give up this node's Raft seat for good, then stop it", leaveUsage, leaveCmd},
		{"remove", "give up a dead node's Raft seat: levee remove NODE", removeUsage, removeCmd},
		{"recover", "unwedge a stopped cluster: levee recover -config FILE -voters ...", recoverUsage, recoverCmd},
		{"check", "validate a config file and print the effective config, secrets masked", checkUsage, checkCmd},
		{"health", "container healthcheck: exit 0 when the node answers ready", healthUsage, healthCmd},
		{"secret", "print a fresh cluster.secret (or admin token)", secretUsage, secretCmd},
		{"version", "this binary's version, and the node's when -addr answers", versionUsage, versionCmd},
		{"help", "a command's usage: levee help COMMAND", helpUsage, helpCmd},
	}
}

func findCommand(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// adminFlagsText describes the flags every command that asks a node takes.
const adminFlagsText = `
  -addr HOST:PORT   the node's admin listener (node.admin when set, else
                    node.http); default $LEVEE_ADDR, else 127.0.0.1:8080
  -token-file FILE  file holding the admin token (default $LEVEE_ADMIN_TOKEN),
                    sent as Authorization: Bearer
  -timeout 30s      how long to wait for each answer
  -json             print the node's JSON answer, indented, instead of a table
`

const helpUsage = `usage: levee help [COMMAND]

Prints the list of commands, or COMMAND's usage text (as levee COMMAND -h).
`

// topUsage is the command list: levee help, levee -h, an unknown command.
func topUsage() string {
	var b strings.Builder
	b.WriteString(`usage: levee [-config FILE] [-node.http HOST:PORT ...]   run a node
       levee COMMAND [flags] [arguments]                  operate a node

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(&b, "  %-9s %s\n", c.name, c.summary)
	}
	b.WriteString(`
Run levee help COMMAND (or levee COMMAND -h) for a command's flags.
Environment: LEVEE_ADDR (the node to ask), LEVEE_ADMIN_TOKEN (the admin
token), LEVEE_CONFIG (the config file), LEVEE_<KEY> (a config override).

Exit codes: 0 done, 1 the node answered an error (4xx/5xx) or a command
failed, 2 usage or config error, 3 the node could not be reached
(levee health: 0 ready, 1 anything else).
`)
	return b.String()
}

func helpCmd(args []string, e cliEnv) int {
	if len(args) == 0 {
		fmt.Fprint(e.stdout, topUsage())
		return exitOK
	}
	if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		fmt.Fprint(e.stdout, helpUsage)
		return exitOK
	}
	c, ok := findCommand(args[0])
	if !ok || len(args) > 1 {
		return unknownCommand(strings.Join(args, " "), e)
	}
	fmt.Fprint(e.stdout, c.usage)
	return exitOK
}

// unknownCommand prints the command list: exit 2. A file named where a
// command was expected is the old way of passing the config.
func unknownCommand(name string, e cliEnv) int {
	hint := ""
	if _, err := os.Stat(name); err == nil || strings.ContainsAny(name, "/.") {
		hint = fmt.Sprintf(" (did you mean -config %s?)", name)
	}
	fmt.Fprintf(e.stderr, "levee: unknown command %q%s\n\n%s", name, hint, topUsage())
	return exitUsage
}
