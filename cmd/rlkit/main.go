package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

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
	Check checkCmd `cmd:"" help:"Validate rate-limit configuration files."`
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
		kong.Description("rlkit checks rate-limit configuration files."),
		kong.Writers(stdout, stderr),
		kong.Exit(func(c int) { code = c }),
	)
	if err != nil {
		fmt.Fprintln(stderr, "rlkit:", err)
		return exitUsage
	}
	ctx, err := parser.Parse(args)
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
