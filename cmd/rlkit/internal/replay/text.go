package replay

import "bytes"

// The text formats: the Common and Combined Log Formats (Apache's and
// nginx's defaults) and Envoy's default access log. Each line is cut with
// bytes.IndexByte, which the runtime does with vector instructions, and
// nothing is copied: a Record's strings point into the line.

// Slots of the values a text line gives (lineParser.vals).
const (
	slotHost = iota
	slotIdent
	slotUser
	slotReferer
	slotAgent
	slotXFF
	slotRequestID
	slotAuthority
	slotUpstream
	slotFlags
	numTextSlots
)

// clfFields and envoyFields are the fields of the text formats that
// --identity field:NAME and --plan field:NAME may name, and clfHeaders and
// envoyHeaders the request headers they log.
var (
	clfFields    = map[string]int{"ip": slotHost, "host": slotHost, "ident": slotIdent, "user": slotUser, "referer": slotReferer, "agent": slotAgent}
	clfHeaders   = map[string]int{"Referer": slotReferer, "User-Agent": slotAgent}
	envoyFields  = map[string]int{"request_id": slotRequestID, "authority": slotAuthority, "upstream_host": slotUpstream, "response_flags": slotFlags, "x_forwarded_for": slotXFF, "user_agent": slotAgent}
	envoyHeaders = map[string]int{"X-Forwarded-For": slotXFF, "User-Agent": slotAgent, "X-Request-Id": slotRequestID, "Host": slotAuthority}
)

// clf reads a Common Log Format line,
//
//	203.0.113.7 - alice [10/Oct/2026:13:55:36 -0700] "GET /api/search?q=x HTTP/1.1" 200 2326
//
// or a Combined one, which adds "referer" "user-agent", into rec.
func (p *lineParser) clf(line []byte, rec *Record, b *batch) string {
	i := bytes.IndexByte(line, ' ')
	switch {
	case i < 0:
		return "not a Common Log Format line"
	case i == 0:
		return "no client address"
	}
	p.vals[slotHost] = str(line[:i])
	rest := line[i+1:]
	if i = bytes.IndexByte(rest, ' '); i < 0 {
		return "no ident field"
	}
	p.vals[slotIdent] = str(rest[:i])
	rest = rest[i+1:]
	if i = bytes.Index(rest, []byte(" [")); i < 0 {
		return "no [time]"
	}
	p.vals[slotUser] = str(rest[:i])
	rest = rest[i+2:]
	if i = bytes.IndexByte(rest, ']'); i < 0 {
		return "no [time]"
	}
	t, ok := p.tc.clfTime(rest[:i])
	if !ok {
		return "time " + quote(rest[:i]) + " is not dd/Mon/yyyy:hh:mm:ss +zzzz"
	}
	rec.Time = t
	rest = rest[i+1:]
	if len(rest) < 2 || rest[0] != ' ' || rest[1] != '"' {
		return "no quoted request line after the time"
	}
	rest = rest[2:]
	if i = closingQuote(rest); i < 0 {
		return "the request line has no closing quote"
	}
	if why := requestLine(rest[:i], rec); why != "" {
		return why
	}
	rest = rest[i+1:]
	if len(rest) < 4 || rest[0] != ' ' {
		return "no status after the request line"
	}
	if rec.Status, ok = status(rest[1:4]); !ok || len(rest) > 4 && rest[4] != ' ' {
		return "status " + quote(field(rest[1:])) + " is not a three-digit code"
	}
	rest = rest[4:]
	// Bytes sent, then, in the Combined format, the referer and the
	// user agent.
	p.vals[slotReferer], p.vals[slotAgent] = "", ""
	if i = bytes.IndexByte(rest, '"'); i >= 0 {
		rest = rest[i+1:]
		if i = closingQuote(rest); i >= 0 {
			p.vals[slotReferer] = str(rest[:i])
			rest = rest[i+1:]
			if i = bytes.IndexByte(rest, '"'); i >= 0 {
				rest = rest[i+1:]
				if i = closingQuote(rest); i >= 0 {
					p.vals[slotAgent] = str(rest[:i])
				}
			}
		}
	}
	if !b.clientAddr(rec, p.vals[slotHost], p.prefix) {
		p.badIP = p.vals[slotHost]
	}
	return ""
}

