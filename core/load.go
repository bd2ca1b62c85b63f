package core

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/rlkit/rlkit/core/internal/clip"
)

// ConfigError is one problem in a configuration. It names where the problem
// is (file and line when known, rule, field) and the value at fault. A
// configuration with several problems yields all of them, joined with
// errors.Join; errors.As finds the first.
type ConfigError struct {
	File   string // "" for a Spec built in code
	Line   int    // 0 when unknown
	Column int    // in characters, from 1; 0 when unknown (only a bad character in the file has one)
	Rule   string // the rule's name, or "rules[i]" when it has none; "" for top-level fields
	Field  string // e.g. "limit", "paths", "penalty.ban", "allow.networks"
	Value  string // the offending value, as written
	Msg    string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString("rate-limit config")
	if e.File != "" {
		b.WriteString(" " + e.File)
		if e.Line > 0 {
			b.WriteString(":" + strconv.Itoa(e.Line))
			if e.Column > 0 {
				b.WriteString(":" + strconv.Itoa(e.Column))
			}
		}
	} else if e.Line > 0 {
		b.WriteString(" line " + strconv.Itoa(e.Line))
		if e.Column > 0 {
			b.WriteString(", column " + strconv.Itoa(e.Column))
		}
	}
	if e.Rule != "" {
		fmt.Fprintf(&b, ": rule %q", e.Rule)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": field %q", e.Field)
	}
	if e.Value != "" {
		fmt.Fprintf(&b, ": value %q", clip.String(e.Value))
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

// LoadConfig reads (ReadConfigFile) and compiles the YAML configuration
// in file.
func LoadConfig(file string) (*Config, error) {
	data, err := ReadConfigFile(file)
	if err != nil {
		return nil, err
	}
	return ParseConfig(data, file)
}

// maxConfigBytes bounds a configuration file: a file of ten thousand rules
// takes about a megabyte.
const maxConfigBytes = 4 << 20

// ReadConfigFile reads a configuration file: a regular file (a symbolic
// link to one is followed) of at most 4 MiB. Anything else (a
// directory, a FIFO or a device such as /dev/zero, which could block or
// never end; a larger file) is an error that says so, read no further.
// Its errors wrap an *fs.PathError of file, which says what file is
// ("open ratelimit.yaml: is a directory, not a regular file") as it says
// a file that is not there ("open ratelimit.yaml: no such file or
// directory").
func ReadConfigFile(file string) ([]byte, error) {
	fail := func(op string, err error) ([]byte, error) {
		if pe, ok := err.(*fs.PathError); ok {
			err = pe.Err
		}
		return nil, fmt.Errorf("rate-limit config: %w", &fs.PathError{Op: op, Path: file, Err: err})
	}
	fi, err := os.Stat(file)
	if err != nil {
		return fail("open", err) // what the file could not be
	}
	if !fi.Mode().IsRegular() {
		return fail("open", notRegular(fi.Mode()))
	}
	f, err := os.Open(file)
	if err != nil {
		return fail("open", err)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return fail("open", err)
	}
	if !fi.Mode().IsRegular() {
		return fail("open", notRegular(fi.Mode())) // replaced meanwhile
	}
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return fail("read", err)
	}
	if len(data) > maxConfigBytes {
		return fail("read", fmt.Errorf("is larger than %d bytes, the most a configuration file may hold", maxConfigBytes))
	}
	return data, nil
}

// notRegular is the error of a file of mode m, not a regular file: what
// it is ("is a directory, not a regular file").
func notRegular(m fs.FileMode) error {
	var what string
	switch t := m.Type(); {
	case t&fs.ModeDir != 0:
		what = "a directory"
	case t&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO)"
	case t&fs.ModeSocket != 0:
		what = "a socket"
	case t&fs.ModeCharDevice != 0:
		what = "a character device"
	case t&fs.ModeDevice != 0:
		what = "a block device"
	default:
		return errors.New("is not a regular file")
	}
	return errors.New("is " + what + ", not a regular file")
}

