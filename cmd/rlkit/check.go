package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"unicode/utf8"

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
		return []finding{{File: file, Message: readError(file, err), Severity: "error"}}
	}
	cfg, err := core.ParseConfig(data, file)
	if err != nil {
		return errorFindings(file, data, err)
	}
	out := warnings(file, data, cfg, c.IdentityKeyEnv, keySet)
	for i := range out {
		out[i].Column = column(data, out[i].Line, out[i].Field, out[i].Value)
	}
	return out
}

// readError is what is wrong with file, which core.ReadConfigFile did
// not read (err), as a finding says it after the file's name: "no such
// file or directory", "is a directory, not a regular file".
func readError(file string, err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == file {
		return pe.Err.Error()
	}
	return strings.TrimPrefix(err.Error(), "rate-limit config: ")
}

// errorFindings is one finding per error joined in err, data the file's
// text.
func errorFindings(file string, data []byte, err error) []finding {
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
			f.Column = column(data, f.Line, f.Field, f.Value)
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

// column is where, on line n of data (from 1), a finding's value is
// written, else its field's key (the last part of a field such as
// "penalty.ban"), in characters from 1; 1 when the line holds neither,
// as for an error about a field that is missing.
func column(data []byte, n int, field, value string) int {
	text, ok := lineAt(data, n)
	if !ok {
		return 1
	}
	at := -1
	if i := strings.LastIndexByte(field, '.'); i >= 0 {
		field = field[i+1:]
	}
	if field != "" {
		for i := 0; i < len(text); {
			j := strings.Index(text[i:], field)
			if j < 0 {
				break
			}
			j += i
			rest := strings.TrimLeft(text[j+len(field):], " \t\"'")
			if (j == 0 || !isWord(text[j-1])) && strings.HasPrefix(rest, ":") {
				at = j
				break
			}
			i = j + len(field)
		}
	}
	if value != "" {
		// The value written whole: not a part of a longer one (/api in
		// "/api/**, /api").
		for from := max(at, 0); ; {
			j := strings.Index(text[from:], value)
			if j < 0 {
				break
			}
			j += from
			end := j + len(value)
			if (j == 0 || strings.IndexByte(" \t\"'[{,:", text[j-1]) >= 0) && (end == len(text) || strings.IndexByte(" \t\"',]}#", text[end]) >= 0) {
				at = j
				if at > 0 && (text[at-1] == '"' || text[at-1] == '\'') {
					at-- // the value's opening quote
				}
				break
			}
			from = j + 1
		}
	}
	if at < 0 {
		return 1
	}
	return utf8.RuneCountInString(text[:at]) + 1
}

// lineAt is line n of data (from 1), without its end of line.
func lineAt(data []byte, n int) (string, bool) {
	for i := 1; i < n; i++ {
		j := bytes.IndexByte(data, '\n')
		if j < 0 {
			return "", false
		}
		data = data[j+1:]
	}
	if j := bytes.IndexByte(data, '\n'); j >= 0 {
		data = data[:j]
	}
	return strings.TrimSuffix(string(data), "\r"), n >= 1
}

// isWord reports whether c may be part of a YAML key written plain.
func isWord(c byte) bool {
	return c == '_' || c == '-' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
