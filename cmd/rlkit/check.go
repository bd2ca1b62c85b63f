package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/rlkit/rlkit/core"
)

// checkCmd is `rlkit check FILE...`.
type checkCmd struct {
	Format string `enum:"text,json" default:"text" help:"Output format: text (file:line:col: message) or json (one array, for CI annotations)."`
	Strict bool   `help:"Exit 1 on warnings too."`
	// IdentityKeyEnv says the service hashes secret identities under a
	// key of its own, as rlkit keys' flag of the same name does.
	IdentityKeyEnv string   `placeholder:"VAR" help:"The environment variable that holds the service's identity key (core.WithIdentityKey): when it is set, a rule keyed by a header is no warning."`
	Files          []string `arg:"" name:"file" help:"Configuration files to check."`
}

// finding is one error or warning of one file.
type finding struct {
	File     string `json:"file"`
	Line     int    `json:"line"`
	Column   int    `json:"column"`
	Rule     string `json:"rule"`
	Field    string `json:"field"`
	Value    string `json:"value"`
	Message  string `json:"message"`
	Severity string `json:"severity"` // "error" or "warning"
}

// Run checks every file and prints what it found.
func (c *checkCmd) Run(e *env) error {
	all := []finding{} // an empty array, not null, in JSON
	keySet := false
	if c.IdentityKeyEnv != "" {
		_, err := identityKey(c.IdentityKeyEnv)
		keySet = err == nil
	}
	for _, file := range c.Files {
		all = append(all, c.checkFile(file, keySet)...)
	}
	failed := false
	for _, f := range all {
		if f.Severity == "error" || c.Strict {
			failed = true
		}
	}
	if err := c.print(e.stdout, all); err != nil {
		return err
	}
	if failed {
		return exitError{exitFail}
	}
	return nil
}

func (c *checkCmd) print(w io.Writer, all []finding) error {
	if c.Format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(all)
	}
	for _, f := range all {
		if _, err := fmt.Fprintln(w, f.text()); err != nil {
			return err
		}
	}
	return nil
}

// text is the finding as file:line:col: message (file: message without a
// line); a warning's message starts with "warning: ".
func (f finding) text() string {
	msg := f.Message
	if f.Severity == "warning" {
		msg = "warning: " + msg
	}
	if f.Line <= 0 {
		return f.File + ": " + msg
	}
	return f.File + ":" + strconv.Itoa(f.Line) + ":" + strconv.Itoa(f.Column) + ": " + msg
}

// checkFile loads file as core.LoadConfig does and returns its errors,
// or, when it loads, its warnings; keySet tells whether the variable
// c.IdentityKeyEnv names holds a key.
func (c *checkCmd) checkFile(file string, keySet bool) []finding {
	data, err := core.ReadConfigFile(file)
	if err != nil {
		return []finding{{File: file, Message: strings.TrimPrefix(err.Error(), "rate-limit config: "), Severity: "error"}}
	}
	cfg, err := core.ParseConfig(data, file)
	if err != nil {
		return errorFindings(file, err)
	}
	return warnings(file, data, cfg, c.IdentityKeyEnv, keySet)
}

// errorFindings is one finding per error joined in err.
func errorFindings(file string, err error) []finding {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	var out []finding
	for _, e := range errs {
		var ce *core.ConfigError
		if !errors.As(e, &ce) {
			out = append(out, finding{File: file, Message: strings.TrimPrefix(e.Error(), "rate-limit config: "), Severity: "error"})
			continue
		}
		f := finding{File: file, Line: ce.Line, Column: ce.Column, Rule: ce.Rule, Field: ce.Field, Value: ce.Value, Message: message(*ce), Severity: "error"}
		if f.Line > 0 && f.Column <= 0 {
			f.Column = 1
		}
		out = append(out, f)
	}
	return out
}

// message is ce's text without where it is: what core.ConfigError.Error
// says of ce with no file nor line (rule, field and value, the value cut
// as core cuts it, then what is wrong), its "rate-limit config: " start
// dropped.
func message(ce core.ConfigError) string {
	ce.File, ce.Line, ce.Column = "", 0, 0
	return strings.TrimPrefix(ce.Error(), "rate-limit config: ")
}