// envoy reads a line of Envoy's default access log format,
//
//	[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%" "%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%"
//
// into rec. The format logs no client address but X-Forwarded-For: the
// client IP is its last address, the one Envoy appended for the peer it
// served (with use_remote_address, as an edge proxy has it); Envoy
// versions that log more fields after these are read too.
func (p *lineParser) envoy(line []byte, rec *Record, b *batch) string {
	if len(line) < 2 || line[0] != '[' {
		return "no [start time]"
	}
	i := bytes.IndexByte(line, ']')
	if i < 0 {
		return "no [start time]"
	}
	t, ok := p.tc.rfc3339(line[1:i])
	if !ok {
		return "start time " + quote(line[1:i]) + " is not RFC 3339"
	}
	rec.Time = t
	rest := line[i+1:]
	if len(rest) < 2 || rest[0] != ' ' || rest[1] != '"' {
		return "no quoted request line after the start time"
	}
	rest = rest[2:]
	if i = bytes.IndexByte(rest, '"'); i < 0 {
		return "the request line has no closing quote"
	}
	if why := requestLine(rest[:i], rec); why != "" {
		return why
	}
	rest = rest[i+1:]
	if len(rest) < 4 || rest[0] != ' ' {
		return "no response code after the request line"
	}
	if rec.Status, ok = status(rest[1:4]); !ok || len(rest) > 4 && rest[4] != ' ' {
		return "response code " + quote(field(rest[1:])) + " is not a three-digit code"
	}
	rest = rest[4:]
	// %RESPONSE_FLAGS% and four numbers (or "-"), then five quoted values.
	for n := 0; n < 5; n++ {
		if len(rest) < 2 || rest[0] != ' ' {
			return "fewer fields than Envoy's default format has"
		}
		rest = rest[1:]
		if i = bytes.IndexByte(rest, ' '); i < 0 {
			i = len(rest)
		}
		if n == 0 {
			p.vals[slotFlags] = str(rest[:i])
		}
		rest = rest[i:]
	}
	for _, slot := range [...]int{slotXFF, slotAgent, slotRequestID, slotAuthority, slotUpstream} {
		if len(rest) < 3 || rest[0] != ' ' || rest[1] != '"' {
			return "fewer fields than Envoy's default format has"
		}
		rest = rest[2:]
		if i = bytes.IndexByte(rest, '"'); i < 0 {
			return "a quoted field has no closing quote"
		}
		p.vals[slot] = dash(str(rest[:i]))
		rest = rest[i+1:]
	}
	xff := p.vals[slotXFF]
	if j := lastIndexByte(xff, ','); j >= 0 {
		xff = xff[j+1:]
	}
	xff = trimSpace(xff)
	if xff == "" {
		rec.IP, rec.Addr = "", ""
		return ""
	}
	p.vals[slotHost] = xff
	if !b.clientAddr(rec, xff, p.prefix) {
		p.badIP = xff
	}
	return ""
}

// requestLine reads "METHOD TARGET PROTOCOL" (or "METHOD TARGET", as
// HTTP/0.9 sends it) into rec's Method and Path: the target's path as sent
// and as net/http reads it (see targetSpan), without its query; an
// absolute target's ("http://host/path") path.
//
// A request line of "-" or "" (or an Envoy line's "- - -"), which servers
// log for a connection that sent no request (nginx's 400 and 408), gives
// noRequest.
func requestLine(req []byte, rec *Record) string {
	if len(req) == 0 || req[0] == '-' && (len(req) == 1 || req[1] == ' ') {
		return noRequest
	}
	i := bytes.IndexByte(req, ' ')
	if i <= 0 {
		return "request line " + quote(req) + " is not METHOD PATH PROTOCOL"
	}
	for _, c := range req[:i] {
		if c <= ' ' || c >= 0x7f || c == '"' {
			return "request line " + quote(req) + " is not METHOD PATH PROTOCOL"
		}
	}
	rec.Method = str(req[:i])
	target := req[i+1:]
	if j := bytes.IndexByte(target, ' '); j >= 0 {
		target = target[:j]
	}
	s, e, ok := targetSpan(target)
	switch {
	case !ok:
		return "request target " + quote(target) + " is not a path"
	case s < 0:
		rec.Path = "/"
	default:
		rec.Path = str(target[s:e])
	}
	return ""
}

