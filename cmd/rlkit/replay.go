package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/rlkit/rlkit/cmd/rlkit/internal/replay"
	"github.com/rlkit/rlkit/core"
)

// replayCmd is `rlkit replay --config FILE [LOG...]`.
type replayCmd struct {
	Config      string        `required:"" placeholder:"FILE" help:"The rule file whose limits are replayed."`
	LogFormat   string        `enum:"clf,json,nginx-json,caddy,envoy" default:"clf" help:"The logs' format: clf (Common or Combined Log Format), json (JSON lines), nginx-json, caddy or envoy (default text format)."`
	Field       []string      `sep:"none" placeholder:"NAME=PATH" help:"Where a JSON log holds a field: time, method, path, status, ip, user, request, headers or header:NAME, at PATH (keys joined by '.'). Repeatable."`
	Identity    string        `default:"ip" help:"Who a request counts as: ip (the client IP), field:NAME or header:NAME."`
	Plan        string        `placeholder:"SOURCE" help:"Where a request's plan is: field:NAME or header:NAME (default: no plan)."`
	FoldCase    bool          `help:"Match paths without regard to case, as Fiber's default router does."`
	IPv6Prefix  int           `name:"ipv6-prefix-len" default:"64" placeholder:"BITS" help:"Group IPv6 clients by this prefix length, as the service's clientip.Config.IPv6PrefixLen does."`
	Format      string        `enum:"text,json" default:"text" help:"Output format: text or json."`
	RefuseShare float64       `default:"0.001" help:"The share of a rule's units (its requests weighted, as its limits count them) a recommended limit may refuse."`
	Top         int           `default:"10" help:"How many of the keys refused most to name per rule."`
	StatsKeys   int           `default:"1000000" help:"The most keys each rule's figures hold at once (64 to 80 bytes each for a rule of one limit, 40 more per further limit); past it the figures say how approximate they are."`
	StoreKeys   int           `default:"1048576" help:"The memory store's bound on counters, as the service's memstore.WithMaxKeys."`
	MaxAhead    time.Duration `default:"1m" placeholder:"DURATION" help:"A line more than this later than both the line before it and the line after it has a wrong time stamp: it is taken at the time of the line before (the first line: of the line after), so that it does not stop the clock for the lines after it (0: never)."`
	Progress    bool          `default:"true" help:"Show progress on standard error when it is a terminal and the logs are large: a bar, or when a log is a pipe a count of the bytes read (--progress=false: never)."`
	Plot        string        `placeholder:"DIR" help:"Write one PNG per rule into DIR: the distribution of per-key peaks, the limit and the recommendations."`
	Logs        []string      `arg:"" optional:"" name:"log" help:"Access logs, in time order (default: standard input; \"-\" is standard input). A log compressed with gzip is read through it."`
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
		for _, f := range errorFindings(c.Config, data, err) {
			fmt.Fprintln(e.stderr, f.text())
		}
		return exitError{exitFail}
	}
	fmt.Fprintln(e.stderr, c.Config+": "+readError(c.Config, err))
	return exitError{exitFail}
}

