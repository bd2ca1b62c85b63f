package replay

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
)

// Source is one log to replay: its name (in the reasons of malformed
// lines: a file name, or "-" for standard input) and how to open it. A log
// compressed with gzip is read through it, whatever its name.
type Source struct {
	Name string
	Open func() (io.ReadCloser, error)
}

// Malformed is a line that could not be read, and why.
type Malformed struct {
	File   string `json:"file"`
	Line   int64  `json:"line"`
	Reason string `json:"reason"`
}

// firstMalformed is how many malformed lines a report names.
const firstMalformed = 5

// pipeline is the number of batches in flight between the reading, the
// deciding and the counting goroutines.
const pipeline = 6

// reader reads the sources in order, in its own goroutine, parsing their
// lines into batches it sends on out; each batch comes back on free once
// decided and counted.
type reader struct {
	p        *lineParser
	free     chan *batch
	out      chan *batch
	done     chan struct{} // closed when the decider stops early
	progress func(n int64)

	lines       int64 // lines read (blank ones aside): requests, malformed or unrequested
	malformed   int64
	unrequested int64 // lines that log no request (see requestLine)
	first       []Malformed
	err         error // a source that could not be opened or read
}

func newReader(p *lineParser, progress func(int64)) *reader {
	r := &reader{p: p, free: make(chan *batch, pipeline), out: make(chan *batch, pipeline-2), done: make(chan struct{}), progress: progress}
	for range pipeline {
		r.free <- newBatch()
	}
	return r
}

// run reads every source, then closes out. The first error stops it.
func (r *reader) run(srcs []Source) {
	defer close(r.out)
	for _, s := range srcs {
		if err := r.source(s); err != nil {
			r.err = err
			return
		}
	}
}

// get returns a free batch, or nil when the decider has stopped.
func (r *reader) get() *batch {
	select {
	case b := <-r.free:
		b.reset()
		return b
	case <-r.done:
		return nil
	}
}

func (r *reader) send(b *batch) bool {
	if len(b.recs) == 0 {
		r.free <- b
		return true
	}
	select {
	case r.out <- b:
		return true
	case <-r.done:
		return false
	}
}

// counter counts the bytes read from a source, for progress.
type counter struct {
	r io.Reader
	f func(int64)
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.f != nil && n > 0 {
		c.f(int64(n))
	}
	return n, err
}

// source reads one source: into a batch's buffer, a megabyte at a time;
// complete lines are parsed in place, and a line cut by the buffer's end
// is carried to the next batch's.
func (r *reader) source(s Source) error {
	rc, err := s.Open()
	if err != nil {
		return err
	}
	defer rc.Close()
	b := r.get()
	if b == nil {
		return nil
	}
	b.name = s.Name
	var in io.Reader = &counter{r: rc, f: r.progress}
	// A gzip stream starts with 1f 8b.
	n, eof, err := fill(in, b.buf[:2])
	if err != nil {
		r.free <- b
		return fmt.Errorf("read %s: %w", s.Name, err)
	}
	if n == 2 && b.buf[0] == 0x1f && b.buf[1] == 0x8b {
		z, err := gzip.NewReader(io.MultiReader(bytes.NewReader([]byte{0x1f, 0x8b}), in))
		if err != nil {
			r.free <- b
			return fmt.Errorf("read %s: %w", s.Name, err)
		}
		defer z.Close()
		in, n = z, 0
	}
	var (
		line int64 // lines of the source so far
		skip bool  // the rest of an overlong line is being skipped
	)
	carry := n
	for {
		var m int
		if !eof {
			if m, eof, err = fill(in, b.buf[carry:]); err != nil {
				r.free <- b
				return fmt.Errorf("read %s: %w", s.Name, err)
			}
		}
		end := carry + m
		rest := end // where the part carried to the next batch starts
		if !eof {
			last := bytes.LastIndexByte(b.buf[:end], '\n')
			if last < 0 { // no line end in a whole buffer
				if !skip {
					line++
					r.lines++
					r.bad(s.Name, line, fmt.Sprintf("longer than %d bytes", batchBytes))
				}
				skip, carry = true, 0
				continue
			}
			rest = last + 1
		}
		data := b.buf[:rest]
		if skip {
			if i := bytes.IndexByte(data, '\n'); i >= 0 {
				data, skip = data[i+1:], false
			} else {
				data = nil
			}
		}
		line = r.lines1(s.Name, line, data, b)
		if eof {
			r.send(b)
			return nil
		}
		next := r.get()
		if next == nil {
			return nil
		}
		next.name = s.Name
		carry = copy(next.buf, b.buf[rest:end])
		if !r.send(b) {
			return nil
		}
		b = next
	}
}

// fill reads from r until p is full, the input ends (eof) or an error.
func fill(r io.Reader, p []byte) (n int, eof bool, err error) {
	for n < len(p) {
		m, err := r.Read(p[n:])
		n += m
		switch {
		case err == io.EOF:
			return n, true, nil
		case err != nil:
			return n, false, err
		}
	}
	return n, false, nil
}

// lines1 parses the lines of data (the last one may lack its '\n') into
// b's records and returns the source's line count after them.
func (r *reader) lines1(name string, line int64, data []byte, b *batch) int64 {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		var l []byte
		if i < 0 {
			l, data = data, nil
		} else {
			l, data = data[:i], data[i+1:]
		}
		line++
		if n := len(l); n > 0 && l[n-1] == '\r' {
			l = l[:n-1]
		}
		if len(l) == 0 {
			continue
		}
		r.lines++
		b.recs = append(b.recs, Record{})
		rec := &b.recs[len(b.recs)-1]
		rec.line = line
		if why := r.p.parse(l, rec, b); why != "" {
			b.recs = b.recs[:len(b.recs)-1]
			if why == noRequest {
				r.unrequested++
			} else {
				r.bad(name, line, why)
			}
		}
	}
	return line
}

// bad counts a malformed line.
func (r *reader) bad(file string, line int64, why string) {
	r.malformed++
	if len(r.first) < firstMalformed {
		r.first = append(r.first, Malformed{File: file, Line: line, Reason: why})
	}
}
