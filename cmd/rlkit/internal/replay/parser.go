package replay

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Formats are the log formats Options.Format names.
var Formats = []string{"clf", "json", "nginx-json", "caddy", "envoy"}

// jsonPresets are the field paths of the JSON formats, per logical field:
// candidates, the first one a line has winning. --field NAME=PATH
// replaces a field's candidates with PATH.
var jsonPresets = map[string]map[string][]string{
	"json": {
		"time": {"time", "ts", "timestamp", "@timestamp"}, "method": {"method"}, "path": {"path", "uri", "url"},
		"status": {"status"}, "ip": {"ip", "remote_addr", "client_ip"}, "user": {"user"}, "request": {"request"},
		"headers": {"headers"},
	},
	// nginx's log_format with escape=json, as commonly written: the
	// variables under their own names ($time_iso8601 or $time_local or
	// $msec, $remote_addr, $remote_user, $request or $request_method and
	// $request_uri, $status), and a request header X-Name as http_x_name.
	"nginx-json": {
		"time": {"time_iso8601", "time_local", "msec", "time"}, "method": {"request_method"}, "path": {"request_uri", "uri"},
		"status": {"status"}, "ip": {"remote_addr"}, "user": {"remote_user"}, "request": {"request"},
	},
	// Caddy's default JSON access log (logger http.log.access).
	"caddy": {
		"time": {"ts"}, "method": {"request.method"}, "path": {"request.uri"}, "status": {"status"},
		"ip": {"request.client_ip", "request.remote_ip"}, "user": {"user_id"}, "headers": {"request.headers"},
	},
}

// lineParser reads the lines of one log format into Records. It is used
// by one goroutine at a time.
type lineParser struct {
	format   string
	tc       timeCache
	vals     []string // the values a line gave, by slot
	ranks    []int    // the rank of each slot's value (JSON: see take)
	names    []string // each slot's name, for the reasons of malformed lines
	spec     *jsonSpec
	prefix   int       // IPv6 grouping (clientip.Config.IPv6PrefixLen)
	idSlot   int       // the identity's slot; -1 for the client IP
	planSlot int       // the plan's; -1 for none
	hdrs     []hdrSlot // the headers the rules count per, that the format logs
	// unlogged are the headers the rules count per that the format does
	// not log.
	unlogged []string
	// badIP is the line's client address when it is no IP address (the
	// line then has no client IP), else "".
	badIP string
}

type hdrSlot struct {
	name string
	slot int
}

// newLineParser makes the parser of o's format, reading the identity and
// plan o names and the request headers in headers (canonical names).
func newLineParser(o *Options, headers []string) (*lineParser, error) {
	p := &lineParser{format: o.Format, prefix: o.IPv6PrefixLen, idSlot: -1, planSlot: -1}
	if p.prefix <= 0 || p.prefix > 128 {
		p.prefix = 64
	}
	idKind, idName, err := source("--identity", o.Identity, true)
	if err != nil {
		return nil, err
	}
	planKind, planName, err := source("--plan", o.Plan, false)
	if err != nil {
		return nil, err
	}
	switch o.Format {
	case "clf", "envoy":
		if len(o.Fields) > 0 {
			return nil, fmt.Errorf("--field: the %s format has fixed fields; --field applies to json, nginx-json and caddy", o.Format)
		}
		fields, logged := clfFields, clfHeaders
		if o.Format == "envoy" {
			fields, logged = envoyFields, envoyHeaders
		}
		p.vals, p.ranks, p.names = make([]string, numTextSlots), make([]int, numTextSlots), make([]string, numTextSlots)
		for name, s := range fields {
			if p.names[s] == "" || len(name) > len(p.names[s]) {
				p.names[s] = name
			}
		}
		slot := func(flag, kind, name string) (int, error) {
			if kind == "field" {
				if s, ok := fields[name]; ok {
					return s, nil
				}
				return 0, fmt.Errorf("%s field:%s: the %s format has no field %q (it has %s)", flag, name, o.Format, name, keys(fields))
			}
			if s, ok := logged[name]; ok {
				return s, nil
			}
			return 0, fmt.Errorf("%s header:%s: the %s format logs no header %s (it logs %s)", flag, name, o.Format, name, keys(logged))
		}
		if idKind != "ip" {
			if p.idSlot, err = slot("--identity", idKind, idName); err != nil {
				return nil, err
			}
		}
		if planKind != "" {
			if p.planSlot, err = slot("--plan", planKind, planName); err != nil {
				return nil, err
			}
		}
		for _, h := range headers {
			if s, ok := logged[h]; ok {
				p.hdrs = append(p.hdrs, hdrSlot{h, s})
			} else {
				p.unlogged = append(p.unlogged, h)
			}
		}
		return p, nil
	case "json", "nginx-json", "caddy":
		return p, p.jsonSetup(o, idKind, idName, planKind, planName, headers)
	}
	return nil, fmt.Errorf("--log-format %q: want one of %s", o.Format, strings.Join(Formats, ", "))
}

