// Package docs_test keeps the project's documents true: every rule file
// they show loads, every program they show builds, every relative link
// resolves, and the landing page stays a landing page.
package docs_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/rlkit/rlkit/core"
)

// root is the module's root directory.
var root = sync.OnceValue(func() string {
	dir, err := filepath.Abs("../..")
	if err != nil {
		panic(err)
	}
	return dir
})

// documents returns the Markdown documents the project publishes: the
// README and the other files at the root, docs/, and the benchmarks'
// pages and their history, as paths relative to the root.
func documents(t *testing.T) []string {
	t.Helper()
	var docs []string
	for _, pattern := range []string{"*.md", "docs/*.md", "benchmarks/*.md", "benchmarks/results/*.md", "benchmarks/results/*/*.md", "deploy/*.md"} {
		m, err := filepath.Glob(filepath.Join(root(), pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			rel, _ := filepath.Rel(root(), f)
			docs = append(docs, filepath.ToSlash(rel))
		}
	}
	if !slices.Contains(docs, "README.md") || !slices.ContainsFunc(docs, func(d string) bool { return strings.HasPrefix(d, "docs/") }) {
		t.Fatalf("documents: %q holds no README.md or no page of docs/", docs)
	}
	return docs
}

// block is one fenced code block of a document.
type block struct {
	doc  string // the document, relative to the root
	line int    // of the opening fence
	lang string // the info string's first word
	mark string // the rest of the info string ("fragment", ...)
	text string
}

func (b block) String() string { return fmt.Sprintf("%s:%d (```%s %s)", b.doc, b.line, b.lang, b.mark) }

// blocks returns the fenced code blocks (``` fences) of doc.
func blocks(t *testing.T, doc string) []block {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root(), doc))
	if err != nil {
		t.Fatal(err)
	}
	var (
		out  []block
		cur  *block
		text strings.Builder
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			info := strings.Fields(strings.TrimPrefix(trimmed, "```"))
			cur = &block{doc: doc, line: n}
			if len(info) > 0 {
				cur.lang, cur.mark = info[0], strings.Join(info[1:], " ")
			}
			text.Reset()
		case cur != nil && trimmed == "```":
			cur.text = text.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			text.WriteString(line)
			text.WriteByte('\n')
		}
	}
	if cur != nil {
		t.Errorf("%s:%d: a code block is never closed", doc, cur.line)
	}
	return out
}

// yamlMarks are the marks a ```yaml block may carry: part of a rule file,
// a rule file that must not load (an example of an error), YAML that is
// not a rule file.
var yamlMarks = map[string]bool{"fragment": true, "invalid": true, "prometheus": true}

// TestYAMLBlocksLoad: every ```yaml block of the documents is a whole rule
// file that core.ParseConfig loads, unless its info string marks it as
// something else: ```yaml fragment (part of a rule file), ```yaml invalid
// (a rule file shown for its error: it must not load), ```yaml prometheus
// (not a rule file).
func TestYAMLBlocksLoad(t *testing.T) {
	n := 0
	for _, doc := range documents(t) {
		for _, b := range blocks(t, doc) {
			switch {
			case b.lang != "yaml":
				continue
			case b.mark != "" && !yamlMarks[b.mark]:
				t.Errorf("%v: unknown mark %q (want fragment, invalid or prometheus)", b, b.mark)
				continue
			case b.mark == "invalid":
				if _, err := core.ParseConfig([]byte(b.text), b.doc); err == nil {
					t.Errorf("%v: marked invalid, but the rule file loads", b)
				}
				continue
			case b.mark != "":
				continue
			}
			n++
			cfg, err := core.ParseConfig([]byte(b.text), b.doc)
			if err != nil {
				t.Errorf("%v: the rule file does not load: %v", b, err)
				continue
			}
			if !cfg.Enabled() && !strings.Contains(b.text, "enabled: false") {
				t.Errorf("%v: the rule file loads but limits nothing (no enabled: true)", b)
			}
		}
	}
	if n == 0 {
		t.Fatal("no ```yaml rule file in the documents: the README's quick start has one")
	}
}

