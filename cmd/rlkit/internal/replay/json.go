package replay

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// JSON lines: one object a line, read by a scanner that looks only at the
// paths it was asked for and skips every other value without decoding it.
// A string without escapes is not copied.

// Slots of the values a JSON line gives (lineParser.vals), after the text
// formats' own: the logical fields, then the identity's and plan's fields
// and the headers the rules count per, as the options ask.
const (
	slotTime = numTextSlots + iota
	slotMethod
	slotPath
	slotStatus
	slotIP
	slotJUser
	slotRequest
	numJSONSlots
)

// jsonFields names the logical fields of a JSON log (--field NAME=PATH).
var jsonFields = map[string]int{"time": slotTime, "method": slotMethod, "path": slotPath, "status": slotStatus, "ip": slotIP, "user": slotJUser, "request": slotRequest}

// jnode is one level of the paths asked for: the values to take at this
// key and the keys below it.
type jnode struct {
	takes   []take
	headers bool // the value is an object of request headers
	kids    map[string]*jnode
}

// take is a slot a value fills, and the rank of the path among the
// slot's candidates: a lower rank wins over a value found before it.
type take struct{ slot, rank int }

// jsonSpec is what the lines of a JSON log are read for.
type jsonSpec struct {
	root    jnode
	headers map[string]int // canonical header name → slot, for the values of a headers object
}

// add asks for path (keys joined by '.') to fill slot, at rank. A path is
// also tried whole, as one key that holds dots ("http.request.method").
func (s *jsonSpec) add(path string, slot, rank int) {
	n := &s.root
	for key := range strings.SplitSeq(path, ".") {
		n = n.kid(key)
	}
	n.takes = append(n.takes, take{slot, rank})
	if strings.Contains(path, ".") {
		w := s.root.kid(path)
		w.takes = append(w.takes, take{slot, rank})
	}
}

// addHeaders asks for the object at path to be read as request headers.
func (s *jsonSpec) addHeaders(path string) {
	n := &s.root
	for key := range strings.SplitSeq(path, ".") {
		n = n.kid(key)
	}
	n.headers = true
}

func (n *jnode) kid(key string) *jnode {
	if n.kids == nil {
		n.kids = map[string]*jnode{}
	}
	k := n.kids[key]
	if k == nil {
		k = &jnode{}
		n.kids[key] = k
	}
	return k
}

// maxJSONDepth bounds the nesting of the objects the scanner walks into.
const maxJSONDepth = 32

// json reads one JSON line into the parser's slots and rec.
func (p *lineParser) json(line []byte, rec *Record, b *batch) string {
	for i := range p.vals {
		p.vals[i], p.ranks[i] = "", 1<<30
	}
	i := skipWS(line, 0)
	if i >= len(line) || line[i] != '{' {
		return "not a JSON object"
	}
	j, why := p.object(line, i, &p.spec.root, b, 0)
	if why != "" {
		return why
	}
	if j = skipWS(line, j); j != len(line) {
		return "text after the JSON object"
	}
	return p.jsonRecord(rec, b)
}

// jsonRecord makes rec of the slots a JSON line filled.
func (p *lineParser) jsonRecord(rec *Record, b *batch) string {
	ts := view(p.vals[slotTime])
	if len(ts) == 0 {
		return "no time (" + p.names[slotTime] + ")"
	}
	t, ok := p.tc.rfc3339(ts)
	if !ok {
		if t, ok = p.tc.clfTime(ts); !ok {
			if t, ok = epoch(ts); !ok {
				return "time " + quote(ts) + " is neither RFC 3339, dd/Mon/yyyy:hh:mm:ss +zzzz nor a Unix time"
			}
		}
	}
	rec.Time = t
	method, target := p.vals[slotMethod], p.vals[slotPath]
	if method == "" || target == "" {
		req := p.vals[slotRequest]
		switch {
		case method == "" && target == "" && req == "" && p.ranks[slotRequest] < 1<<30:
			return noRequest // a request line logged empty: no request
		case req != "":
			if why := requestLine(view(req), rec); why != "" {
				return why
			}
		case method == "":
			return "no method (" + p.names[slotMethod] + ")"
		default:
			return "no path (" + p.names[slotPath] + ")"
		}
		if method != "" {
			rec.Method = method
		}
		if target == "" {
			target = rec.Path
		}
	} else {
		rec.Method = method
	}
	s, e, ok := targetSpan(view(target))
	switch {
	case !ok:
		return "path " + quote(view(target)) + " is not a path"
	case s < 0:
		rec.Path = "/"
	default:
		rec.Path = target[s:e]
	}
	st := view(p.vals[slotStatus])
	if len(st) == 0 {
		return "no status (" + p.names[slotStatus] + ")"
	}
	if rec.Status, ok = status(st); !ok {
		return "status " + quote(st) + " is not a three-digit code"
	}
	p.vals[slotHost] = p.vals[slotIP]
	if ip := p.vals[slotIP]; ip != "" {
		if !b.clientAddr(rec, ip, p.prefix) {
			p.badIP = ip
		}
	} else {
		rec.IP, rec.Addr = "", ""
	}
	return ""
}

