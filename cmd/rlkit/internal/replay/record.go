package replay

import (
	"net/netip"
	"unsafe"

	"github.com/rlkit/rlkit/core/clientip"
)

// Record is one request of an access log, as a parser reads it: the
// request type the replay's core.Flow decides over. Its strings point into
// the batch that holds the line (see batch): they are valid until the
// batch is given back, and anything kept longer is copied.
type Record struct {
	Time   int64  // when the request came: Unix nanoseconds
	Method string // "GET"
	Path   string // the request path as sent, escapes and all, without the query
	IP     string // the client IP as the limiter counts it (an IPv6 one per prefix); "" when the log has none, or a value that is no IP address
	Addr   string // the whole client address, matched against allow and ban networks; "" when IP is
	ID     string // the identity from --identity field: or header: ("" for ip, or when the line has none)
	Plan   string // the plan from --plan ("" when none)
	Status int    // the response status the log gives
	line   int64  // the line of its log

	hdr []header // the request headers the rules count per
}

// header is one request header of a Record, its name canonical.
type header struct{ name, value string }

// Header returns the value of r's header name (canonical), "" when the
// log gave none.
func (r *Record) Header(name string) string {
	for _, h := range r.hdr {
		if h.name == name {
			return h.value
		}
	}
	return ""
}

// clone returns a copy of r that owns its strings: for a request kept past
// its batch (a request waiting under a rule's wait).
func (r *Record) clone() *Record {
	c := *r
	buf := make([]byte, 0, len(r.Method)+len(r.Path)+len(r.IP)+len(r.Addr)+len(r.ID)+len(r.Plan))
	own := func(s string) string {
		start := len(buf)
		buf = append(buf, s...)
		return unsafe.String(unsafe.SliceData(buf[start:]), len(s))
	}
	c.Method, c.Path, c.IP, c.Addr, c.ID, c.Plan = own(r.Method), own(r.Path), own(r.IP), own(r.Addr), own(r.ID), own(r.Plan)
	c.hdr = make([]header, len(r.hdr))
	for i, h := range r.hdr {
		c.hdr[i] = header{h.name, string([]byte(h.value))}
	}
	return &c
}

// batchBytes is the size of a batch's input buffer, and so the longest
// line a log may have.
const batchBytes = 1 << 20

// batch is a run of lines read at once and their records, passed from the
// reading goroutine to the deciding one, then to the counting one, and
// back for reuse, so that a replay allocates nothing per line.
type batch struct {
	name    string   // the log the lines are of (Source.Name)
	buf     []byte   // the input: lines the records point into
	scratch []byte   // strings made from the input (unescaped JSON, canonical addresses)
	recs    []Record // the lines' records, in log order
	hdrs    []header // the records' headers
	tallies []tally  // what the records' decisions add to the rules' figures
}

func newBatch() *batch {
	return &batch{buf: make([]byte, batchBytes), scratch: make([]byte, 0, 64<<10), recs: make([]Record, 0, 8192)}
}

// reset empties b for reuse: what its records pointed to is overwritten
// from now on.
func (b *batch) reset() {
	b.scratch = b.scratch[:0]
	clear(b.recs) // no pointer into old scratch blocks is kept alive
	b.recs = b.recs[:0]
	clear(b.hdrs)
	b.hdrs = b.hdrs[:0]
	clear(b.tallies)
	b.tallies = b.tallies[:0]
}

// str returns a string of p's bytes without copying them: p is in b.buf.
func str(p []byte) string {
	if len(p) == 0 {
		return ""
	}
	return unsafe.String(&p[0], len(p))
}

// keep returns a string holding a copy of p in b's scratch memory. The
// scratch block is never grown in place: when it is full a new one is
// made, and the strings in the old one keep it alive.
func (b *batch) keep(p []byte) string {
	if len(p) == 0 {
		return ""
	}
	if cap(b.scratch)-len(b.scratch) < len(p) {
		b.scratch = make([]byte, 0, max(64<<10, len(p)))
	}
	start := len(b.scratch)
	b.scratch = append(b.scratch, p...)
	return unsafe.String(&b.scratch[start], len(p))
}

// room returns scratch memory for at most n bytes, to append to and pass
// to keepAppended.
func (b *batch) room(n int) []byte {
	if cap(b.scratch)-len(b.scratch) < n {
		b.scratch = make([]byte, 0, max(64<<10, n))
	}
	return b.scratch[len(b.scratch):len(b.scratch)]
}

// keepAppended returns the string of what was appended to room's slice p,
// which must not have outgrown it.
func (b *batch) keepAppended(p []byte) string {
	if len(p) == 0 {
		return ""
	}
	start := len(b.scratch)
	b.scratch = b.scratch[:start+len(p)]
	return unsafe.String(&b.scratch[start], len(p))
}

// clientAddr sets rec.IP and rec.Addr from s, a client address as a log
// writes it ("203.0.113.7", "2001:db8::1", "[2001:db8::1]",
// "[2001:db8::1]:443", "::ffff:203.0.113.7"), as the service derives them
// from a peer's address: clientip.Config.ClientIP (canonical, IPv4-mapped
// addresses as IPv4, an IPv6 address masked to its first prefix bits)
// and ClientAddr (the whole address). A canonical IPv4 address, the common
// case, is taken as it stands. A value that is no IP address ("-", a host
// name, "unix:") gives no client IP: both are "", and clientAddr reports
// false.
func (b *batch) clientAddr(rec *Record, s string, prefix int) bool {
	if canonicalIPv4(s) {
		rec.IP, rec.Addr = s, s
		return true
	}
	c := clientip.Config{IPv6PrefixLen: prefix}
	// ClientAddr gives an address that does not parse back as it is.
	addr := c.ClientAddr(s, nil)
	if _, err := netip.ParseAddr(addr); err != nil {
		rec.IP, rec.Addr = "", ""
		return false
	}
	rec.IP, rec.Addr = c.ClientIP(s, nil), addr
	return true
}

// canonicalIPv4 reports whether s is an IPv4 address as netip writes it:
// four decimal octets of at most 255, without leading zeros.
func canonicalIPv4(s string) bool {
	i := 0
	for k := range 4 {
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return false
		}
		v := int(s[i] - '0')
		i++
		for n := 1; v != 0 && n < 3 && i < len(s) && s[i] >= '0' && s[i] <= '9'; n++ {
			v = v*10 + int(s[i]-'0')
			i++
		}
		if v > 255 {
			return false
		}
		if k < 3 {
			if i >= len(s) || s[i] != '.' {
				return false
			}
			i++
		}
	}
	return i == len(s)
}