// TestGoBlocksBuild: every ```go block of the documents that is a whole
// file (it starts with a package clause) builds against this module, and
// every other is marked ```go fragment.
func TestGoBlocksBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds programs")
	}
	// The programs are built in a module of their own, in a temporary
	// directory, that a workspace joins to this one: they import its
	// packages and its requirements, and nothing is written into the
	// source tree.
	tmp := t.TempDir()
	var pkgs []string
	where := map[string]block{}
	for _, doc := range documents(t) {
		for _, b := range blocks(t, doc) {
			if b.lang != "go" {
				continue
			}
			if !isFile(b.text) {
				if b.mark != "fragment" {
					t.Errorf("%v: not a whole file (no package clause) and not marked ```go fragment", b)
				}
				continue
			}
			if b.mark != "" {
				t.Errorf("%v: a whole file marked %q: whole files are built, unmarked", b, b.mark)
			}
			dir := fmt.Sprintf("b%03d", len(pkgs))
			if err := os.Mkdir(filepath.Join(tmp, dir), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(tmp, dir, "main.go"), []byte(b.text), 0o644); err != nil {
				t.Fatal(err)
			}
			pkgs = append(pkgs, "./"+dir)
			where[dir] = b
		}
	}
	if len(pkgs) == 0 {
		t.Fatal("no ```go program in the documents")
	}
	for name, text := range map[string]string{
		"go.mod":  "module docsblocks\n\ngo 1.26.0\n",
		"go.work": "go 1.26.0\n\nuse (\n\t.\n\t" + strconv.Quote(root()) + "\n)\n",
	} {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", append([]string{"vet"}, pkgs...)...)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(tmp, "go.work"), "GOFLAGS=-buildvcs=false")
	out, err := cmd.CombinedOutput()
	if err == nil {
		return
	}
	// Name the documents' lines instead of the temporary files.
	msg := string(out)
	for dir, b := range where {
		msg = strings.ReplaceAll(msg, dir+"/main.go", b.String())
	}
	t.Errorf("the documents' programs do not build (go vet): %v\n%s", err, msg)
}

// isFile reports whether text is a whole Go file: its first line that is
// not blank nor a comment is a package clause.
func isFile(text string) bool {
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "//") {
			continue
		}
		return strings.HasPrefix(line, "package ")
	}
	return false
}

// linkRE finds Markdown links and images: [text](target).
var linkRE = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// TestRelativeLinksResolve: every relative link of the documents names a
// file or directory of the repository, and every #anchor into a Markdown
// document names one of its headings.
func TestRelativeLinksResolve(t *testing.T) {
	for _, doc := range documents(t) {
		data, err := os.ReadFile(filepath.Join(root(), doc))
		if err != nil {
			t.Fatal(err)
		}
		inCode := false
		for n, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inCode = !inCode
			}
			if inCode {
				continue
			}
			for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				path := doc
				if file != "" {
					path = filepath.ToSlash(filepath.Join(filepath.Dir(doc), file))
				}
				if _, err := os.Stat(filepath.Join(root(), path)); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", doc, n+1, target, path)
					continue
				}
				if anchor != "" && strings.HasSuffix(path, ".md") && !slices.Contains(anchors(t, path), anchor) {
					t.Errorf("%s:%d: link %q: %s has no heading #%s", doc, n+1, target, path, anchor)
				}
			}
		}
	}
}

// anchors returns the anchors GitHub makes of doc's headings.
func anchors(t *testing.T, doc string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root(), doc))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	seen := map[string]int{}
	inCode := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		a := slug(strings.TrimLeft(line, "#"))
		if k := seen[a]; k > 0 {
			out = append(out, fmt.Sprintf("%s-%d", a, k))
		} else {
			out = append(out, a)
		}
		seen[a]++
	}
	return out
}

