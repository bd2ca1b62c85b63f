package redisserver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	// SlotCount is the number of hash slots of a Redis Cluster.
	SlotCount = 16384
	// busOffset is the distance from a cluster node's client port to its
	// cluster bus port, fixed by Redis.
	busOffset = 10000
	// clusterTimeout bounds the wait for a new cluster to agree on its
	// slots.
	clusterTimeout = 10 * time.Second
	// nodeTimeout is every node's cluster-node-timeout, Redis's default.
	nodeTimeout  = 5 * time.Second
	probeTimeout = time.Second
)

// A Cluster is a Redis Cluster of masters only, each a redis-server
// process in cluster mode on a free port of 127.0.0.1, no replicas, the
// 16,384 hash slots split evenly among them in ranges (as redis-cli
// --cluster create splits them).
type Cluster struct {
	nodes []*Server
}

// StartCluster starts masters redis-servers in cluster mode (no
// persistence, as Start; cluster-require-full-coverage no), gives each its range of slots and a config
// epoch of its own, joins them with CLUSTER MEET and waits until every
// node reports cluster_state:ok, all 16,384 slots assigned and every
// other node known. Unlike redis-cli --cluster create, it can make a
// cluster of one master. On failure the nodes it started are stopped.
func StartCluster(masters int) (*Cluster, error) {
	if masters < 1 {
		return nil, fmt.Errorf("redisserver: a cluster of %d masters", masters)
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotInstalled
	}
	c := &Cluster{}
	for range masters {
		n, err := startNode(bin)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.nodes = append(c.nodes, n)
	}
	if err := c.join(); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// startNode starts one cluster-mode node in a temporary directory of its
// own (removed by Stop), on a port whose bus port is free too.
func startNode(bin string) (*Server, error) {
	dir, err := os.MkdirTemp("", "rlkit-bench-cluster-")
	if err != nil {
		return nil, err
	}
	extra := []string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", strconv.Itoa(int(nodeTimeout / time.Millisecond)),
		// As rlkit's documentation advises: a failed master fails only
		// its own slots (and redisstore.New does not warn).
		"--cluster-require-full-coverage", "no",
		// A node learns its own address from the nodes it meets: a
		// cluster of one would name itself with an empty host.
		"--cluster-announce-ip", "127.0.0.1",
	}
	return startOnFreePort(bin, dir, true, extra)
}

// join assigns each node its slots and config epoch, introduces the nodes
// to the first and waits until they agree.
func (c *Cluster) join() error {
	for i, n := range c.nodes {
		if _, err := command(n.addr, "CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1)); err != nil {
			return fmt.Errorf("%s: CLUSTER SET-CONFIG-EPOCH: %w", n.addr, err)
		}
		lo, hi := c.Slots(i)
		args := []string{"CLUSTER", "ADDSLOTS"}
		for s := lo; s <= hi; s++ {
			args = append(args, strconv.Itoa(s))
		}
		if _, err := command(n.addr, args...); err != nil {
			return fmt.Errorf("%s: CLUSTER ADDSLOTS %d-%d: %w", n.addr, lo, hi, err)
		}
	}
	for _, n := range c.nodes[1:] {
		host, port, _ := net.SplitHostPort(n.addr)
		if _, err := command(c.nodes[0].addr, "CLUSTER", "MEET", host, port); err != nil {
			return fmt.Errorf("%s: CLUSTER MEET %s: %w", c.nodes[0].addr, n.addr, err)
		}
	}
	deadline := time.Now().Add(clusterTimeout)
	for {
		err := c.check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis cluster %v not ready within %v: %w", c.Addrs(), clusterTimeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// check returns nil when every node reports cluster_state:ok, every slot
// assigned and every node known.
func (c *Cluster) check() error {
	want := map[string]string{
		"cluster_state":          "ok",
		"cluster_slots_assigned": strconv.Itoa(SlotCount),
		"cluster_known_nodes":    strconv.Itoa(len(c.nodes)),
	}
	for _, n := range c.nodes {
		v, err := command(n.addr, "CLUSTER", "INFO")
		if err != nil {
			return fmt.Errorf("%s: CLUSTER INFO: %w", n.addr, err)
		}
		info, _ := v.(string)
		for field, w := range want {
			if got := infoField(info, field); got != w {
				return fmt.Errorf("%s: %s:%s, want %s", n.addr, field, got, w)
			}
		}
	}
	return nil
}

// Slots returns the first and last hash slot of master i.
func (c *Cluster) Slots(i int) (lo, hi int) {
	n := len(c.nodes)
	return i * SlotCount / n, (i+1)*SlotCount/n - 1
}

// Addrs returns the masters' addresses, "127.0.0.1:port".
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.addr
	}
	return addrs
}

// Pids returns the masters' process IDs, in the order of Addrs.
func (c *Cluster) Pids() []int {
	pids := make([]int, len(c.nodes))
	for i, n := range c.nodes {
		pids[i] = n.Pid()
	}
	return pids
}

// Stop stops every node (as Server.Stop) and removes their directories.
func (c *Cluster) Stop() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(n.Stop)
	}
	wg.Wait()
}

// infoField returns the value of field in an INFO-style reply
// ("field:value" lines), or "".
func infoField(info, field string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// command sends one command to addr on a fresh connection and returns its
// RESP2 reply: a string (simple or bulk), an int64 or nil. An error reply
// is returned as the error; an array reply is an error too (no command
// here answers one).
func command(addr string, args ...string) (any, error) {
	conn, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(probeTimeout)); err != nil {
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
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty reply")
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
	}
	return nil, fmt.Errorf("unexpected reply %q", line)
}
