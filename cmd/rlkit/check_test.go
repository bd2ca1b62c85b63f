package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// binary is the rlkit program, built once for every test.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rlkit")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "rlkit")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v: %s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// rlkit runs the program in dir and returns its stdout, stderr and exit
// status.
func rlkit(t *testing.T, dir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("rlkit %q: %v", args, err)
	}
	return o.String(), e.String(), code
}

// files writes each name/content pair into a new directory and returns it.
func files(t *testing.T, nameContent ...string) string {
	t.Helper()
	dir := t.TempDir()
	for i := 0; i+1 < len(nameContent); i += 2 {
		if err := os.WriteFile(filepath.Join(dir, nameContent[i]), []byte(nameContent[i+1]), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// good loads without error or warning.
const good = `rate_limit:
  enabled: true
  default: "100/minute"
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "10/minute"
`

// twoErrors has a bad limit on line 7 and a bad burst on line 8.
const twoErrors = `rate_limit:
  enabled: true
  default: "100/minute"
  rules:
    - name: api
      paths: ["/api"]
      limit: "ten/minute"
      burst: -3
`

func TestCheckValidFile(t *testing.T) {
	dir := files(t, "good.yaml", good)
	out, errOut, code := rlkit(t, dir, "check", "good.yaml")
	if code != 0 || out != "" || errOut != "" {
		t.Errorf("check good.yaml: status %d, stdout %q, stderr %q; want 0 and nothing", code, out, errOut)
	}
}

func TestCheckErrorsWithLines(t *testing.T) {
	dir := files(t, "bad.yaml", twoErrors)
	out, _, code := rlkit(t, dir, "check", "bad.yaml")
	want := `bad.yaml:7:14: rule "api": field "limit": value "ten/minute": limit "ten/minute": count "ten" is not a positive integer
bad.yaml:8:14: rule "api": field "burst": value "-3": burst applies to token_bucket and gcra only, not fixed_window
`
	if code != 1 || out != want {
		t.Errorf("check bad.yaml: status %d, stdout\n%s\nwant 1 and\n%s", code, out, want)
	}
}

func TestCheckBadCharacterColumn(t *testing.T) {
	dir := files(t, "sep.yaml", "rate_limit:\n  enabled: true\n  default: \"1/second\u2028\"\n")
	out, _, code := rlkit(t, dir, "check", "sep.yaml")
	if code != 1 || !strings.HasPrefix(out, "sep.yaml:3:21: ") || strings.Count(out, "\n") != 1 {
		t.Errorf("check sep.yaml: status %d, stdout %q; want 1 and one line at 3:21", code, out)
	}
}

func TestCheckMissingAndSeveralFiles(t *testing.T) {
	dir := files(t, "good.yaml", good, "bad.yaml", twoErrors)
	out, _, code := rlkit(t, dir, "check", "good.yaml", "missing.yaml", "bad.yaml")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 1 || len(lines) != 3 {
		t.Fatalf("check good missing bad: status %d, stdout\n%s\nwant 1 and 3 lines", code, out)
	}
	if lines[0] != "missing.yaml: no such file or directory" {
		t.Errorf("line 1 = %q, want the missing file named", lines[0])
	}
	if !strings.HasPrefix(lines[1], "bad.yaml:7:14: ") || !strings.HasPrefix(lines[2], "bad.yaml:8:14: ") {
		t.Errorf("lines 2, 3 = %q, %q; want bad.yaml's errors at 7 and 8", lines[1], lines[2])
	}
	// Two good files pass together.
	if out, _, code := rlkit(t, files(t, "a.yaml", good, "b.yaml", good), "check", "a.yaml", "b.yaml"); code != 0 || out != "" {
		t.Errorf("check a b: status %d, stdout %q; want 0 and nothing", code, out)
	}
}

// TestCheckNotRegular: a file that is not a regular one is named once,
// with what it is, in text and in JSON.
func TestCheckNotRegular(t *testing.T) {
	dir := files(t, "good.yaml", good)
	if err := os.Mkdir(filepath.Join(dir, "conf.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"check", ".", "conf.d", "good.yaml"}
	want := ".: is a directory, not a regular file\nconf.d: is a directory, not a regular file\n"
	if _, err := os.Stat("/dev/null"); err == nil {
		args = append(args, "/dev/null")
		want += "/dev/null: is a character device, not a regular file\n"
	}
	if out, errOut, code := rlkit(t, dir, args...); code != 1 || out != want || errOut != "" {
		t.Errorf("rlkit %q: status %d, stdout %q, stderr %q; want 1 and %q", args, code, out, errOut, want)
	}
	out, _, code := rlkit(t, dir, "check", "--format", "json", ".")
	var got []finding
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != 1 ||
		!slices.Equal(got, []finding{{File: ".", Message: "is a directory, not a regular file", Severity: "error"}}) {
		t.Errorf("check --format json .: status %d, %v, %+v", code, err, got)
	}
}

func TestCheckUsage(t *testing.T) {
	dir := files(t, "good.yaml", good)
	for _, args := range [][]string{{}, {"check"}, {"check", "--bogus", "good.yaml"}, {"check", "--format", "xml", "good.yaml"}, {"frobnicate"}} {
		out, errOut, code := rlkit(t, dir, args...)
		if code != 2 || !strings.HasPrefix(errOut, "rlkit: ") || out != "" {
			t.Errorf("rlkit %q: status %d, stdout %q, stderr %q; want 2 and an error on stderr", args, code, out, errOut)
		}
	}
	if out, _, code := rlkit(t, dir, "check", "--help"); code != 0 || !strings.Contains(out, "--strict") {
		t.Errorf("check --help: status %d, stdout %q; want 0 and the flags", code, out)
	}
}

func TestCheckJSON(t *testing.T) {
	dir := files(t, "bad.yaml", twoErrors, "warn.yaml", "rate_limit:\n  enabled: true\n")
	out, _, code := rlkit(t, dir, "check", "--format", "json", "bad.yaml", "warn.yaml")
	if code != 1 {
		t.Errorf("status %d, want 1", code)
	}
	var got []finding
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("stdout is not a JSON array of findings: %v\n%s", err, out)
	}
	want := []finding{
		{File: "bad.yaml", Line: 7, Column: 14, Rule: "api", Field: "limit", Value: "ten/minute", Message: `rule "api": field "limit": value "ten/minute": limit "ten/minute": count "ten" is not a positive integer`, Severity: "error"},
		{File: "bad.yaml", Line: 8, Column: 14, Rule: "api", Field: "burst", Value: "-3", Message: `rule "api": field "burst": value "-3": burst applies to token_bucket and gcra only, not fixed_window`, Severity: "error"},
		{File: "warn.yaml", Line: 2, Column: 1, Field: "default", Message: `field "default": no "default": requests no rule matches count against the built-in 120/minute`, Severity: "warning"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d findings, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("finding %d = %+v\nwant %+v", i, got[i], want[i])
		}
	}
	// A file without findings is an empty array, not null.
	if out, _, code := rlkit(t, files(t, "good.yaml", good), "check", "--format", "json", "good.yaml"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("good.yaml as JSON: status %d, stdout %q; want 0 and []", code, out)
	}
}

func TestCheckWarnings(t *testing.T) {
	for _, c := range []struct {
		name, yaml, want string
	}{{
		"built-in default",
		"rate_limit:\n  enabled: true\n  rules:\n    - name: a\n      paths: [\"/a\"]\n      limit: 1/second\n",
		`f.yaml:2:1: warning: field "default": no "default": requests no rule matches count against the built-in 120/minute`,
	}, {
		"no enabled field",
		"rate_limit:\n  rules:\n    - name: a\n      paths: [\"/a\"]\n      limit: 1/second\n",
		`f.yaml:1:1: warning: field "enabled": the file has rules but no "enabled" field: limiting is off`,
	}, {
		"failures unbounded",
		"rate_limit:\n  enabled: true\n  default: 10/second\n  rules:\n    - name: login\n      paths: [\"/login\"]\n      limit: 5/minute\n      count: failures\n",
		`f.yaml:8:14: warning: rule "login": field "count": value "failures": counts failures with neither concurrent nor penalty: requests in flight together all pass the check before the first failure is counted`,
	}, {
		"exempt catch-all",
		"rate_limit:\n  enabled: true\n  default: 10/second\n  exempt_paths:\n    - /health\n    - /static/**\n",
		`f.yaml:6:7: warning: field "exempt_paths": value "/static/**": a catch-all: no path under /static/ is ever counted, a rule's nor one added later`,
	}, {
		"exempt wildcard",
		"rate_limit:\n  enabled: true\n  default: 10/second\n  exempt_paths: [\"/health\", \"/api/v1/*\", \"/users/:id\", \"/t/{t}\", \"/a/*/b\"]\n",
		`f.yaml:4:29: warning: field "exempt_paths": value "/api/v1/*": a wildcard: no path one segment under /api/v1/ is ever counted, a rule's nor one added later` + "\n" +
			`f.yaml:4:42: warning: field "exempt_paths": value "/users/:id": a wildcard: no path one segment under /users/ is ever counted, a rule's nor one added later` + "\n" +
			`f.yaml:4:56: warning: field "exempt_paths": value "/t/{t}": a wildcard: no path one segment under /t/ is ever counted, a rule's nor one added later`,
	}, {
		"a rule keyed by a header",
		"rate_limit:\n  enabled: true\n  default: 10/second\n  rules:\n    - name: api\n      paths: [\"/api/**\"]\n      limit: 5/second\n      key: ip+header:x-api-key\n",
		`f.yaml:8:12: warning: rule "api": field "key": value "ip+header:x-api-key": counts callers by the request header X-Api-Key, kept as a keyed hash under the limiter's identity key: ` + publicKeyWhy,
	}, {
		"the default keyed by a header",
		"rate_limit:\n  enabled: true\n  default: 10/second\n  default_key: header:Authorization\n",
		`f.yaml:4:16: warning: field "default_key": value "header:Authorization": counts callers by the request header Authorization, kept as a keyed hash under the limiter's identity key: ` +
			strings.ReplaceAll(publicKeyWhy, "X-Api-Key", "Authorization"),
	}} {
		t.Run(c.name, func(t *testing.T) {
			dir := files(t, "f.yaml", c.yaml)
			out, _, code := rlkit(t, dir, "check", "f.yaml")
			if code != 0 || out != c.want+"\n" {
				t.Errorf("check: status %d, stdout\n%s\nwant 0 and\n%s", code, out, c.want)
			}
			if out, _, code := rlkit(t, dir, "check", "--strict", "f.yaml"); code != 1 || out != c.want+"\n" {
				t.Errorf("check --strict: status %d, stdout\n%s\nwant 1 and the same warning", code, out)
			}
		})
	}
	// Bounded by concurrent or by a penalty, counting failures is no warning.
	for _, bound := range []string{"concurrent: 1", "penalty: {after: 5, within: 1m, ban: 15m}"} {
		doc := "rate_limit:\n  enabled: true\n  default: 10/second\n  rules:\n    - name: login\n      paths: [\"/login\"]\n      limit: 5/minute\n      count: failures\n      " + bound + "\n"
		if out, _, code := rlkit(t, files(t, "f.yaml", doc), "check", "--strict", "f.yaml"); code != 0 || out != "" {
			t.Errorf("failures with %s: status %d, stdout %q; want 0 and nothing", bound, code, out)
		}
	}
}

// publicKeyWhy ends the warning of a rule keyed by the X-Api-Key header.
const publicKeyWhy = "unless the service sets core.WithIdentityKey, that key is the public default, and anyone who reads the store's keys can test a guessed X-Api-Key against them (--identity-key-env names the variable that holds the service's key)"

// TestCheckIdentityKeyEnv: a rule keyed by a header is no warning when
// --identity-key-env names a variable that holds a key, and a warning
// that names the variable when it holds none.
func TestCheckIdentityKeyEnv(t *testing.T) {
	dir := files(t, "f.yaml", "rate_limit:\n  enabled: true\n  default: 10/second\n  rules:\n    - name: api\n      paths: [\"/api/**\"]\n      limit: 5/second\n      key: header:X-Api-Key\n")
	t.Setenv("SERVICE_KEY", "a key of the service's own")
	if out, _, code := rlkit(t, dir, "check", "--strict", "--identity-key-env", "SERVICE_KEY", "f.yaml"); code != 0 || out != "" {
		t.Errorf("with the key set: status %d, stdout %q; want 0 and nothing", code, out)
	}
	t.Setenv("SERVICE_KEY", "")
	want := `f.yaml:8:12: warning: rule "api": field "key": value "header:X-Api-Key": counts callers by the request header X-Api-Key, kept as a keyed hash under the limiter's identity key: --identity-key-env SERVICE_KEY: the variable is empty or not set, so the service may hash under the public default key, and anyone who reads the store's keys could test a guessed X-Api-Key against them` + "\n"
	if out, _, code := rlkit(t, dir, "check", "--strict", "--identity-key-env", "SERVICE_KEY", "f.yaml"); code != 1 || out != want {
		t.Errorf("with the variable empty: status %d, stdout\n%s\nwant 1 and\n%s", code, out, want)
	}
}

// TestKongStaysInTheProgram: the command-line library, the progress meter
// and the plotting library are this program's alone; no library package
// of the module (core, the stores, the adapters, metrics, reload, ...)
// compiles them.
func TestKongStaysInTheProgram(t *testing.T) {
	// Every package of the module but the program's own and the examples.
	all, err := exec.Command("go", "list", "../../...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, all)
	}
	var libs []string
	for _, pkg := range strings.Fields(string(all)) {
		if !strings.HasPrefix(pkg, "github.com/rlkit/rlkit/cmd/") && !strings.HasPrefix(pkg, "github.com/rlkit/rlkit/examples/") {
			libs = append(libs, pkg)
		}
	}
	if !slices.Contains(libs, "github.com/rlkit/rlkit/core") || !slices.Contains(libs, "github.com/rlkit/rlkit/nethttp") || len(libs) < 20 {
		t.Fatalf("go list listed %d library packages: %v", len(libs), libs)
	}
	programOnly := []string{"github.com/alecthomas/kong", "github.com/schollz/progressbar", "gonum.org/v1/plot"}
	for _, lib := range libs {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", lib).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v: %s", lib, err, out)
		}
		for _, pkg := range strings.Fields(string(out)) {
			for _, p := range programOnly {
				if strings.HasPrefix(pkg, p) {
					t.Errorf("%s depends on %s", lib, pkg)
				}
			}
		}
	}
	own, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	for _, p := range programOnly {
		if err != nil || !strings.Contains(string(own), "\n"+p) {
			t.Errorf("rlkit's own dependencies lack %s (%v): the check above proves nothing", p, err)
		}
	}
}

// TestOneDashLongFlags: "-format json" and "-strict=true", as Go's flag
// package spells them, mean what "--format json" and "--strict" do.
func TestOneDashLongFlags(t *testing.T) {
	dir := files(t, "good.yaml", good)
	out, errOut, code := rlkit(t, dir, "check", "-format", "json", "good.yaml")
	if code != 0 || strings.TrimSpace(out) != "[]" || errOut != "" {
		t.Fatalf("check -format json: code %d, stdout %q, stderr %q; want 0, [], nothing", code, out, errOut)
	}
	_, _, code = rlkit(t, dir, "check", "-strict=true", "-format=text", "good.yaml")
	if code != 0 {
		t.Fatalf("check -strict=true -format=text: code %d, want 0", code)
	}
	// A flag of a command is read with one dash too.
	for _, flag := range []string{"-ipv6-prefix-len", "--ipv6-prefix-len"} {
		_, errOut, code = rlkit(t, dir, "replay", "-config", "good.yaml", flag, "0", os.DevNull)
		if code != 2 || !strings.Contains(errOut, "--ipv6-prefix-len from 1 to 128") {
			t.Errorf("replay %s 0: code %d, stderr %q; want 2 and the bound named", flag, code, errOut)
		}
	}
}

// TestVersion: --version prints the program's version, its module's as
// the build records it, and the Go release, and exits 0; the
// help names it, and shows --identity and --key as a choice, not both.
func TestVersion(t *testing.T) {
	for _, flag := range []string{"--version", "-version"} {
		out, errOut, code := rlkit(t, t.TempDir(), flag)
		if v := strings.Fields(out); code != 0 || len(v) < 3 || v[0] != "rlkit" || !strings.HasPrefix(v[2], "go1.") || errOut != "" {
			t.Errorf("rlkit %s: status %d, stdout %q, stderr %q; want 0 and the version", flag, code, out, errOut)
		}
	}
	out, _, code := rlkit(t, t.TempDir(), "--help")
	if code != 0 || !strings.Contains(out, "--version") || !strings.Contains(out, "keys inspect --redis=URL --rule=STRING [flags]") {
		t.Errorf("rlkit --help: status %d, stdout\n%s", code, out)
	}
}

// TestColumn: a finding's column is where its value is written on its
// line, its opening quote included, else its field's key; 1 when the line
// holds neither or does not exist.
func TestColumn(t *testing.T) {
	data := []byte("rate_limit:\r\n" +
		"  default_key: header:X-Id\r\n" +
		"    - {name: up, limit: \"1/hour\", burst: -3}\n" +
		"      penalty: {after: 0, within: 1m}\n" +
		"      name: \"é\", limit: 'ten/minute'\n" +
		"    - /static/**\n" +
		"      paths: [/api/**, /api]\n")
	for _, c := range []struct {
		line         int
		field, value string
		want         int
	}{
		{2, "default_key", "header:X-Id", 16},
		{2, "key", "", 1}, // "key" only inside default_key
		{3, "burst", "-3", 42},
		{3, "limit", "1/hour", 25},
		{3, "limit", "", 18},
		{4, "penalty.after", "0", 24},
		{4, "penalty.within", "", 27},
		{5, "limit", "ten/minute", 25}, // é is one character
		{6, "exempt_paths", "/static/**", 7},
		{7, "paths", "/api", 24}, // the whole value, not the start of /api/**
		{7, "paths", "/api/**", 15},
		{6, "exempt_paths", "/health", 1},
		{1, "enabled", "", 1},
		{0, "limit", "x", 1},
		{10, "limit", "x", 1},
	} {
		if got := column(data, c.line, c.field, c.value); got != c.want {
			t.Errorf("column(line %d, %q, %q) = %d, want %d", c.line, c.field, c.value, got, c.want)
		}
	}
}

// TestCheckDocsExample runs the example of docs/cli.md's check section:
// its two files, and the lines and exit status it shows.
func TestCheckDocsExample(t *testing.T) {
	data, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	_, doc, _ := strings.Cut(string(data), "\n## An example run\n")
	doc, _, _ = strings.Cut(doc, "\n## rlkit explain\n")
	block := func(fence string) string {
		t.Helper()
		_, rest, ok := strings.Cut(doc, "\n```"+fence+"\n")
		body, after, closed := strings.Cut(rest, "\n```\n")
		if !ok || !closed {
			t.Fatalf("no ```%s block in the example", fence)
		}
		doc = after
		return body + "\n"
	}
	bad, edge, console := block("yaml invalid"), block("yaml"), block("console")
	want, _, _ := strings.Cut(strings.TrimPrefix(console, "$ rlkit check ratelimit.yaml edge.yaml\n"), "$ echo $?\n")
	out, errOut, code := rlkit(t, files(t, "ratelimit.yaml", bad, "edge.yaml", edge), "check", "ratelimit.yaml", "edge.yaml")
	if code != 1 || errOut != "" || out != want || !strings.Contains(console, "$ echo $?\n1\n") {
		t.Errorf("rlkit check: status %d, stderr %q, stdout\n%s\nwant 1 and (docs/cli.md)\n%s", code, errOut, out, want)
	}
}