// slug is GitHub's anchor of a heading: lower case, spaces as hyphens,
// letters, digits, hyphens and underscores kept, everything else (other
// punctuation, symbols such as "×") dropped.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestLandingPage: the README is a landing page: at most 300 lines, with
// the go get line, the two commands, and a quick start (a whole rule file
// and the Gin line) within its first 80 lines.
func TestLandingPage(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 300 {
		t.Errorf("README.md has %d lines, want at most 300: topics belong in docs/", len(lines))
	}
	head := strings.Join(lines[:min(80, len(lines))], "\n")
	for _, want := range []string{"go get github.com/rlkit/rlkit@latest", "go run ./examples/server", "go test ./...", "```yaml\n", "r.Use(ginrl.New(cfg))"} {
		if !strings.Contains(head, want) {
			t.Errorf("README.md's first 80 lines lack %q", want)
		}
	}
	for _, page := range pages(t) {
		if !strings.Contains(string(data), "("+page+")") {
			t.Errorf("README.md does not link %s", page)
		}
	}
}

// pages returns the pages of docs/, relative to the root.
func pages(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(root(), "docs", "*.md"))
	if err != nil || len(m) == 0 {
		t.Fatalf("no page in docs/: %v", err)
	}
	var out []string
	for _, f := range m {
		out = append(out, "docs/"+filepath.Base(f))
	}
	return out
}

// processRE finds what speaks of how the software was built rather than
// of what it does: ticket numbers, sessions, unmet targets, commits, test
// names.
var processRE = regexp.MustCompile(`(?i:\bissues? #?\d+\b|\b(?:this|previous|next|last) session\b|\bnot met\b)|\b(?:at|commit) [0-9a-f]{7,40}\b|\bTest[A-Z][A-Za-z0-9_]+`)

// hashRE is a commit hash: hex digits with a letter and a digit.
var hashRE = regexp.MustCompile(`[0-9a-f]*[a-f][0-9a-f]*`)

// processWord returns what in line speaks of how the software was built,
// or "".
func processWord(line string) string {
	for _, m := range processRE.FindAllString(line, -1) {
		if hex, ok := strings.CutPrefix(m, "at "); ok && (!hashRE.MatchString(hex) || !strings.ContainsAny(hex, "0123456789")) {
			continue // "at" and a word or a number, not a hash
		}
		return m
	}
	return ""
}

// TestDocumentsSpeakOfTheSoftware: the README and docs/ describe what the
// software does, never how it was built.
func TestDocumentsSpeakOfTheSoftware(t *testing.T) {
	for _, doc := range documents(t) {
		if doc != "README.md" && !strings.HasPrefix(doc, "docs/") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root(), doc))
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "func Test") {
				continue // a test of the reader's own, in an example
			}
			if m := processWord(line); m != "" {
				t.Errorf("%s:%d: %q speaks of how the project was built: %s", doc, n+1, m, strings.TrimSpace(line))
			}
		}
	}
}

// repoURL is where the repository's files are published; links from
// outside the documents (alerts' runbook_url) point there.
const repoURL = "https://github.com/rlkit/rlkit/blob/main/"

var runbookRE = regexp.MustCompile(`(?m)^\s*runbook_url:\s*["']?([^"'\s]+)`)

// TestRunbookLinks: every runbook_url of the Prometheus rules in deploy/
// points to a heading of a document of the repository.
func TestRunbookLinks(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root(), "deploy", "prometheus", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root(), f)
		for _, m := range runbookRE.FindAllStringSubmatch(string(data), -1) {
			n++
			path, ok := strings.CutPrefix(m[1], repoURL)
			file, anchor, _ := strings.Cut(path, "#")
			if !ok || anchor == "" || !strings.HasSuffix(file, ".md") {
				t.Errorf("%s: runbook_url %q, want %sFILE.md#HEADING", rel, m[1], repoURL)
				continue
			}
			if _, err := os.Stat(filepath.Join(root(), file)); err != nil {
				t.Errorf("%s: runbook_url %q: %s does not exist", rel, m[1], file)
				continue
			}
			if !slices.Contains(anchors(t, file), anchor) {
				t.Errorf("%s: runbook_url %q: %s has no heading #%s", rel, m[1], file, anchor)
			}
		}
	}
	if n == 0 {
		t.Errorf("no runbook_url in deploy/prometheus/*.yaml")
	}
}
