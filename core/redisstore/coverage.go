package redisstore

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/internal/redisbound"
)

// coverageTimeout bounds the check New makes of a Redis Cluster's
// cluster-require-full-coverage: a cluster that does not answer within it
// delays New by that much at most.
const coverageTimeout = time.Second

// coverageParam is the Redis Cluster setting New checks.
const coverageParam = "cluster-require-full-coverage"

// coverageSection is the section of docs/redis.md that the warning of a
// Redis Cluster with cluster-require-full-coverage yes names: what the
// setting does to a store, and how to set it to no.
const coverageSection = "Cluster full coverage"

// coverageWarning is the warning New logs for such a cluster.
const coverageWarning = "rlkit: Redis Cluster nodes have cluster-require-full-coverage yes (Redis's default): " +
	"once one master fails, every node refuses every command, and no key is counted, until the failover; " +
	"set it to no on every node (CONFIG SET cluster-require-full-coverage no, and in redis.conf): " +
	"see \"" + coverageSection + "\" in docs/redis.md"

// checkCoverage asks every node of the cluster c (masters and replicas)
// for its cluster-require-full-coverage, within coverageTimeout, and logs
// one warning naming the nodes that say yes. A node that refuses CONFIG
// (managed services often disable it), or a cluster that does not answer
// in time, is logged at debug level only: the check never fails. It is
// skipped for a cluster the program describes itself (ClusterSlots),
// whose servers need not be in cluster mode.
func (s *Store) checkCoverage(c *redis.ClusterClient) {
	if c.Options().ClusterSlots != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), coverageTimeout)
	defer cancel()
	yes, err := redisbound.Call(ctx, s.bounded, &s.inflight, c, fullCoverage)
	if len(yes) > 0 {
		s.log.Warn(coverageWarning, slog.Any("nodes", yes), slog.String("docs", "docs/redis.md#cluster-full-coverage"))
	}
	if err != nil {
		s.log.Debug("redisstore: Redis Cluster's cluster-require-full-coverage not checked", slog.String("error", err.Error()))
	}
}

// fullCoverage returns the addresses, sorted, of the nodes of c that have
// cluster-require-full-coverage yes, and the error of a node (or of the
// cluster) that did not say.
func fullCoverage(ctx context.Context, c *redis.ClusterClient) ([]string, error) {
	var mu sync.Mutex
	var yes []string
	err := c.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error {
		addr := n.Options().Addr
		v, err := n.ConfigGet(ctx, coverageParam).Result()
		if err != nil {
			return fmt.Errorf("node %s: CONFIG GET %s: %w", addr, coverageParam, err)
		}
		if strings.EqualFold(strings.TrimSpace(v[coverageParam]), "yes") {
			mu.Lock()
			yes = append(yes, addr)
			mu.Unlock()
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(yes)
	return yes, err
}