// jsonSetup sets p up for a JSON format: the preset's paths, as --field
// changes them, and the identity's, plan's and headers' paths.
func (p *lineParser) jsonSetup(o *Options, idKind, idName, planKind, planName string, headers []string) error {
	paths := map[string][]string{}
	for k, v := range jsonPresets[o.Format] {
		paths[k] = v
	}
	explicit := map[string]string{} // header name → path, from --field header:NAME=PATH
	for _, f := range o.Fields {
		name, path, ok := strings.Cut(f, "=")
		if !ok || name == "" || path == "" {
			return fmt.Errorf("--field %q: want NAME=PATH, such as time=ts or header:X-Api-Key=api_key", f)
		}
		if h, ok := strings.CutPrefix(name, "header:"); ok {
			if !validHeader(h) {
				return fmt.Errorf("--field %q: %q is not a header name", f, h)
			}
			explicit[http.CanonicalHeaderKey(h)] = path
			continue
		}
		if _, ok := jsonFields[name]; !ok && name != "headers" {
			return fmt.Errorf("--field %q: unknown field %q (want time, method, path, status, ip, user, request, headers or header:NAME)", f, name)
		}
		paths[name] = []string{path}
	}
	p.spec = &jsonSpec{headers: map[string]int{}}
	n := numJSONSlots
	p.names = make([]string, n)
	for name, slot := range jsonFields {
		for rank, path := range paths[name] {
			p.spec.add(path, slot, rank)
		}
		p.names[slot] = orList(paths[name])
	}
	hasHeaders := len(paths["headers"]) > 0
	for _, path := range paths["headers"] {
		p.spec.addHeaders(path)
	}
	newSlot := func(name string) int {
		p.names = append(p.names, name)
		n++
		return n - 1
	}
	headerSlots := map[string]int{}
	header := func(h string) (int, bool) {
		if s, ok := headerSlots[h]; ok {
			return s, true
		}
		path, ok := explicit[h]
		auto := o.Format == "nginx-json"
		if !ok && !hasHeaders && !auto {
			return 0, false
		}
		s := newSlot("header " + h)
		headerSlots[h] = s
		if ok {
			p.spec.add(path, s, 0)
		}
		if hasHeaders {
			p.spec.headers[h] = s // rank 1: below an explicit path
		}
		if auto {
			p.spec.add("http_"+strings.ToLower(strings.ReplaceAll(h, "-", "_")), s, 2)
		}
		return s, true
	}
	pick := func(flag, kind, name string) (int, error) {
		if kind == "field" {
			if s, ok := jsonFields[name]; ok {
				return s, nil
			}
			s := newSlot(name)
			p.spec.add(name, s, 0)
			return s, nil
		}
		if s, ok := header(name); ok {
			return s, nil
		}
		return 0, fmt.Errorf("%s header:%s: the %s format has no headers object; say which field holds it with --field header:%s=PATH", flag, name, o.Format, name)
	}
	var err error
	if idKind != "ip" {
		if p.idSlot, err = pick("--identity", idKind, idName); err != nil {
			return err
		}
	}
	if planKind != "" {
		if p.planSlot, err = pick("--plan", planKind, planName); err != nil {
			return err
		}
	}
	for _, h := range headers {
		if s, ok := header(h); ok {
			p.hdrs = append(p.hdrs, hdrSlot{h, s})
		} else {
			p.unlogged = append(p.unlogged, h)
		}
	}
	p.vals, p.ranks = make([]string, n), make([]int, n)
	return nil
}

// source reads an --identity or --plan value: "ip" (identity only),
// "field:NAME" or "header:NAME"; "" is no plan.
func source(flag, v string, identity bool) (kind, name string, err error) {
	switch {
	case v == "" && !identity:
		return "", "", nil
	case v == "ip" && identity, v == "" && identity:
		return "ip", "", nil
	}
	kind, name, ok := strings.Cut(v, ":")
	switch {
	case ok && kind == "field" && name != "":
		return kind, name, nil
	case ok && kind == "header" && validHeader(name):
		return kind, http.CanonicalHeaderKey(name), nil
	}
	if identity {
		return "", "", fmt.Errorf("%s %q: want ip, field:NAME or header:NAME", flag, v)
	}
	return "", "", fmt.Errorf("%s %q: want field:NAME or header:NAME", flag, v)
}

func validHeader(h string) bool {
	if h == "" {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}

func keys(m map[string]int) string {
	var k []string
	for name := range m {
		k = append(k, name)
	}
	slices.Sort(k)
	return strings.Join(k, ", ")
}

func orList(s []string) string {
	switch len(s) {
	case 0:
		return "none"
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// parse reads line into rec; the reason the line is malformed, or "".
func (p *lineParser) parse(line []byte, rec *Record, b *batch) string {
	var why string
	p.badIP = ""
	switch p.format {
	case "clf":
		why = p.clf(line, rec, b)
	case "envoy":
		why = p.envoy(line, rec, b)
	default:
		why = p.json(line, rec, b)
	}
	if why != "" {
		return why
	}
	rec.ID, rec.Plan, rec.hdr = "", "", nil
	if p.idSlot >= 0 {
		rec.ID = dash(p.vals[p.idSlot])
	}
	if p.planSlot >= 0 {
		rec.Plan = dash(p.vals[p.planSlot])
	}
	if len(p.hdrs) > 0 {
		start := len(b.hdrs)
		for _, h := range p.hdrs {
			if v := dash(p.vals[h.slot]); v != "" {
				b.hdrs = append(b.hdrs, header{h.name, v})
			}
		}
		rec.hdr = b.hdrs[start:len(b.hdrs):len(b.hdrs)]
	}
	if rec.IP == "" && rec.ID == "" {
		why := "no client IP"
		if p.badIP != "" {
			why = p.ipName() + " " + quote(view(p.badIP)) + " is not an IP address"
		}
		if p.idSlot >= 0 {
			return "no identity (" + p.names[p.idSlot] + ") and " + why
		}
		return why
	}
	return ""
}

// ipName names where the format finds the client address, for the
// reasons of malformed lines.
func (p *lineParser) ipName() string {
	switch p.format {
	case "clf":
		return "client address"
	case "envoy":
		return "X-Forwarded-For's last address"
	}
	return "client IP (" + p.names[slotIP] + ")"
}