func (c *replayCmd) replay(e *env, rules *replay.Rules) error {
	// The command line is checked first, then the plot directory, then
	// the logs are opened: nothing is read while a later check may fail.
	if c.RefuseShare <= 0 || c.Top <= 0 || c.StatsKeys <= 0 || c.StoreKeys <= 0 || c.IPv6Prefix < 1 || c.IPv6Prefix > 128 || c.MaxAhead < 0 {
		fmt.Fprintln(e.stderr, "rlkit: --refuse-share, --top, --stats-keys and --store-keys must be above 0, --ipv6-prefix-len from 1 to 128, --max-ahead 0 or more (rlkit replay --help)")
		return exitError{exitUsage}
	}
	var pr *progress // set once the logs' size is known, before they are read
	o := replay.Options{
		Format: c.LogFormat, Fields: c.Field, Identity: c.Identity, Plan: c.Plan, FoldCase: c.FoldCase,
		IPv6PrefixLen: c.IPv6Prefix, RefuseShare: c.RefuseShare, Top: c.Top, StatsKeys: c.StatsKeys, StoreKeys: c.StoreKeys,
		MaxAhead: c.MaxAhead,
	}
	if c.Progress {
		o.Progress = func(n int64) {
			if pr != nil {
				pr.add(n)
			}
		}
	}
	r, err := replay.New(rules, o)
	if err != nil {
		fmt.Fprintln(e.stderr, "rlkit:", err)
		return exitError{exitUsage}
	}
	if c.Plot != "" {
		if err := plotDir(c.Plot); err != nil {
			fmt.Fprintf(e.stderr, "rlkit: --plot %s: %v\n", c.Plot, err)
			return exitError{exitFail}
		}
	}
	logs := c.Logs
	if len(logs) == 0 {
		logs = []string{"-"}
	}
	var (
		srcs  []replay.Source
		total int64 // bytes of the logs, for progress; -1 when not known
	)
	// Every log that is a regular file is opened (and closed) before any
	// is read, so that one that cannot be is an error before the replay,
	// and read when its turn comes. Any other (a named pipe, a shell's
	// process substitution /dev/fd/N) is opened when its turn comes, once:
	// opening it may wait for its writer, and it can be read only once.
	for _, name := range logs {
		if name == "-" {
			srcs = append(srcs, replay.Stdin(os.Stdin))
			// A file redirected to standard input has a size; a pipe
			// has none.
			if st, err := os.Stdin.Stat(); err == nil && st.Mode().IsRegular() && total >= 0 {
				total += st.Size()
			} else {
				total = -1
			}
			continue
		}
		st, err := os.Stat(name)
		switch {
		case err != nil:
			fmt.Fprintln(e.stderr, "rlkit:", err)
			return exitError{exitFail}
		case st.IsDir():
			fmt.Fprintf(e.stderr, "rlkit: %s: is a directory, not a log\n", name)
			return exitError{exitFail}
		case st.Mode().IsRegular():
			f, err := os.Open(name)
			if err != nil {
				fmt.Fprintln(e.stderr, "rlkit:", err)
				return exitError{exitFail}
			}
			f.Close()
			if total >= 0 {
				total += st.Size()
			}
		default:
			total = -1 // a pipe or a device: its size is not known
		}
		srcs = append(srcs, replay.Source{Name: name, Open: func() (io.ReadCloser, error) { return os.Open(name) }})
	}
	if c.Progress && (total < 0 || total >= progressMin) && isTerminal(e.stderr) {
		pr = newProgress(e.stderr, total)
	}
	rep, err := r.Run(srcs)
	pr.finish()
	if err != nil {
		fmt.Fprintln(e.stderr, "rlkit:", err)
		return exitError{exitFail}
	}
	if c.Format == "json" {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = rep.WriteText(e.stdout)
	}
	if err != nil {
		return err
	}
	// The plots come after the report, which a plot that cannot be
	// written does not take away.
	if c.Plot != "" {
		if err := writePlots(c.Plot, rep); err != nil {
			fmt.Fprintf(e.stderr, "rlkit: --plot %s: %v\n", c.Plot, err)
			return exitError{exitFail}
		}
	}
	return nil
}

// progress shows how much of the logs was read, on a terminal: a progress meter when
// their size is known, else (a pipe) a spinner with
// the bytes read, which appears once progressMin bytes were read, so
// that a small input shows none.
type progress struct {
	bar           *progressbar.ProgressBar
	out           gate
	read, pending int64     // bytes read, and of them not yet given to the meter
	start, last   time.Time // when the reading started, and when the meter was last given bytes
	drawn         bool      // whether the meter was given bytes
	now           func() time.Time
}

// progressEvery is how often the progress is drawn.
const progressEvery = 100 * time.Millisecond

// The first frame waits for firstBytes read or firstAfter passed, so
// that its rate and time left are measured over some reading, not over
// the first bytes (the two that tell a gzip stream).
const (
	firstBytes = 1 << 20
	firstAfter = 200 * time.Millisecond
)

// gate writes to w once open, and drops what is written before.
type gate struct {
	w    io.Writer
	open bool
}

func (g *gate) Write(p []byte) (int, error) {
	if !g.open {
		return len(p), nil
	}
	return g.w.Write(p)
}

// newProgress starts the progress of logs of total bytes (-1: not known)
// shown on w.
func newProgress(w io.Writer, total int64) *progress {
	p := &progress{out: gate{w: w, open: total >= progressMin}, now: time.Now}
	p.start = p.now()
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(&p.out),
		progressbar.OptionSetDescription("replaying"),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowCount(),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionFullWidth(),
	}
	if total < 0 {
		opts = append(opts, progressbar.OptionSpinnerType(14))
	} else {
		opts = append(opts, progressbar.OptionShowTotalBytes(true))
	}
	p.bar = progressbar.NewOptions64(total, opts...)
	p.bar.StartWithoutRender()
	return p
}

// add counts n bytes read; it is called from the replay's reading
// goroutine, whose end Run waits for.
// The meter, drawn each time it is given bytes, is given them at most every
// progressEvery, the first time once firstBytes were read or firstAfter
// passed, and at once when it appears.
func (p *progress) add(n int64) {
	p.read += n
	p.pending += n
	appears := !p.out.open && p.read >= progressMin
	now := p.now()
	if !appears && (now.Sub(p.last) < progressEvery || !p.drawn && p.read < firstBytes && now.Sub(p.start) < firstAfter) {
		return
	}
	p.out.open = p.out.open || appears
	p.last, p.drawn = now, true
	p.bar.Add64(p.pending)
	p.pending = 0
}

// finish clears the meter, if any was shown.
func (p *progress) finish() {
	if p != nil {
		p.bar.Add64(p.pending)
		p.bar.Finish()
	}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