// view returns the bytes of s without copying them, to read only.
func view(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// member reads the key of an object's member at line[i] and the ':'
// after it: the key's bounds in line (esc: it holds escapes), and the
// index of the value; or why the member is not valid JSON.
func member(line []byte, i int) (ks, ke int, esc bool, value int, bad string) {
	if i >= len(line) || line[i] != '"' {
		return 0, 0, false, 0, "invalid JSON: want a key"
	}
	ks, ke, esc, next := scanString(line, i)
	if next < 0 {
		return 0, 0, false, 0, "invalid JSON: a string has no closing quote"
	}
	i = skipWS(line, next)
	if i >= len(line) || line[i] != ':' {
		return 0, 0, false, 0, "invalid JSON: want ':' after a key"
	}
	i = skipWS(line, i+1)
	if i >= len(line) {
		return 0, 0, false, 0, "invalid JSON: a key has no value"
	}
	return ks, ke, esc, i, ""
}

// object reads the object at line[i] ('{'), taking the values n asks for,
// and returns the index after it.
func (p *lineParser) object(line []byte, i int, n *jnode, b *batch, depth int) (int, string) {
	i = skipWS(line, i+1)
	if i < len(line) && line[i] == '}' {
		return i + 1, ""
	}
	for {
		ks, ke, esc, next, bad := member(line, i)
		if bad != "" {
			return 0, bad
		}
		i = next
		var kid *jnode
		if n != nil && n.kids != nil {
			if esc {
				var kb [128]byte
				if k, ok := unescape(kb[:0], line[ks:ke]); ok {
					kid = n.kids[string(k)]
				}
			} else {
				kid = n.kids[string(line[ks:ke])] // no allocation for a lookup
			}
		}
		var why string
		if kid == nil {
			i, why = skipValue(line, i)
		} else {
			i, why = p.value(line, i, kid, b, depth+1)
		}
		if why != "" {
			return 0, why
		}
		i = skipWS(line, i)
		if i >= len(line) {
			return 0, "invalid JSON: an object is not closed"
		}
		switch line[i] {
		case ',':
			i = skipWS(line, i+1)
		case '}':
			return i + 1, ""
		default:
			return 0, "invalid JSON: want ',' or '}' after a value"
		}
	}
}

// value reads the value at line[i] that n asks for.
func (p *lineParser) value(line []byte, i int, n *jnode, b *batch, depth int) (int, string) {
	switch c := line[i]; {
	case c == '{':
		switch {
		case n.headers:
			return p.headerObject(line, i, b)
		case n.kids != nil && depth < maxJSONDepth:
			return p.object(line, i, n, b, depth)
		}
		return skipValue(line, i)
	case c == '[':
		// A list of strings (a header's values) gives its first.
		j := skipWS(line, i+1)
		if j < len(line) && line[j] == '"' && len(n.takes) > 0 {
			if v, ok := stringValue(line, j, b); ok {
				p.fill(n.takes, v)
			}
		}
		return skipValue(line, i)
	case c == '"':
		ks, ke, esc, next := scanString(line, i)
		if next < 0 {
			return 0, "invalid JSON: a string has no closing quote"
		}
		if len(n.takes) > 0 {
			v := str(line[ks:ke])
			if esc {
				u, ok := unescape(b.room(ke-ks), line[ks:ke])
				if !ok {
					return 0, "invalid JSON: a bad escape in a string"
				}
				v = b.keepAppended(u)
			}
			p.fill(n.takes, v)
		}
		return next, ""
	default:
		j, why := skipValue(line, i)
		if why == "" && len(n.takes) > 0 && (c == '-' || c >= '0' && c <= '9') {
			p.fill(n.takes, str(line[i:j]))
		}
		return j, why
	}
}

// fill puts v into each slot of takes whose value so far has a higher
// rank.
func (p *lineParser) fill(takes []take, v string) {
	for _, t := range takes {
		if t.rank < p.ranks[t.slot] {
			p.vals[t.slot], p.ranks[t.slot] = v, t.rank
		}
	}
}

// headerObject reads an object of request headers ({"User-Agent":
// ["curl/8.5.0"], "X-Api-Key": "k1"}: a value or a list of values, names
// in any case), taking the headers the spec asks for.
func (p *lineParser) headerObject(line []byte, i int, b *batch) (int, string) {
	i = skipWS(line, i+1)
	if i < len(line) && line[i] == '}' {
		return i + 1, ""
	}
	for {
		ks, ke, _, next, bad := member(line, i)
		if bad != "" {
			return 0, bad
		}
		i = next
		slot := -1
		if name := line[ks:ke]; len(name) <= 128 && len(p.spec.headers) > 0 {
			var nb [128]byte
			if s, ok := p.spec.headers[string(canonical(nb[:0], name))]; ok {
				slot = s
			}
		}
		if slot >= 0 {
			j := i
			if line[j] == '[' {
				j = skipWS(line, j+1)
			}
			if j < len(line) && line[j] == '"' {
				if v, ok := stringValue(line, j, b); ok {
					p.fill([]take{{slot, 1}}, v)
				}
			}
		}
		var why string
		if i, why = skipValue(line, i); why != "" {
			return 0, why
		}
		i = skipWS(line, i)
		if i >= len(line) {
			return 0, "invalid JSON: an object is not closed"
		}
		switch line[i] {
		case ',':
			i = skipWS(line, i+1)
		case '}':
			return i + 1, ""
		default:
			return 0, "invalid JSON: want ',' or '}' after a value"
		}
	}
}

// stringValue returns the string at line[i] ('"'), unescaped.
func stringValue(line []byte, i int, b *batch) (string, bool) {
	ks, ke, esc, next := scanString(line, i)
	if next < 0 {
		return "", false
	}
	if !esc {
		return str(line[ks:ke]), true
	}
	u, ok := unescape(b.room(ke-ks), line[ks:ke])
	if !ok {
		return "", false
	}
	return b.keepAppended(u), true
}

// canonical appends name in canonical header form ("x-api-key" →
// "X-Api-Key"), as net/http's CanonicalHeaderKey writes it.
func canonical(dst, name []byte) []byte {
	upper := true
	for _, c := range name {
		switch {
		case upper && 'a' <= c && c <= 'z':
			c -= 'a' - 'A'
		case !upper && 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		dst = append(dst, c)
		upper = c == '-'
	}
	return dst
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanString finds the end of the string at b[i] ('"'): its contents are
// b[start:end], esc tells whether they hold escapes, and next is the index
// after the closing quote (-1 when there is none).
func scanString(b []byte, i int) (start, end int, esc bool, next int) {
	start = i + 1
	for j := start; j < len(b); j++ {
		switch b[j] {
		case '"':
			return start, j, esc, j + 1
		case '\\':
			esc = true
			j++
		}
	}
	return 0, 0, false, -1
}

// skipValue returns the index after the value at b[i], which it checks
// only as far as finding its end takes: strings, and brackets that
// balance.
func skipValue(b []byte, i int) (int, string) {
	if i >= len(b) {
		return 0, "invalid JSON: a value is missing"
	}
	switch c := b[i]; {
	case c == '"':
		_, _, _, next := scanString(b, i)
		if next < 0 {
			return 0, "invalid JSON: a string has no closing quote"
		}
		return next, ""
	case c == '{' || c == '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				_, _, _, next := scanString(b, j)
				if next < 0 {
					return 0, "invalid JSON: a string has no closing quote"
				}
				j = next - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1, ""
				}
			}
		}
		return 0, "invalid JSON: an object or list is not closed"
	case c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z':
		j := i
		for j < len(b) && (b[j] == '-' || b[j] == '+' || b[j] == '.' || b[j] >= '0' && b[j] <= '9' || b[j] >= 'a' && b[j] <= 'z' || b[j] == 'E') {
			j++
		}
		switch lit := b[i:j]; {
		case string(lit) == "true", string(lit) == "false", string(lit) == "null":
		case c == '-' || c >= '0' && c <= '9':
		default:
			return 0, "invalid JSON: " + quote(b[i:j]) + " is no value"
		}
		return j, ""
	}
	return 0, "invalid JSON: " + quote(b[i:min(i+1, len(b))]) + " starts no value"
}

// unescape appends the string contents s with their escapes decoded to
// dst; ok is false for a bad escape. A \u escape of half a surrogate pair
// gives U+FFFD, as encoding/json decodes it.
func unescape(dst, s []byte) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		if i++; i >= len(s) {
			return dst, false
		}
		switch s[i] {
		case '"', '\\', '/':
			dst = append(dst, s[i])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(s[i+1:])
			if !ok {
				return dst, false
			}
			i += 4
			if utf16.IsSurrogate(r) {
				if r2, ok := hex4(s[min(i+3, len(s)):]); ok && i+2 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						r = d
						i += 6
					} else {
						r = utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
		default:
			return dst, false
		}
	}
	return dst, true
}

// hex4 reads the four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