// ParseConfig compiles a YAML configuration; file names it in errors.
// The document holds one top-level key, rate_limit (see Spec for its
// fields, in snake_case: enabled, algorithm, rules, default, exempt_paths,
// headers, failure, mode, tiers, allow (identities, networks), ban
// (networks); per rule: name, paths, methods, limit, algorithm, burst,
// weights, mode, count, penalty (after, within, ban), concurrent, lease;
// and per plan of
// tiers: default, rules, each rule's limits as a string, a list or
// {limit, burst}). Unknown fields are errors. data must be UTF-8 text that
// YAML allows, and none of U+2028, U+2029 or a byte order mark past the
// start: the first character breaking this is reported with its line and
// column (ConfigError.Column).
//
// A file that has rules but no enabled field loads with limiting off, as
// the field's default says; since that is seldom what its author meant,
// ParseConfig logs a warning naming the file (through slog.Default; a
// Limiter's reload logs it through its own logger).
func ParseConfig(data []byte, file string) (*Config, error) {
	return parseConfig(data, file, slog.Default())
}

// parseConfig is ParseConfig, logging its warning to log.
func parseConfig(data []byte, file string, log *slog.Logger) (*Config, error) {
	spec, lines, fieldErrs, err := parseSpec(data, file)
	if err != nil {
		return nil, err
	}
	c, err := compile(spec, file, lines)
	if c != nil {
		c.digest = sha256.Sum256(data)
	}
	if len(fieldErrs) > 0 {
		// A rule the reader could read nothing of (an alias, not a
		// mapping) has its error already: compile's would repeat it.
		unread := map[string]bool{}
		for i, rs := range spec.Rules {
			if rs.Name == "" && len(rs.Paths) == 0 && len(rs.Methods) == 0 && len(rs.Limit) == 0 && rs.Algorithm == "" && rs.Burst == 0 && len(rs.Weights) == 0 && rs.Mode == "" && rs.Wait == "" && rs.WaitQueue == 0 {
				unread["rules["+strconv.Itoa(i)+"]"] = true
			}
		}
		return nil, mergeErrors(fieldErrs, err, unread)
	}
	if err == nil && len(spec.Rules) > 0 && lines["enabled"] == 0 {
		name := file
		if name == "" {
			name = "(unnamed)"
		}
		log.Warn("rlkit: rate-limit config has rules but no enabled field: limiting is off (add enabled: true to turn it on, or enabled: false to say so)",
			slog.String("file", name), slog.Int("rules", len(spec.Rules)))
	}
	return c, err
}

// mergeErrors joins the field errors of a file with the errors compile
// found in what could be read, in line order, leaving out compile's errors
// about a field (or a whole rule) the field errors already fault, and
// about the rules in unread, of which nothing could be read: they would
// only repeat the field errors.
func mergeErrors(fieldErrs []error, compileErr error, unread map[string]bool) error {
	type at struct{ rule, field string }
	faulted := map[at]bool{}
	for _, e := range fieldErrs {
		if ce, ok := e.(*ConfigError); ok {
			faulted[at{ce.Rule, ce.Field}] = true
		}
	}
	errs := slices.Clone(fieldErrs)
	if j, ok := compileErr.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			ce, ok := e.(*ConfigError)
			if ok && (faulted[at{ce.Rule, ce.Field}] || ce.Rule != "" && faulted[at{ce.Rule, ""}] || unread[ce.Rule]) {
				continue
			}
			errs = append(errs, e)
		}
	} else if compileErr != nil {
		errs = append(errs, compileErr)
	}
	return joinErrors(errs)
}

// maxErrors bounds the problems a configuration reports: past it, the
// count of the others.
const maxErrors = 50

// joinErrors joins the problems of a configuration, in line order, at most
// maxErrors of them and a line that counts the rest.
func joinErrors(errs []error) error {
	sortByLine(errs)
	if len(errs) > maxErrors {
		errs = append(errs[:maxErrors:maxErrors], fmt.Errorf("rate-limit config: and %d more problems", len(errs)-maxErrors))
	}
	return errors.Join(errs...)
}

// sortByLine orders errors by the line they name, keeping the order of
// those on one line (or with no line).
func sortByLine(errs []error) {
	slices.SortStableFunc(errs, func(a, b error) int {
		var x, y *ConfigError
		errors.As(a, &x)
		errors.As(b, &y)
		if x == nil || y == nil {
			return 0
		}
		return x.Line - y.Line
	})
}

// trimBOM drops a UTF-8 byte order mark.
func trimBOM(b []byte) []byte { return bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")) }
