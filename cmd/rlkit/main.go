package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	_ "time/tzdata" // check and replay know every IANA time zone, whatever the system has

	"github.com/alecthomas/kong"
)

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1 // a file has an error (or, with --strict, a warning)
	exitUsage = 2 // bad command line
)

// cli is the command line: one field per subcommand, each in a file of
// its own.
type cli struct {
	Version kong.VersionFlag `help:"Print rlkit's version and exit."`

	Check   checkCmd   `cmd:"" help:"Validate rate-limit configuration files."`
	Explain explainCmd `cmd:"" help:"Explain what the limiter does with one request."`
	Keys    keysCmd    `cmd:"" help:"Inspect, list and clear a service's counters in Redis."`
	Replay  replayCmd  `cmd:"" help:"Replay access logs through a rule file: what it would have refused, and the limits the traffic suggests."`
}

// env is what a subcommand's Run receives: where it writes.
type env struct {
	stdout, stderr io.Writer
}

// exitError ends the program with status code once the subcommand has
// printed what it had to say.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() {
	// ParseConfig's warnings go through slog; check reports them itself.
	slog.SetDefault(slog.New(slog.DiscardHandler))
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run parses args, runs the subcommand and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	code := -1
	parser, err := kong.New(&cli{},
		kong.Name("rlkit"),
		kong.Description("rlkit checks and explains rate-limit configuration files, replays access logs through them, and reads the counters a service keeps in Redis."),
		kong.Writers(stdout, stderr),
		kong.Exit(func(c int) { code = c }),
		kong.Vars{"version": version()},
	)
	if err != nil {
		fmt.Fprintln(stderr, "rlkit:", err)
		return exitUsage
	}
	ctx, err := parser.Parse(longFlags(parser.Model.Node, args))
	if code >= 0 { // --help
		return code
	}
	if err != nil {
		fmt.Fprintf(stderr, "rlkit: %v (rlkit --help lists the commands)\n", err)
		return exitUsage
	}
	if err := ctx.Run(&env{stdout: stdout, stderr: stderr}); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		fmt.Fprintln(stderr, "rlkit:", err)
		return exitFail
	}
	return exitOK
}

// version is the program's module version as go install recorded it
// (v1.2.3, or a pseudo-version; "(devel)" when built from a checkout),
// the Go release it was built with, and the commit when the build
// recorded one.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "rlkit (unknown version)"
	}
	v := "rlkit " + bi.Main.Version + " " + bi.GoVersion
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			v += " commit " + s.Value
		}
	}
	return v
}

// longFlags returns args with every long flag written with one dash
// ("-config FILE", "-plan=pro", as Go's flag package and Envoy's tools
// spell them) written with two, as kong reads them. Only the names of the
// program's own long flags are rewritten, and nothing after "--": a short
// flag ("-H", "-n5") and an argument that happens to start with a dash
// stay as they are.
func longFlags(app *kong.Node, args []string) []string {
	names := map[string]bool{}
	var walk func(n *kong.Node)
	walk = func(n *kong.Node) {
		for _, f := range n.Flags {
			names[f.Name] = true
			for _, a := range f.Aliases {
				names[a] = true
			}
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(app)
	var out []string
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' {
			name, _, _ := strings.Cut(a[1:], "=")
			if len(name) > 1 && names[name] {
				if out == nil {
					out = append(make([]string, 0, len(args)), args[:i]...)
				}
				out = append(out, "-"+a)
				continue
			}
		}
		if out != nil {
			out = append(out, a)
		}
	}
	if out == nil {
		return args
	}
	return out
}
