package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// probe sends one command to addr on a fresh connection and returns its
// RESP2 reply: a string (simple or bulk), an int64, nil, or a []any of
// those. An error reply is returned as the error.
//
// Polling uses this instead of a go-redis client: go-redis retries failed
// dials with backoff, logs each failure and, once its pool has seen enough
// of them, starts a background redialer that outlives Close by up to a
// second, which goleak in the calling package would report.
func probe(addr string, timeout time.Duration, args ...string) (any, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return nil, err
	}
	return readReply(bufio.NewReader(conn))
}

// probeString is probe for commands whose reply is a string.
func probeString(addr string, timeout time.Duration, args ...string) (string, error) {
	v, err := probe(addr, timeout, args...)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s: got reply %T, want a string", args[0], v)
	}
	return s, nil
}

func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty reply line")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return nil, errors.New(line[1:])
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return nil, fmt.Errorf("bad bulk length %q", line)
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return nil, fmt.Errorf("bad array length %q", line)
		}
		if n < 0 {
			return nil, nil
		}
		a := make([]any, n)
		for i := range a {
			if a[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		return a, nil
	default:
		return nil, fmt.Errorf("unexpected reply %q", line)
	}
}

// infoField returns the value of field in the text of an INFO or CLUSTER INFO
// reply ("field:value" lines), or "" when it is absent.
func infoField(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// slotsCovered counts the distinct hash slots a CLUSTER SLOTS reply assigns.
func slotsCovered(reply any) (int, error) {
	ranges, ok := reply.([]any)
	if !ok {
		return 0, fmt.Errorf("CLUSTER SLOTS: got %T, want an array", reply)
	}
	var seen [slotCount]bool
	n := 0
	for _, r := range ranges {
		fields, ok := r.([]any)
		if !ok || len(fields) < 3 {
			return 0, fmt.Errorf("CLUSTER SLOTS: malformed range %v", r)
		}
		lo, ok1 := fields[0].(int64)
		hi, ok2 := fields[1].(int64)
		if !ok1 || !ok2 || lo < 0 || hi >= slotCount || lo > hi {
			return 0, fmt.Errorf("CLUSTER SLOTS: malformed range %v", r)
		}
		for s := lo; s <= hi; s++ {
			if !seen[s] {
				seen[s] = true
				n++
			}
		}
	}
	return n, nil
}
