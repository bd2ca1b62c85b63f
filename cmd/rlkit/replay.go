package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/rlkit/rlkit/cmd/rlkit/internal/replay"
	"github.com/rlkit/rlkit/core"
)

// replayCmd is `rlkit replay --config FILE [LOG...]`.
type replayCmd struct {
	Config      string   `required:"" placeholder:"FILE" help:"The rule file whose limits are replayed."`
	LogFormat   string   `enum:"clf,json,nginx-json,caddy,envoy" default:"clf" help:"The logs' format: clf (Common or Combined Log Format), json (JSON lines), nginx-json, caddy or envoy (default text format)."`
	Field       []string `sep:"none" placeholder:"NAME=PATH" help:"Where a JSON log holds a field: time, method, path, status, ip, user, request, headers or header:NAME, at PATH (keys joined by '.'). Repeatable."`
	Identity    string   `default:"ip" help:"Who a request counts as: ip (the client IP), field:NAME or header:NAME."`
	Plan        string   `placeholder:"SOURCE" help:"Where a request's plan is: field:NAME or header:NAME (default: no plan)."`
	FoldCase    bool     `help:"Match paths without regard to case, as Fiber's default router does."`
	IPv6Prefix  int      `name:"ipv6-prefix" default:"64" help:"Group IPv6 clients by this prefix length, as the service's clientip.Config does."`
	Format      string   `enum:"text,json" default:"text" help:"Output format: text or json."`
	RefuseShare float64  `default:"0.001" help:"The share of a rule's units (its requests weighted, as its limits count them) a recommended limit may refuse."`
	Top         int      `default:"10" help:"How many of the keys refused most to name per rule."`
	StatsKeys   int      `default:"1000000" help:"The most keys each rule's figures hold at once (about 80 bytes each); past it the figures say how approximate they are."`
	StoreKeys   int      `default:"1048576" help:"The memory store's bound on counters, as the service's memstore.WithMaxKeys."`
	Progress    bool     `default:"true" help:"Show a progress bar on a terminal for large logs (--progress=false: never)."`
	Plot        string   `placeholder:"DIR" help:"Write one PNG per rule into DIR: the distribution of per-key peaks, the limit and the recommendations."`
	Logs        []string `arg:"" optional:"" name:"log" help:"Access logs, in time order (default: standard input; \"-\" is standard input). A log compressed with gzip is read through it."`
}

// progressMin is the input size from which progress is shown.
const progressMin = 64 << 20

// Run replays the logs and prints the report.
func (c *replayCmd) Run(e *env) error {
	data, err := core.ReadConfigFile(c.Config)
	if err == nil {
		var rules *replay.Rules
		if rules, err = replay.Load(data, c.Config); err == nil {
			return c.replay(e, rules)
		}
		for _, f := range errorFindings(c.Config, err) {
			fmt.Fprintln(e.stderr, f.text())
		}
		return exitError{exitFail}
	}
	fmt.Fprintln(e.stderr, "rlkit:", err)
	return exitError{exitFail}
}

func (c *replayCmd) replay(e *env, rules *replay.Rules) error {
	logs := c.Logs
	if len(logs) == 0 {
		logs = []string{"-"}
	}
	var (
		srcs  []replay.Source
		total int64 // bytes of the files, for progress
	)
	for _, name := range logs {
		if name == "-" {
			srcs = append(srcs, replay.Stdin(os.Stdin))
			continue
		}
		// Every log is checked before any is replayed.
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(e.stderr, "rlkit:", err)
			return exitError{exitFail}
		}
		st, err := f.Stat()
		f.Close()
		switch {
		case err != nil:
			fmt.Fprintln(e.stderr, "rlkit:", err)
			return exitError{exitFail}
		case st.IsDir():
			fmt.Fprintf(e.stderr, "rlkit: %s: is a directory, not a log\n", name)
			return exitError{exitFail}
		}
		total += st.Size()
		srcs = append(srcs, replay.Source{Name: name, Open: func() (io.ReadCloser, error) { return os.Open(name) }})
	}
	o := replay.Options{
		Format: c.LogFormat, Fields: c.Field, Identity: c.Identity, Plan: c.Plan, FoldCase: c.FoldCase,
		IPv6PrefixLen: c.IPv6Prefix, RefuseShare: c.RefuseShare, Top: c.Top, StatsKeys: c.StatsKeys, StoreKeys: c.StoreKeys,
	}
	if c.RefuseShare <= 0 || c.Top <= 0 || c.StatsKeys <= 0 || c.StoreKeys <= 0 || c.IPv6Prefix < 1 || c.IPv6Prefix > 128 {
		fmt.Fprintln(e.stderr, "rlkit: --refuse-share, --top, --stats-keys and --store-keys must be above 0, --ipv6-prefix from 1 to 128 (rlkit replay --help)")
		return exitError{exitUsage}
	}
	var bar *progressbar.ProgressBar
	if c.Progress && total >= progressMin && isTerminal(e.stderr) {
		bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(e.stderr),
			progressbar.OptionSetDescription("replaying"),
			progressbar.OptionShowBytes(true),
			progressbar.OptionThrottle(100_000_000),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionFullWidth(),
		)
		o.Progress = func(n int64) { bar.Add64(n) }
	}
	r, err := replay.New(rules, o)
	if err != nil {
		fmt.Fprintln(e.stderr, "rlkit:", err)
		return exitError{exitUsage}
	}
	rep, err := r.Run(srcs)
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		fmt.Fprintln(e.stderr, "rlkit:", err)
		return exitError{exitFail}
	}
	if c.Plot != "" {
		if err := writePlots(c.Plot, rep); err != nil {
			fmt.Fprintln(e.stderr, "rlkit:", err)
			return exitError{exitFail}
		}
	}
	if c.Format == "json" {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return rep.WriteText(e.stdout)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