// noRequest is the reason parse gives for a line that logs no request
// (see requestLine): counted apart from the malformed lines.
const noRequest = "no request"

// targetSpan finds the path of a request target as net/http's server
// reads it (url.ParseRequestURI): origin form "/a/b?q" gives "/a/b", the
// query cut at the first '?' and nothing at '#' (a client sends no
// fragment, so "/a#b?q" gives "/a#b", as the middleware matches it);
// absolute form "https://host/a?q" gives "/a", and s < 0 when it has no
// path (the path is "/"); "*" (OPTIONS) gives "*". An authority that
// holds a '#' is no host: net/http refuses the request.
func targetSpan(t []byte) (s, e int, ok bool) {
	if len(t) == 0 {
		return 0, 0, false
	}
	if t[0] != '/' {
		if len(t) == 1 && t[0] == '*' {
			return 0, 1, true
		}
		i := bytes.Index(t, []byte("://"))
		if i <= 0 {
			return 0, 0, false
		}
		s = i + 3
		j := bytes.IndexAny(t[s:], "/?")
		if j < 0 {
			j = len(t) - s
		}
		if bytes.IndexByte(t[s:s+j], '#') >= 0 {
			return 0, 0, false
		}
		if s+j == len(t) || t[s+j] != '/' {
			return -1, -1, true
		}
		s += j
	}
	e = len(t)
	if j := bytes.IndexByte(t[s:], '?'); j >= 0 {
		e = s + j
	}
	return s, e, true
}

// status reads a three-digit status code, 100 to 999.
func status(b []byte) (int, bool) {
	if len(b) != 3 || b[0] < '1' || b[0] > '9' || b[1] < '0' || b[1] > '9' || b[2] < '0' || b[2] > '9' {
		return 0, false
	}
	return int(b[0]-'0')*100 + int(b[1]-'0')*10 + int(b[2]-'0'), true
}

// closingQuote returns the index of the '"' that closes a quoted field
// that starts at b[0] (after its opening quote), skipping quotes escaped
// with a backslash as nginx and Apache write them; -1 when there is none.
func closingQuote(b []byte) int {
	off := 0
	for {
		i := bytes.IndexByte(b[off:], '"')
		if i < 0 {
			return -1
		}
		j := off + i
		bs := 0
		for k := j - 1; k >= 0 && b[k] == '\\'; k-- {
			bs++
		}
		if bs%2 == 0 {
			return j
		}
		off = j + 1
	}
}

// field returns b up to its first space.
func field(b []byte) []byte {
	if i := bytes.IndexByte(b, ' '); i >= 0 {
		return b[:i]
	}
	return b
}

// quote quotes b for a malformed line's reason, at most 60 bytes of it.
func quote(b []byte) string {
	const most = 60
	cut := len(b) > most
	if cut {
		b = b[:most]
	}
	out := make([]byte, 0, len(b)+8)
	out = append(out, '"')
	for _, c := range b {
		switch {
		case c == '"' || c == '\\':
			out = append(out, '\\', c)
		case c < ' ' || c >= 0x7f:
			out = append(out, '\\', 'x', "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
		default:
			out = append(out, c)
		}
	}
	if cut {
		out = append(out, "..."...)
	}
	return string(append(out, '"'))
}

// dash returns s, or "" for "-", the value logs write for none.
func dash(s string) string {
	if s == "-" {
		return ""
	}
	return s
}

func lastIndexByte(s string, c byte) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func trimSpace(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
