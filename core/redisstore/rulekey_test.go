package redisstore_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/internal/redistest"
)

// TestRuleKeysCluster: rules keyed per client IP (two limits and a
// penalty), per user and path parameter, and per IP and header, through a
// core.Limiter on a Redis Cluster. Each key counts exactly; a key's '|',
// ':' and a parameter's braces are escaped in the Redis key, so each key
// is one hash tag and every counter it has (each limit, the penalty's
// ban and denials) is in that tag's slot.
func TestRuleKeysCluster(t *testing.T) {
	t.Parallel()
	cc := clusterClient(t, redistest.StartCluster(t))
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: login
      paths: ["/login"]
      limit: ["2/minute", "10/hour"]
      key: ip
      penalty: {after: 1, within: 1m, ban: 15m}
    - name: kb
      paths: ["/kb/{kb}/search"]
      limit: "2/minute"
      key: user+param:kb
    - name: api
      paths: ["/api"]
      limit: "2/minute"
      algorithm: gcra
      key: ip+header:X-Api-Key
`), "cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type req struct{ user, ip, apiKey string }
	lim := core.NewLimiter(cfg, core.WithStore(newStore(t, cc)), core.WithIdentityKey([]byte("k")))
	flow := &core.Flow[req]{
		Limiter:  lim,
		Key:      func(r req) (string, error) { return r.user, nil },
		ClientIP: func(r req) string { return r.ip },
		Header: func(r req, name string) string {
			if name == "X-Api-Key" {
				return r.apiKey
			}
			return ""
		},
	}
	hashed := "ip:203.0.113.7|h:" + lim.Key(core.SecretIdentity("X-Api-Key", "sk|{x}"))
	ctx := context.Background()
	for _, c := range []struct {
		r    req
		path core.Path
		key  string
	}{
		{req{"alice", "203.0.113.7", ""}, "/login", "ip:203.0.113.7"},
		{req{"bob", "203.0.113.7", ""}, "/kb/k%7B1%7D:x/search", "u:bob|p:k{1}:x"},
		{req{"alice", "203.0.113.8", "sk|{x}"}, "/api", "ip:203.0.113.8|h:" + lim.Key(core.SecretIdentity("X-Api-Key", "sk|{x}"))},
		{req{"alice", "203.0.113.7", "sk|{x}"}, "/api", hashed},
	} {
		for i := range 3 {
			d, err := flow.Decide(ctx, c.r, "GET", c.path, "")
			if err != nil || d.Err != nil || d.Key != c.key || d.Allowed != (i < 2) || d.Allowed && d.Result.Remaining != int64(1-i) {
				t.Fatalf("%s request %d: key %q, allowed %v, remaining %d, %v %v; want key %q, allowed %v", c.path, i+1, d.Key, d.Allowed, d.Result.Remaining, err, d.Err, c.key, i < 2)
			}
			if c.path == "/login" && i == 2 && !d.Penalty {
				t.Fatalf("the third login: no ban")
			}
		}
	}
	// The Redis keys: one hash tag per store key, escaped, each tag's
	// keys in one slot.
	var mu sync.Mutex
	byTag := map[string][]string{}
	err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		keys, err := c.Keys(ctx, "*").Result()
		mu.Lock()
		defer mu.Unlock()
		for _, k := range keys {
			open, end := strings.IndexByte(k, '{'), strings.IndexByte(k, '}')
			if open < 0 || end < open || strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 {
				t.Errorf("Redis key %q: want one hash tag", k)
				continue
			}
			byTag[k[open+1:end]] = append(byTag[k[open+1:end]], k)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	esc := strings.NewReplacer(":", "%3A", "|", "%7C", "{", "%7B", "}", "%7D")
	var tags []string
	for tag, keys := range byTag {
		tags = append(tags, tag)
		slot := slotOf(t, cc, keys[0])
		for _, k := range keys[1:] {
			if s := slotOf(t, cc, k); s != slot {
				t.Errorf("tag %q: %s in slot %d, %s in %d", tag, keys[0], slot, k, s)
			}
		}
		if n, want := len(keys), map[bool]int{true: 4, false: 1}[tag == esc.Replace("ip:203.0.113.7")]; n < want {
			t.Errorf("tag %q: %d keys %q, want at least %d", tag, n, keys, want)
		}
	}
	want := []string{esc.Replace("ip:203.0.113.7"), esc.Replace("u:bob|p:k{1}:x"), esc.Replace("ip:203.0.113.8|h:" + lim.Key(core.SecretIdentity("X-Api-Key", "sk|{x}"))), esc.Replace(hashed)}
	slices.Sort(tags)
	slices.Sort(want)
	if !slices.Equal(tags, want) {
		t.Errorf("hash tags %q, want %q", tags, want)
	}
}
